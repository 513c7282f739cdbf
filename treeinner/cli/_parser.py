"""The ``treeinner`` argument parser: subcommands ``explain``, ``select``, ``demo``."""

from __future__ import annotations

import argparse
from typing import Any

from .._api import ATTRIBUTIONS
from .._methods import DEFAULT_CLI_METHODS, REGISTRY
from . import _commands
from ._compute import MODES
from ._errors import PROG, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _debug_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of any error",
    )


def _attribution_option(p: argparse.ArgumentParser) -> None:
    # the methods named by their family alone, such as tree_inner, take the attribution
    families = [name for name, m in REGISTRY.items() if m.attribution and name == m.family]
    p.add_argument(
        "--attribution",
        default="predecomp",
        metavar="A",
        help=f"attribution of {' and '.join(families)}: {ATTRIBUTIONS[0]} (default), "
        f"{', '.join(ATTRIBUTIONS[1:-1])} or {ATTRIBUTIONS[-1]}",
    )


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="model file (.json, .ubj, .txt, .cbm, .npz)")
    p.add_argument("--data", required=True, metavar="FILE", help="CSV, TSV or Parquet data")
    p.add_argument("--target", required=True, metavar="COLUMN", help="the label column")
    p.add_argument(
        "--sample-weight",
        "--weight",
        dest="weight",
        metavar="COLUMN",
        help="a sample-weight column (optional; the library's sample_weight)",
    )
    p.add_argument(
        "--reference",
        metavar="FILE",
        help="training data (same columns) for PreDecomp node values and the unbiased gain's "
        "training sums, needed for models that store no hessian covers (CatBoost losses "
        "other than RMSE)",
    )
    p.add_argument(
        "--random-state",
        "--seed",
        dest="seed",
        type=int,
        default=0,
        help="random seed of permutation importance and the unbiased gain (default 0; the "
        "library's random_state)",
    )
    _attribution_option(p)


def _common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--progress",
        choices=MODES,
        default=None,
        help="progress bar on stderr: auto (a terminal, after 2 s; default, or "
        "$TREEINNER_PROGRESS), always, never",
    )
    _debug_option(p)


def _explain_parser(sub: Any, func: Any) -> None:
    ex = sub.add_parser(
        "explain",
        help="importance of every feature of a saved model on a data set",
        description="Print one importance column per method for a saved model on a data set "
        "(normally held-out data: there a negative TreeInner marks a feature the model only "
        "overfit).",
    )
    _data_options(ex)
    ex.add_argument(
        "--method",
        action="extend",
        nargs="+",
        metavar="M",
        help=f"one or more of {', '.join(REGISTRY)} (also comma-separated; default: "
        f"{' '.join(DEFAULT_CLI_METHODS)}, {_commands.STORED_GAINS} left out for models "
        "without split gains)",
    )
    ex.add_argument("--out", metavar="FILE", help="write the table to FILE.csv or FILE.json")
    ex.add_argument("--plot", metavar="FILE", help="save a bar chart (FILE.png, .pdf, .svg)")
    ex.add_argument("--top", type=int, metavar="N", help="print and plot only the top N rows")
    ex.add_argument(
        "--n-repeats", type=int, default=5, metavar="N", help="permutations per feature (default 5)"
    )
    ex.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="B",
        help="add a standard-error column m_se per method from B bootstrap resamples of the "
        "rows (error bars in --plot; computed in one call, B+1 times the work)",
    )
    ex.add_argument(
        "--chunk-rows",
        type=int,
        metavar="N",
        help="rows per chunk of the row-additive methods (default: sized from the speed)",
    )
    _common_options(ex)
    ex.set_defaults(func=func)


def _select_parser(sub: Any, func: Any, default_method: str) -> None:
    se = sub.add_parser(
        "select",
        help="print the features treeinner.select_features keeps",
        description="Print, one per line, the features whose importance on the data (normally "
        "held-out data) is above the threshold, in the model's feature order.",
    )
    _data_options(se)
    se.add_argument(
        "--method",
        default=default_method,
        metavar="M",
        help=f"importance method (default {default_method})",
    )
    se.add_argument("--threshold", type=float, default=0.0, help="keep scores above T (default 0)")
    se.add_argument("--top-k", type=int, metavar="K", help="then keep at most the K highest")
    se.add_argument("--out", metavar="FILE", help="also write the names to FILE")
    _common_options(se)
    se.set_defaults(func=func)


def build_parser() -> argparse.ArgumentParser:
    """The ``treeinner`` argument parser (subcommands ``explain``, ``select``, ``demo``)."""
    from .. import __version__

    parser = _Parser(
        prog=PROG,
        description="Explain already-trained gradient boosted trees (XGBoost, LightGBM, "
        "CatBoost) and select the features they really use.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _debug_option(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    _explain_parser(sub, _commands.explain)
    _select_parser(sub, _commands.select, _commands.select_default_method())
    de = sub.add_parser("demo", help="run the demo (python -m treeinner.demo)")
    _debug_option(de)
    de.set_defaults(func=_commands.demo)
    return parser
