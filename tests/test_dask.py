"""Dask arrays and DataFrames as evaluation rows (``treeinner._dask``), on a
``distributed.LocalCluster`` of two worker processes that these tests start and close: every
method's result equals the in-memory result on the same rows (sums to 1e-10 relative, per-row
values exactly), uneven and empty partitions included, for XGBoost, LightGBM and CatBoost
models and for models trained with ``xgboost.dask`` and ``lightgbm.dask``."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd
import pytest

import treeinner
from treeinner import _dask
from treeinner._errors import InputError

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
xgb = pytest.importorskip("xgboost")
pytest.importorskip("xgboost.dask")
lgb = pytest.importorskip("lightgbm")
cb = pytest.importorskip("catboost")

N_TRAIN, N_EVAL, P = 600, 700, 5
COLUMNS = [f"x{j}" for j in range(P)]
# the Dask arrays carry no column names for the models trained on a DataFrame
pytestmark = pytest.mark.filterwarnings("ignore::treeinner.FeatureNamesWarning")
ROW_ADDITIVE = [
    "tree_inner",
    "tree_inner_saabas",
    "tree_inner_shap",
    "forest_inner",
    "forest_inner_shap",
    "forest_inner_initial",
    "abs_predecomp",
    "abs_saabas",
    "abs_shap",
    "total_gain",
]


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_TRAIN + N_EVAL, P))
    X[rng.random(X.shape) < 0.03] = np.nan
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2
    y = signal + rng.normal(size=X.shape[0])
    y3 = np.digitize(signal + rng.normal(size=X.shape[0]), [0.0, 1.0]).astype(np.float64)
    frame = pd.DataFrame(X, columns=COLUMNS)
    w = rng.uniform(0.5, 2.0, size=N_EVAL)
    return (
        frame.iloc[:N_TRAIN],
        y[:N_TRAIN],
        y3[:N_TRAIN],
        frame.iloc[N_TRAIN:],
        y[N_TRAIN:],
        y3[N_TRAIN:],
        w,
    )


def _models(data, client):
    Xt, yt, y3t, *_ = data
    yield "xgboost", xgb.XGBRegressor(n_estimators=15, max_depth=4).fit(Xt, yt), "y"
    yield "xgboost 3 classes", xgb.XGBClassifier(n_estimators=6, max_depth=3).fit(Xt, y3t), "y3"
    opts = {"n_estimators": 15, "num_leaves": 15, "verbose": -1, "min_child_samples": 5}
    yield "lightgbm", lgb.LGBMRegressor(**opts).fit(Xt, yt), "y"
    yield (
        "catboost",
        cb.CatBoostRegressor(iterations=15, depth=4, verbose=0, allow_writing_files=False).fit(
            Xt, yt
        ),
        "y",
    )
    dX = dd.from_pandas(Xt, npartitions=2)
    dy = dd.from_pandas(pd.Series(yt), npartitions=2)
    yield (
        "xgboost.dask",
        xgb.dask.DaskXGBRegressor(n_estimators=10, max_depth=3).fit(dX, dy),
        "y",
    )
    booster = xgb.dask.train(
        client,
        {"max_depth": 3, "eta": 0.3},
        xgb.dask.DaskDMatrix(client, dX, dy),
        num_boost_round=8,
    )
    yield "xgboost.dask.train", booster, "y"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dlgb = lgb.DaskLGBMRegressor(n_estimators=10, num_leaves=7, verbose=-1).fit(dX, dy)
    yield "lightgbm.dask", dlgb, "y"


@pytest.fixture(scope="module")
def models(data, client):
    return list(_models(data, client))


def _frame_with_empty(X: pd.DataFrame):
    """A Dask DataFrame of X's rows in partitions of uneven sizes, the first one empty."""
    return dd.concat(
        [
            dd.from_pandas(X.iloc[:0], npartitions=1),
            dd.from_pandas(X.iloc[:37], npartitions=1),
            dd.from_pandas(X.iloc[37:], npartitions=3),
        ]
    )


def _array_uneven(X: np.ndarray):
    """A Dask array of X's rows in uneven chunks, one of them empty, columns in two chunks."""
    rows = (0, 37, 251, 251, X.shape[0] - 539)
    return da.from_array(X, chunks=(100, 3)).rechunk((rows, (3, X.shape[1] - 3)))


def _collections(X: pd.DataFrame, y: np.ndarray):
    """(name, X, y) in Dask form: a DataFrame with a Dask Series label of the same frame, and a
    Dask array with in-memory labels."""
    frame = X.assign(label=y)
    dframe = _frame_with_empty(frame)
    yield "dataframe", dframe[COLUMNS], dframe["label"]
    yield "array", _array_uneven(X.to_numpy()), y


def _close(got, ref, rel=1e-10):
    """Equal to ``rel`` of the largest |ref|, NaN where ref is NaN (no standard error)."""
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    got, ref = np.nan_to_num(got), np.nan_to_num(ref)
    scale = max(float(np.max(np.abs(ref))), 1e-300)
    assert np.max(np.abs(got - ref)) <= rel * scale, np.max(np.abs(got - ref)) / scale


def test_test_collections_have_empty_and_uneven_partitions(data):
    Xv = data[3]
    for _, dX, _ in _collections(Xv, data[4]):
        parts = _dask.partitions(dX)
        sizes = [len(p.compute()) for p in parts]
        assert 0 in sizes and len(set(sizes)) > 2 and sum(sizes) == N_EVAL


def test_row_sums_equal_in_memory(data, models, client):
    *_, Xv, yv, y3v, w = data
    for i, (name, model, target) in enumerate(models):
        y = y3v if target == "y3" else yv
        # every attribution on the first model, one per model on the others (all take the
        # same partition path)
        attributions = ("predecomp", "saabas", "shap") if i == 0 else ("predecomp",)
        for kind, dX, dy in _collections(Xv, y):
            for fn in (treeinner.tree_inner, treeinner.forest_inner):
                for attribution in attributions:
                    ref = fn(model, Xv, y, attribution=attribution, sample_weight=w)
                    got = fn(model, dX, dy, attribution=attribution, sample_weight=w)
                    assert list(got.index) == list(ref.index), (name, kind)
                    _close(got, ref)


def test_importance_equals_in_memory(data, models, client):
    *_, Xv, yv, y3v, w = data
    for i, (name, model, target) in enumerate(models):
        y = y3v if target == "y3" else yv
        # with and without standard errors and weights, on the two kinds of collection in turn
        for j, (kind, dX, dy) in enumerate(_collections(Xv, y)):
            se, sw = (i + j) % 2 == 0, (w if (i + j) % 3 == 0 else None)
            ref = treeinner.importance(model, Xv, y, methods=ROW_ADDITIVE, se=se, sample_weight=sw)
            got = treeinner.importance(model, dX, dy, methods=ROW_ADDITIVE, se=se, sample_weight=sw)
            assert list(got.columns) == list(ref.columns), (name, kind)
            assert list(got.index) == list(ref.index), (name, kind)
            _close(got.to_numpy(), ref.to_numpy())


def test_unbiased_gain_exact_mode_equals_in_memory(data, models, client):
    """Squared error: the exact expectation over draws, from per-node sums added over the
    partitions; its per-split table and standard errors too."""
    *_, Xv, yv, _, _ = data
    for name, model, target in models:
        if target != "y":
            continue
        for _kind, dX, dy in _collections(Xv, yv):
            _close(treeinner.unbiased_gain(model, dX, dy), treeinner.unbiased_gain(model, Xv, yv))
            if name in ("xgboost", "lightgbm"):
                got = treeinner.unbiased_gain(model, dX, dy, per_split=True)
                ref = treeinner.unbiased_gain(model, Xv, yv, per_split=True)
                numbers = ["unbiased_gain", "se", "p_value", "k", "n_node", "n_left", "n_right"]
                _close(got[numbers].to_numpy(), ref[numbers].to_numpy())
                methods = ["unbiased_gain", "tree_inner"]
                got = treeinner.importance(model, dX, dy, methods=methods, se=True)
                ref = treeinner.importance(model, Xv, yv, methods=methods, se=True)
                _close(got.to_numpy(), ref.to_numpy())


def test_per_row_values_are_lazy_and_exact(data, models, client):
    Xv = data[3]
    for name, model, _ in models:
        ens = treeinner.from_model(model)
        for kind, dX, _ in _collections(Xv, data[4]):
            margin = ens.predict_margin(dX)
            assert _dask.is_dask(margin), (name, kind)
            assert np.array_equal(margin.compute(), ens.predict_margin(Xv)), (name, kind)
            leaves = ens.leaf_index(dX)
            assert leaves.dtype == np.int32
            assert np.array_equal(leaves.compute(), ens.leaf_index(Xv)), (name, kind)
            for fn in (treeinner.predecomp, treeinner.saabas, treeinner.tree_shap):
                got, ref = fn(model, dX), fn(model, Xv)
                assert _dask.is_dask(got.values), (name, kind, fn.__name__)
                assert np.array_equal(got.values.compute(), ref.values), (name, kind, fn.__name__)
                assert np.array_equal(got.bias, ref.bias)
            if kind == "array":  # X's row chunks (Dask drops the empty one)
                assert margin.chunks[0] == tuple(c for c in dX.chunks[0] if c)


def test_to_frame_of_lazy_values_is_a_dask_frame(data, models, client):
    Xv = data[3]
    model = models[0][1]
    got = treeinner.predecomp(model, _frame_with_empty(Xv)).to_frame()
    assert _dask.is_dask(got) and list(got.columns) == COLUMNS
    ref = treeinner.predecomp(model, Xv).to_frame()
    assert np.array_equal(got.compute().to_numpy(), ref.to_numpy())


def test_the_ensemble_is_scattered_once(data, models, client):
    ens = treeinner.from_model(models[0][1])
    shared = _dask._shared((ens, None))
    assert isinstance(shared, distributed.Future)
    # broadcast: every worker holds it before any task runs
    assert len(client.who_has([shared])[shared.key]) == 2


def test_permutation_equals_in_memory(data, models, client):
    """The same permutations for the same random_state whatever the partitioning: every
    model, both kinds of collection, with and without weights."""
    *_, Xv, yv, y3v, w = data
    for i, (name, model, target) in enumerate(models):
        y = y3v if target == "y3" else yv
        for j, (kind, dX, dy) in enumerate(_collections(Xv, y)):
            sw = w if (i + j) % 2 else None
            kw = {"methods": ["permutation"], "n_repeats": 2, "random_state": 7}
            ref = treeinner.importance(model, Xv, y, sample_weight=sw, **kw)
            got = treeinner.importance(model, dX, dy, sample_weight=sw, **kw)
            assert list(got.index) == list(ref.index), (name, kind)
            assert ref["permutation"].max() > 0.05, (name, kind)
            _close(got.to_numpy(), ref.to_numpy())


def test_permutation_in_batches_and_of_raw_categorical_columns(data, client, monkeypatch):
    """A CatBoost model with categorical features permutes the raw columns (categories
    and all) on every partition; values drawn in many small batches (one feature at a time
    per pass) give the same scores as one batch in memory."""
    from treeinner import _gain

    Xt, yt, _, Xv, yv, _, _ = data

    def with_cat(X):  # x0's signal in a categorical column only
        cat = pd.Categorical(np.where(X["x0"].fillna(0) > 0, "hi", "lo"))
        return X.drop(columns="x0").assign(cat=cat)

    model = cb.CatBoostRegressor(
        iterations=10, depth=3, verbose=0, allow_writing_files=False, cat_features=["cat"]
    ).fit(with_cat(Xt), yt)
    Xc = with_cat(Xv)
    kw = {"methods": ["permutation"], "n_repeats": 3, "random_state": 1}
    ref = treeinner.importance(model, Xc, yv, **kw)
    monkeypatch.setattr(_gain, "PERMUTED_BYTES", 8 * N_EVAL)  # one (feature, repeat) a pass
    frame = _frame_with_empty(Xc.assign(label=yv))
    got = treeinner.importance(model, frame[list(Xc.columns)], frame["label"], **kw)
    assert ref.loc["cat", "permutation"] == ref["permutation"].max() > 0.1
    _close(got.to_numpy(), ref.to_numpy())


def test_columns_of_one_parquet_dataset(data, models, client, tmp_path):
    """``lake[features]`` and ``lake["y"]`` of one ``read_parquet``: Dask partitions the
    projection of one column more coarsely than that of many, so the labels and weights are
    read with X, as one frame (``_dask.pieces``)."""
    *_, Xv, yv, _, w = data
    for i in range(7):  # files of 100 rows: Dask puts several in a partition of one column
        part = Xv.iloc[100 * i : 100 * (i + 1)]
        part.assign(y=yv[100 * i : 100 * (i + 1)], w=w[100 * i : 100 * (i + 1)]).to_parquet(
            tmp_path / f"part-{i}.parquet"
        )
    lake = dd.read_parquet(str(tmp_path / "*.parquet"))
    dX, dy, dw = lake[COLUMNS], lake["y"], lake["w"]
    # Dask 2026.8 fuses the one-column files into 3 partitions when it optimises the graph
    assert len(_dask.partitions(dX)) == 7 and len(_dask.partitions(dy)) <= 7
    parts, ys, ws = _dask.pieces(dX, dy, dw)
    assert len(parts) == len(ys) == len(ws) == 7
    model = models[0][1]
    for methods in (["tree_inner", "abs_shap"], ["permutation"]):
        kw = {"methods": methods, "random_state": 0, "n_repeats": 2}
        got = treeinner.importance(model, dX, dy, sample_weight=dw, **kw)
        _close(got.to_numpy(), treeinner.importance(model, Xv, yv, sample_weight=w, **kw))
    _close(treeinner.unbiased_gain(model, dX, dy), treeinner.unbiased_gain(model, Xv, yv))


def test_every_method_takes_dask_input(data, models, client):
    """importance()'s default methods (permutation and the unbiased gain among them) on a
    Dask DataFrame: the in-memory table."""
    *_, Xv, yv, _, _ = data
    model = models[0][1]
    ref = treeinner.importance(model, Xv, yv, random_state=0)
    got = treeinner.importance(model, _frame_with_empty(Xv), yv, random_state=0)
    assert list(got.columns) == list(ref.columns) and "permutation" in got.columns
    _close(got.to_numpy(), ref.to_numpy())


def test_what_dask_input_does_not_do_is_refused(data, models, client):
    *_, Xv, yv, _, _ = data
    model = models[0][1]
    dX = _frame_with_empty(Xv)
    classifier = models[1][1]  # softmax: no constant hessian, so unbiased_gain draws
    with pytest.raises(InputError, match="only its exact mode"):
        treeinner.unbiased_gain(classifier, dX, data[5])
    with pytest.raises(InputError, match="n_bootstrap"):
        treeinner.importance(model, dX, yv, methods=["tree_inner"], n_bootstrap=5)


def test_labels_partitioned_otherwise_are_aligned_by_row(data, models, client):
    *_, Xv, yv, _, _ = data
    model = models[0][1]
    dX = _frame_with_empty(Xv)
    with pytest.raises(InputError, match="y has 699 rows but X has 700"):
        treeinner.tree_inner(model, dX, yv[:-1])
    # labels partitioned otherwise (here persisted apart): cut again along X's partitions,
    # row i with row i as in memory
    ref = treeinner.tree_inner(model, Xv, yv)
    _close(treeinner.tree_inner(model, dX, dd.from_pandas(pd.Series(yv), npartitions=2)), ref)
    _close(treeinner.tree_inner(model, dX, da.from_array(yv, chunks=300)), ref)
    with pytest.raises(InputError, match="y has 699 rows but X has 700"):
        treeinner.tree_inner(model, dX, dd.from_pandas(pd.Series(yv[:-1]), npartitions=2))
    dy = da.from_array(yv, chunks=100)  # 7 chunks for 5 partitions of other sizes
    arr = _array_uneven(Xv.to_numpy())
    got = treeinner.tree_inner(model, arr, dy)  # arrays: re-chunked like X
    _close(got, treeinner.tree_inner(model, Xv.to_numpy(), yv))


def test_no_rows_at_all_is_refused(data, models, client):
    Xv = data[3]
    model = models[0][1]
    empty = dd.from_pandas(Xv.iloc[:0], npartitions=1)
    with pytest.raises(InputError, match="no rows"):
        treeinner.tree_inner(model, empty, np.zeros(0))
