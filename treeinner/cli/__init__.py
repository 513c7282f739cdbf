"""The ``treeinner`` command line: explain a saved model file, select features, run the demo.

**treeinner explain** MODEL --data FILE --target COLUMN [--method M ...] [--attribution A] [--alpha
A] [--out FILE.csv|FILE.json] [--plot FILE.png] [--no-se] [--quiet]: reads a model file (XGBoost
``.json``/``.ubj``, LightGBM ``.txt``, CatBoost ``.cbm``/``.json``, treeinner ``.npz``; the type is
recognised from the content) and a data set (``.csv``, optionally compressed, ``.tsv`` or
``.parquet``, by extension), splits off the target column (and ``--weight COLUMN``, if given) and
prints the significance table of ``treeinner.significance``: one block per method, features sorted
by score (``--top N`` prints N per method), with the score, its standard error over the rows, the
``1 - alpha`` interval (``--alpha``, default 0.05), the one-sided p-value of "score <= 0" and the
Benjamini-Hochberg q-value; methods without a one-pass standard error (``total_gain``,
``permutation``) have NaN statistics, and for multiclass models the printed rows are the totals
over the classes. The default methods are the recommended ``forest_inner_initial`` (ForestInner's
initial form with the ``--attribution``, PreDecomp by default;
``treeinner._methods.RECOMMENDED_METHOD``), ``abs_shap`` (mean |TreeSHAP|, the usual SHAP bar plot)
and ``total_gain`` (the booster's split gains; left out for models that store none, such as
CatBoost's). ``--out`` writes the whole table (CSV with its columns ``method``, ``feature``,
[``output``,] ``score``, ``se``, ``ci_low``, ``ci_high``, ``p_value``, ``q_value``, per class and
total for multiclass models; or JSON with the run's settings, the table under ``significance`` and
the scores per feature under ``importance`` as before), ``--plot`` a bar chart of the methods side
by side with their intervals and the features with q <= alpha starred
(``treeinner.plot.importance``). ``--no-se`` prints and writes the score table instead (one column
per method, the totals over the classes, as ``treeinner.importance``); ``--bootstrap B`` the score
table with bootstrap standard errors ``m_se``. Data columns the model does not use are ignored with
a warning; missing ones are an error. Object (string) columns of categorical features become pandas
categoricals. ``--reference FILE`` gives the training data for models that store no hessian covers
(CatBoost losses other than RMSE). ``--seed`` (default 0) seeds permutation importance and the
unbiased gain.

Dask: ``--data`` as a glob pattern or a directory reads the files (Parquet, CSV or TSV, one
type) with Dask, lazily, a partition at a time; ``--scheduler ADDRESS`` computes on a running
Dask cluster and ``--scheduler local`` (``--workers N``) on a local one started and closed for
the run (any ``--data`` is then read with Dask). Every method takes the Dask path of the
library (per-partition sums added up); ``--bootstrap`` and ``--chunk-rows`` are refused, and
``n_rows`` in the JSON comes from the Parquet metadata (null for CSV).

**treeinner select** MODEL --data FILE --target COLUMN [--method M] [--attribution A]
[--threshold T] [--top-k K] [--out FILE]: prints the names of the features
``treeinner.select_features`` keeps, one per line (and writes them to ``--out``). With
``--strategy recursive --reference TRAIN [--params JSON] [--step S]``: the features
``TreeInnerSelector(strategy="recursive")`` keeps, the booster rebuilt from the training
parameters its file stores (``adapters.training_estimator``) and refit on TRAIN plus FILE.

**treeinner demo**: runs ``python -m treeinner.demo`` (needs XGBoost).

Errors: bad input (missing or unreadable files, an unknown target column or method, data that
does not match the model's features, labels invalid for the model's objective, empty data, an
unsupported file type, a missing optional dependency) prints one line ``treeinner: error:
...`` on stderr and exits with status 1; command-line usage errors exit with status 2.
Anything else is a bug: it is also reported on one line (exit status 3) unless ``--debug`` is
given, which shows the full traceback of any error. Library warnings are printed as
``treeinner: warning: ...`` lines.

Methods: every name ``--method`` accepts, and what it computes, is an entry of the method
registry ``treeinner._methods`` (``tree_inner``, ``forest_inner`` and ``forest_inner_initial``
take ``--attribution``);
the command line knows no method by name beyond its default list.

Progress: row-additive methods (TreeInner and ForestInner with any attribution, and the mean
|attribution| baselines; with ``--reference`` too) are computed over chunks of rows, each
chunk one call of the registry's computation, and combined exactly: the chunks' per-row moments
(``Method.moments``: sums of the per-row terms and of their squares) add up to those of all
rows, which give the scores and standard errors (``_stats.Moments``); with ``--no-se`` the
chunks' sums (means divided by the total row weight). A tqdm progress bar on stderr, counting
rows, advances per chunk; ``permutation`` and ``unbiased_gain`` advance it once, as does
everything with ``--bootstrap`` (one library call). The bar appears only when stderr is a
terminal and the work has lasted over two seconds; ``--progress always|never`` or the
environment variable ``TREEINNER_PROGRESS`` overrides that, ``--quiet`` turns it off. With
Dask input the bar counts partition tasks (``_dask.reporting``), its total growing as the
library schedules them.

Layout: ``_parser`` (the argument parser), ``_io`` (data and model files in, tables and plots
out), ``_commands`` (the subcommands), ``_compute`` (the chunked computation and the progress
bar), ``_errors`` (error types).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence

from ._errors import PROG, CLIError, UsageError, cli_spelling, one_line
from ._parser import build_parser

__all__ = ["CLIError", "build_parser", "main"]

_EXPECTED = (CLIError, ValueError, TypeError, OSError, ImportError, NotImplementedError)


def _error(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    sys.stderr.flush()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    from tqdm import tqdm

    # through tqdm: a progress bar on the screen is cleared first and redrawn after
    tqdm.write(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)
    sys.stderr.flush()


def _run(args, debug: bool) -> int:
    try:
        return args.func(args)
    except KeyboardInterrupt:
        if debug:
            raise
        _error("interrupted")
        return 130
    except _EXPECTED as e:
        if debug:
            raise
        _error(cli_spelling(one_line(e)))
        return 1
    except Exception as e:
        if debug:
            raise
        _error(
            f"unexpected {type(e).__name__}: {one_line(e)} (this is a bug: rerun with "
            "--debug for the traceback and please report it)"
        )
        return 3


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``treeinner`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 on success, 1 for bad input (one ``treeinner: error:`` line on stderr),
        2 for a usage error, 3 for an unexpected error, 130 when interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except UsageError as e:
        _error(str(e))
        return 2
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _run(args, getattr(args, "debug", False))
