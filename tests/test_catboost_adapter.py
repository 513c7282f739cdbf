"""The CatBoost adapter reproduces CatBoost's raw predictions and leaf indices.

CatBoost computes ``scale * (sum of leaf values in float64, in tree order) + bias``; treeinner
starts from the bias and adds the (scale-folded) leaves, so margins agree to float64 rounding of
the summed magnitudes (asserted at 1e-12 relative to them), while the leaves each row reaches,
and therefore CatBoost's own sum, are reproduced bit for bit.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import treeinner

pytest.importorskip("catboost")

from tests._cb_cases import adversarial_rows, cb, fit, make_case, make_X, make_y, model_doc

N_CASES = 204


def _convert(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return treeinner.from_model(model)


def _leaf_values(ens, leaves):
    """(n, n_trees) value of the leaf each row reaches, from ens.leaf_index output."""
    out = np.empty(leaves.shape)
    for t in range(ens.n_trees):
        lo, hi = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        ids = ens.leaf_id[lo:hi]
        table = np.full(int(ids.max()) + 1, np.nan)
        table[ids[ids >= 0]] = ens.value[lo:hi][ids >= 0]
        out[:, t] = table[leaves[:, t]]
    return out


def _check(ens, model, X):
    K = ens.n_outputs
    ours = ens.predict_margin(X).reshape(X.shape[0], K)
    theirs = np.asarray(model.predict(X, prediction_type="RawFormulaVal"), dtype=np.float64)
    theirs = theirs.reshape(ours.shape)
    leaves = ens.leaf_index(X)
    ref = model.calc_leaf_indexes(cb.Pool(X)).astype(np.int64)
    for k in range(K):  # a MultiClass tree is K trees of one structure, class-major per round
        assert np.array_equal(leaves[:, k::K], ref), f"class {k}: leaf indices differ"
    vals = _leaf_values(ens, leaves)
    scale = ens.params["scale"]
    for k in range(K):
        # CatBoost's own arithmetic on our leaves: bit for bit
        acc = np.zeros(X.shape[0])
        for t in range(k, ens.n_trees, K):
            acc = acc + vals[:, t] / scale
        if scale == 1.0:
            assert np.array_equal(acc + ens.base_margin[k], theirs[:, k])
        mag = np.abs(vals[:, k::K]).sum(1) + abs(ens.base_margin[k])
        assert np.all(np.abs(ours[:, k] - theirs[:, k]) <= 1e-12 * mag), (
            f"{np.max(np.abs(ours[:, k] - theirs[:, k]) / mag):.3g} relative"
        )


@pytest.mark.parametrize("seed", range(N_CASES))
def test_margin_and_leaves_exact(seed):
    case = make_case(seed)
    ens = _convert(case.model)
    doc = model_doc(case.model)
    X = adversarial_rows(doc, case.X, np.random.default_rng(10_000 + seed))
    _check(ens, case.model, X)
    assert ens.objective == case.params["loss_function"].split(":")[0]
    assert ens.learning_rate[0] == pytest.approx(case.params["learning_rate"], rel=1e-7)
    # CatBoost raises l2_leaf_reg 0 to 1e-20
    assert ens.reg_lambda == pytest.approx(max(case.params["l2_leaf_reg"], 1e-20), rel=1e-7)
    if case.params["loss_function"] == "RMSE":
        assert np.all(np.isfinite(ens.cover))
    else:
        assert np.all(np.isnan(ens.cover))


@pytest.mark.parametrize("seed", range(0, N_CASES, 6))
def test_saved_json_exact(seed, tmp_path):
    case = make_case(seed)
    path = tmp_path / "model.json"
    case.model.save_model(str(path), format="json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = treeinner.load(path)
    X = adversarial_rows(model_doc(case.model), case.X, np.random.default_rng(seed))
    _check(ens, case.model, X)


@pytest.mark.parametrize("seed", [3, 10, 23])  # MultiClass, Logloss, Tweedie across policies
def test_saved_cbm_exact(seed, tmp_path):
    case = make_case(seed)
    path = tmp_path / "model.cbm"
    case.model.save_model(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = treeinner.load(path)
    X = adversarial_rows(model_doc(case.model), case.X, np.random.default_rng(seed))
    _check(ens, case.model, X)


def test_scale_and_bias_folded():
    rng = np.random.default_rng(5)
    X = make_X(rng, 300, 4, 0.1)
    y = make_y(rng, "RMSE", X)
    for grow in ("SymmetricTree", "Lossguide"):
        m = fit({"loss_function": "RMSE", "iterations": 8, "depth": 4, "grow_policy": grow}, X, y)
        m.set_scale_and_bias(0.7, -1.25)
        ens = _convert(m)
        assert ens.base_margin.tolist() == [-1.25]
        assert np.allclose(ens.learning_rate, 0.7 * m.get_all_params()["learning_rate"])
        _check(ens, m, adversarial_rows(model_doc(m), X, rng))


def test_deep_and_wide_models():
    """Depth 8-10 oblivious trees (past the kernels' top layout) and 60-leaf Lossguide trees."""
    rng = np.random.default_rng(6)
    X = make_X(rng, 2000, 6, 0.05)
    y = make_y(rng, "RMSE", X)
    for params in (
        {"depth": 10, "grow_policy": "SymmetricTree"},
        {"depth": 10, "grow_policy": "Depthwise"},
        {"max_leaves": 60, "grow_policy": "Lossguide", "depth": 12},
    ):
        m = fit({"loss_function": "RMSE", "iterations": 4, "random_seed": 1, **params}, X, y)
        ens = _convert(m)
        _check(ens, m, adversarial_rows(model_doc(m), X, rng, 2000))


def test_nan_mode_forbidden_routes_nan_left():
    """nan_mode Forbidden stores "AsIs": CatBoost compares NaN > border as false (left)."""
    rng = np.random.default_rng(7)
    X = make_X(rng, 300, 3, 0.0)
    y = make_y(rng, "RMSE", X)
    m = fit({"loss_function": "RMSE", "iterations": 5, "depth": 3, "nan_mode": "Forbidden"}, X, y)
    ens = _convert(m)
    Xt = X.copy()
    Xt[::3, 0] = np.nan
    Xt[1::3, 1] = np.nan
    _check(ens, m, Xt)
    assert np.all(ens.default_left[ens.left >= 0] == 1)


def test_sample_weights_and_feature_names():
    import pandas as pd

    rng = np.random.default_rng(8)
    X = make_X(rng, 300, 3, 0.1)
    y = make_y(rng, "Logloss", X)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    m = cb.CatBoostClassifier(iterations=5, depth=3, verbose=0, allow_writing_files=False)
    m.fit(df, y, sample_weight=rng.uniform(0.5, 2, 300))
    ens = _convert(m)
    assert ens.feature_names == ("a", "b", "c") and ens.named
    assert np.array_equal(ens.predict_margin(df[["c", "a", "b"]]), ens.predict_margin(X))
    _check(ens, m, X)


def test_module_roundtrip_npz(tmp_path):
    case = make_case(3)
    ens = _convert(case.model)
    ens.save(tmp_path / "e.npz")
    back = treeinner.load(tmp_path / "e.npz")
    X = adversarial_rows(model_doc(case.model), case.X, np.random.default_rng(0))
    assert np.array_equal(back.predict_margin(X), ens.predict_margin(X))
    assert back.source == "catboost" and back.l2_scaled_by_mean_weight


def test_catboost_version_recorded():
    ens = _convert(make_case(0).model)
    assert ens.source == "catboost"
    assert ens.source_version == cb.__version__
    assert os.path.basename(__file__).startswith("test_catboost")


# ---------------------------------------------------------------------- errors
@pytest.fixture(scope="module")
def small():
    case = make_case(12)  # RMSE, Lossguide
    return case, model_doc(case.model)


def test_truncated_and_corrupt_json(small, tmp_path):
    import json

    case, doc = small
    text = json.dumps(doc)
    for cut in (1, 10, len(text) // 3, len(text) - 2):
        path = tmp_path / f"cut{cut}.json"
        path.write_text(text[:cut])
        with pytest.raises(ValueError):
            treeinner.load(path)
    from treeinner.adapters import catboost as cba

    def broken(fn):
        d = json.loads(text)
        fn(d)
        return d

    cases = {
        "leaf value": lambda d: (
            d["trees"][0]["left"].update(value="x")
            if "value" in d["trees"][0]["left"]
            else d["trees"][0].update(left={"value": "x", "weight": 1})
        ),
        "neither a split": lambda d: d["trees"][0].update(left={}),
        "features_info": lambda d: d.pop("features_info"),
        "float_feature_index": lambda d: d["trees"][0]["split"].update(float_feature_index=99),
        "scale_and_bias": lambda d: d.update(scale_and_bias=[1.0]),
        "no trees": lambda d: d.update(trees=[]),
        "border": lambda d: d["trees"][0]["split"].update(border=float("nan")),
    }
    for fn in cases.values():
        with pytest.raises(ValueError):
            cba.from_json(broken(fn))
    with pytest.raises(ValueError):
        cba.from_json({"hello": 1})


def test_corrupt_cbm(small, tmp_path):
    case, _ = small
    good = tmp_path / "m.cbm"
    case.model.save_model(str(good))
    data = good.read_bytes()
    cut = tmp_path / "cut.cbm"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable CatBoost model"):
        treeinner.load(cut)
    # flipped bytes can crash CatBoost's own loader: it runs in a child process
    rng = np.random.default_rng(0)
    flipped = bytearray(data)
    for pos in rng.integers(8, len(data), 40):
        flipped[pos] ^= 0xFF
    bad = tmp_path / "bad.cbm"
    bad.write_bytes(bytes(flipped))
    try:
        treeinner.load(bad)
    except (ValueError, NotImplementedError):
        pass  # either rejected, or (if the flips hit only data) read as some other model


def test_unsupported_options(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(20)
    X = make_X(rng, 200, 3, 0.0)
    y = make_y(rng, "RMSE", X)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["cat"] = rng.choice(["u", "v", "w"], size=200)
    df["text"] = rng.choice(["a b", "b c", "c d"], size=200)
    m = cb.CatBoostRegressor(iterations=3, depth=2, verbose=0, allow_writing_files=False)
    m.fit(df, y, cat_features=["cat"], text_features=["text"])
    with pytest.raises(NotImplementedError, match="text features"):
        treeinner.from_model(m)
    m.save_model(str(tmp_path / "text.cbm"))
    with pytest.raises(NotImplementedError, match="text features"):
        treeinner.load(tmp_path / "text.cbm")
    m2 = fit({"loss_function": "MultiRMSE", "iterations": 2, "depth": 2}, X, np.c_[y, -y])
    with pytest.raises(NotImplementedError, match="MultiRMSE"):
        treeinner.from_model(m2)
    m3 = fit({"loss_function": "MAE", "iterations": 2, "depth": 2}, X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = treeinner.from_model(m3)  # prediction works
    _check(ens, m3, X)
    with pytest.raises(NotImplementedError, match="MAE"):
        treeinner.tree_inner(ens, X, y, reference=(X, y))


def test_wrong_feature_count_and_unfitted(small):
    case, _ = small
    ens = _convert(case.model)
    with pytest.raises(ValueError):
        ens.predict_margin(case.X[:, :-1])
    with pytest.raises(ValueError):
        ens.predict_margin(np.c_[case.X, case.X[:, :1]])
    with pytest.raises(ValueError, match="not fitted"):
        treeinner.from_model(cb.CatBoostRegressor())


def test_cbm_needs_catboost(monkeypatch, small, tmp_path):
    import importlib.util

    from treeinner.adapters import catboost as cba

    case, _ = small
    path = tmp_path / "m.cbm"
    case.model.save_model(str(path))
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "catboost" else real(name)
    )
    with pytest.raises(ImportError, match="pip install catboost"):
        cba.from_cbm(path)
