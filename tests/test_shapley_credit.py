"""Splits on feature combinations credited by Shapley values over permutations
(``treeinner._shapley_credit``): CatBoost CTR combinations of a relevant and an irrelevant
categorical feature no longer lend the irrelevant one a score; the credit adds up to the
equal credit's total; Dask and TreeSHAP take the same route."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest

import treeinner
import treeinner._centred as centred_module
from treeinner._centred import centred_initial_moments
from treeinner._shapley_credit import _run_credit, _runs, _weight, shapley_credit_ensemble
from treeinner.treeshap import players_of

cb = pytest.importorskip("catboost")

CATEGORICAL = ["plan", "region", "channel", "noise_cat"]
RELEVANT = ["plan", "region", "tenure"]
NOISE = ["channel", "noise_cat"]


def _data(seed: int, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Two relevant categorical features, a relevant numeric one and two irrelevant
    categorical ones (4 and 30 levels)."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "plan": rng.choice(["basic", "plus", "pro"], size=n),
            "region": rng.choice(["north", "south", "east", "west", "centre"], size=n),
            "channel": rng.choice(["web", "store", "phone", "partner"], size=n),
            "tenure": rng.gamma(2.0, 12.0, size=n).round(),
            "noise_cat": rng.choice([f"level_{j:02d}" for j in range(30)], size=n),
        }
    )
    logit = (
        X["plan"].map({"basic": -1.0, "plus": 0.0, "pro": 1.0})
        + X["region"].map({"north": 0.6, "south": -0.6}).fillna(0.0)
        - 0.04 * (X["tenure"] - 24)
    ).to_numpy()
    return X, (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)


@functools.cache
def _model(seed: int = 0):
    X, y = _data(seed, 2000)
    return cb.CatBoostClassifier(
        iterations=200, depth=4, learning_rate=0.1, cat_features=CATEGORICAL, thread_count=1,
        random_seed=seed,
        verbose=False, allow_writing_files=False,
    ).fit(X, y)  # fmt: skip


def _ensemble(seed: int = 0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PreDecomp's note on CatBoost's leaf estimation
        return treeinner.from_model(_model(seed))


def _z(table: pd.DataFrame) -> pd.Series:
    return (table["score"] / table["se"]).set_axis(table["feature"])


def test_the_shapley_weights():
    """Per combination column, every copy's credit row sums to zero (it moves credit between
    the features, it adds none), and for two features the credit is the textbook Shapley
    value: phi_a = (v(ab) - v(b) + v(a)) / 2 with v of no feature 0."""
    assert _weight(0, 2) == _weight(1, 2) == 0.5
    assert sum(_weight(k, 4) * np.prod(range(4 - k, 4)) / np.prod(range(1, k + 1))
               for k in range(4)) == pytest.approx(1.0)  # fmt: skip
    combos = {5: (0, 1), 6: (0, 2, 3)}
    runs = _runs(combos)
    assert runs == [(0,), (1,), (2,), (3,), (0, 2), (0, 3), (2, 3)]
    base = np.zeros((7, 4))
    base[5, [0, 1]] = 0.5
    base[6, [0, 2, 3]] = 1 / 3
    for p in runs:
        np.testing.assert_allclose(_run_credit(base, combos, p).sum(axis=1), 0.0, atol=1e-15)
    # keeping a alone (b permuted): a gets +v(a)/2, b -v(a)/2; keeping b: the reverse
    np.testing.assert_allclose(_run_credit(base, combos, (1,))[5], [0.5, -0.5, 0, 0])
    np.testing.assert_allclose(_run_credit(base, combos, (0,))[5], [-0.5, 0.5, 0, 0])
    # a set no combination holds as a proper part credits nothing
    assert not _run_credit(base, combos, (1, 2)).any()


def test_models_without_combinations_are_left_as_they_are():
    single = cb.CatBoostClassifier(iterations=20, depth=3, cat_features=CATEGORICAL,
                                   max_ctr_complexity=1, thread_count=1, verbose=False,
                                   allow_writing_files=False).fit(*_data(1, 600))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens = treeinner.from_model(single)
    assert shapley_credit_ensemble(ens) is ens
    ens = _ensemble()
    copied = shapley_credit_ensemble(ens)
    assert copied.n_trees > ens.n_trees and copied.input_map.runs
    # the copy's first block of columns is the model's own
    X, _ = _data(5, 50)
    np.testing.assert_array_equal(
        copied.input_map.transform(X)[:, : ens.n_features], ens.input_map.transform(X)
    )


def _significance(ens, X, y, method, monkeypatch, shapley: bool) -> pd.DataFrame:
    with monkeypatch.context() as m:
        if not shapley:  # the equal credit of every other method
            m.setattr(centred_module, "shapley_credit_ensemble", lambda e: e)
        return treeinner.significance(ens, X, y, methods=method).set_index("feature")


def test_an_irrelevant_partner_scores_zero_on_fresh_rows(monkeypatch):
    """On 20,000 fresh rows the irrelevant categorical features, which CatBoost combines with
    the relevant ones, have |z| < 3 (mean < 2) under the recommended method, and the
    relevant ones z > 5; credited equally (as before this module) the noise features score
    more than 3 standard errors above zero; the total over features is the same either way."""
    ens = _ensemble()
    X, y = _data(99, 20_000)
    shapley = _significance(ens, X, y, "forest_inner_initial", monkeypatch, True)
    z = shapley["score"] / shapley["se"]
    assert (z[RELEVANT] > 5).all(), z
    assert (z[NOISE].abs() < 3).all() and z[NOISE].abs().mean() < 2, z
    equal = _significance(ens, X, y, "forest_inner_initial", monkeypatch, False)
    assert (equal.loc[NOISE, "score"] > 3 * shapley.loc[NOISE, "se"]).all(), equal
    np.testing.assert_allclose(shapley["score"].sum(), equal["score"].sum(), rtol=1e-9)


def test_the_treeshap_variant_keeps_a_smaller_lean(monkeypatch):
    """The TreeSHAP variant takes the same Shapley credit of the combinations (with the same
    total), which removes most of the noise features' lean; what is left comes from
    TreeSHAP sharing a combination's interactions with the features' own splits, so it
    still warns (``test_centred``)."""
    ens = _ensemble()
    X, y = _data(99, 20_000)
    method = "forest_inner_initial_shap"
    shapley = _significance(ens, X, y, method, monkeypatch, True)
    equal = _significance(ens, X, y, method, monkeypatch, False)
    np.testing.assert_allclose(shapley["score"].sum(), equal["score"].sum(), rtol=1e-9)
    lean, before = shapley.loc[NOISE, "score"], equal.loc[NOISE, "score"]
    assert (lean.abs() < 0.5 * before).all(), (lean, before)
    assert (before > 3 * shapley.loc[NOISE, "se"]).all()


def test_an_irrelevant_partner_is_dropped_by_select_features():
    """The verdict a user acts on: the default selection keeps the relevant features and
    drops the irrelevant ones CatBoost combined with them."""
    ens = _ensemble()
    X, y = _data(7, 5000)
    kept = treeinner.select_features(ens, X, y)
    assert set(RELEVANT) <= set(kept) and not set(NOISE) & set(kept), kept


def test_dask_partitions_permute_their_own_rows():
    """A Dask collection of one partition gives the in-memory numbers exactly; of several,
    each partition permutes its own rows (other numbers, the same total and the same
    verdict)."""
    dd = pytest.importorskip("dask.dataframe")
    ens = _ensemble()
    X, y = _data(11, 3000)
    frame = X.assign(label=y)
    mem = centred_initial_moments(ens, X, y, False)
    for parts in (1, 3):
        ddf = dd.from_pandas(frame, npartitions=parts)
        lazy = centred_initial_moments(ens, ddf[list(X.columns)], ddf["label"], False)
        if parts == 1:
            np.testing.assert_allclose(lazy.s1, mem.s1, rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(lazy.s2, mem.s2, rtol=1e-12, atol=1e-9)
        else:
            assert not np.allclose(lazy.s1, mem.s1)
            np.testing.assert_allclose(lazy.s1.sum(), mem.s1.sum(), rtol=1e-9)


def test_treeshap_players_stay_apart_in_every_copy():
    """TreeSHAP's players in the copied model: each copy's columns are the base model's
    players in a range of their own (columns of one combination one player), never merged
    across copies or with other columns whose credit in a copy happens to match."""
    ens = _ensemble()
    copied = shapley_credit_ensemble(ens)
    base_player, base_pcredit = players_of(ens.input_map.credit)
    player, pcredit = copied.input_map.players()
    width, n_p = ens.n_features, base_pcredit.shape[0]
    n_copies = copied.n_features // width
    assert player.shape == (n_copies * width,) and pcredit.shape[0] == n_copies * n_p
    for k in range(n_copies):
        np.testing.assert_array_equal(player[k * width : (k + 1) * width], base_player + k * n_p)
    np.testing.assert_array_equal(pcredit[:n_p], base_pcredit)
    np.testing.assert_allclose(pcredit[n_p:].sum(axis=1), 0.0, atol=1e-15)
