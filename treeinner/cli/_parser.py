"""The ``treeinner`` argument parser: subcommands ``explain``, ``select``, ``demo``."""

from __future__ import annotations

import argparse
from typing import Any

from .._api import ATTRIBUTIONS
from .._methods import DEFAULT_CLI_METHODS, OPTIONAL, REGISTRY
from ..selection import DEFAULT_ALPHA, DEFAULT_RULE, RULES
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
        f"{', '.join(ATTRIBUTIONS[1:-1])} or {ATTRIBUTIONS[-1]} (explain also takes "
        "interventional, with --background)",
    )


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="model file (.json, .ubj, .txt, .cbm, .npz)")
    p.add_argument(
        "--data",
        required=True,
        metavar="FILE",
        help="CSV, TSV or Parquet data; a glob pattern in quotes ('data/*.parquet') or a "
        "directory reads many files with Dask, a partition at a time (memory bounded by a "
        "few partitions, not the data's size)",
    )
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
        help="training data (same columns) for PreDecomp node values, total gain and the "
        "unbiased gain's training sums, needed for models that store no hessian covers or "
        "split gains (CatBoost losses other than RMSE); combines with --bootstrap (the rows of "
        "--data are resampled, the training data stays fixed)",
    )
    p.add_argument(
        "--soft-labels",
        action="store_true",
        help="the target holds probabilities on purpose (soft labels): a binary classifier "
        "then accepts values in [0, 1] instead of refusing anything but 0 and 1",
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
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="compute on a running Dask cluster (its scheduler's address, e.g. "
        "tcp://10.0.0.5:8786), or 'local' to start a local cluster of worker processes for "
        "the run; --data is then read with Dask (default for several files: Dask's "
        "threads in this process)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes of --scheduler local (default: Dask's choice for this machine)",
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
        description="Print, for every method, the importance of every feature of a saved "
        "model on a data set (normally held-out data: there a score about zero or below marks a "
        "feature the model only overfit), with its standard error over the rows, a 1 - alpha "
        "interval, the one-sided p-value of 'score <= 0' and its Benjamini-Hochberg q-value "
        "(NaN for methods without a one-pass standard error).",
    )
    _data_options(ex)
    ex.add_argument(
        "--method",
        action="extend",
        nargs="+",
        metavar="M",
        help=f"one or more of {', '.join(REGISTRY)} (also comma-separated; default: "
        f"{' '.join(DEFAULT_CLI_METHODS)}, {_commands.STORED_GAINS} left out for models "
        "without split gains); on request also "
        f"{', '.join(m for m in OPTIONAL if not OPTIONAL[m].pairwise)} (with --background) "
        f"and, alone, the pairwise {', '.join(m for m in OPTIONAL if OPTIONAL[m].pairwise)} "
        "(a feature x feature matrix, without standard errors)",
    )
    ex.add_argument(
        "--background",
        metavar="FILE",
        help="background rows (same columns; the target and weight columns, if there, are "
        "ignored) of the methods with interventional TreeSHAP, e.g. a sample of the training "
        "data",
    )
    ex.add_argument(
        "--out",
        metavar="FILE",
        help="write the table to FILE.csv (the significance table's columns: method, feature, "
        "[output,] score, se, ci_low, ci_high, p_value, q_value) or FILE.json (the settings, "
        "the scores and the significance table)",
    )
    ex.add_argument(
        "--plot",
        metavar="FILE",
        help="save a bar chart with 1 - alpha intervals (FILE.png, .pdf, .svg)",
    )
    ex.add_argument(
        "--top", type=int, metavar="N", help="print and plot only the top N rows (per method)"
    )
    ex.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        metavar="A",
        help="the intervals are 1 - A normal intervals (default 0.05: 95%%); q-values <= A "
        "are marked in --plot",
    )
    ex.add_argument(
        "--no-se",
        action="store_true",
        help="scores only, one column per method (the table of treeinner.importance, as "
        "before standard errors existed; --out then writes that table)",
    )
    ex.add_argument(
        "--n-repeats", type=int, default=5, metavar="N", help="permutations per feature (default 5)"
    )
    ex.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="B",
        help="instead of the significance table, the score table with a standard-error "
        "column m_se per method from B bootstrap resamples of the rows (intervals in --plot; "
        "computed in one call, B+1 times the work)",
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
        description="Print, one per line, the features treeinner.select_features keeps, judged "
        "by their importance on the data (normally held-out data) and its standard error over "
        "the rows, in the model's feature order.",
    )
    _data_options(se)
    se.add_argument(
        "--method",
        default=default_method,
        metavar="M",
        help=f"importance method (default {default_method})",
    )
    se.add_argument(
        "--rule",
        choices=RULES,
        default=None,
        help="which features to keep: fdr (q-value <= alpha: shown to help on new data), "
        "interval (drop only the confidently useless: keep those whose one-sided 1-alpha "
        "upper bound is above 0), threshold (score above --threshold); default "
        f"{DEFAULT_RULE} for methods with a p-value, interval for mean |attribution|, "
        "threshold for the methods without a standard error or when --threshold is given",
    )
    se.add_argument(
        "--alpha",
        type=float,
        default=_commands.select_default("alpha"),
        metavar="A",
        help="level of the fdr and interval rules, between 0 and 0.5 (default: the rule's, "
        + ", ".join(f"{a:g} for {r}" for r, a in DEFAULT_ALPHA.items())
        + ")",
    )
    se.add_argument(
        "--threshold",
        type=float,
        default=None,
        metavar="T",
        help="the threshold rule: keep scores above T (default 0)",
    )
    se.add_argument("--top-k", type=int, metavar="K", help="then keep at most the K highest scores")
    se.add_argument(
        "--strategy",
        choices=("rule", "recursive"),
        default="rule",
        help="rule: keep what --rule passes on the model as it is (default); recursive: "
        "recursive held-out elimination, refitting the model's booster on the --reference "
        "rows plus the --data rows with 5-fold cross-fitting, the set chosen on the held-out "
        "loss curve (treeinner.TreeInnerSelector(strategy='recursive'))",
    )
    se.add_argument(
        "--params",
        metavar="JSON",
        help="with --strategy recursive: training parameters of the refits as a JSON object, "
        "over those the model file stores (an XGBoost model file stores none of its tree "
        "parameters: give them here)",
    )
    se.add_argument(
        "--step",
        type=float,
        default=0.2,
        metavar="S",
        help="with --strategy recursive: features dropped per step, a fraction below 1 of "
        "those left or a count (default 0.2)",
    )
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
    wu = sub.add_parser(
        "warm-up",
        help="compile and cache the kernels now (e.g. when building a container image)",
        description="Compile treeinner's Numba kernels and cache them on disk, so that later "
        "processes load them instead of compiling them on their first call: run it once "
        "where the cache persists (a container image build step, a CI cache). It trains "
        "small native models on generated data and runs every method on them.",
    )
    _debug_option(wu)
    wu.set_defaults(func=_commands.warm_up)
    return parser
