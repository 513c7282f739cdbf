"""CatBoost's categorical splits (one-hot and CTR): the ``input_map`` that asks CatBoost itself
where each row goes at them.

The kernels cannot evaluate these splits from the raw columns (CTRs are target statistics of
category combinations). Each split got a synthetic 0/1 column of its own (``_cb_trees``);
``CategoricalRouting.transform(X)`` fills those columns through ``calc_leaf_indexes`` and
passes the numeric columns through. Dataframes other than pandas (polars, pyarrow) are made
pandas first: CatBoost is never handed a polars frame (a polars Categorical column crashes
``catboost.Pool``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from .. import _input
from .._errors import InputError, ModelFormatError

_PIP = "pip install catboost"


def require_catboost(what: str) -> None:
    """ImportError (saying how to install it) when the catboost package is missing."""
    if importlib.util.find_spec("catboost") is None:
        raise ImportError(f"Reading {what} needs the catboost package: {_PIP}")


def _load(doc: dict) -> Any:
    """A CatBoost model loaded from its JSON export (for a document read without the model)."""
    import catboost

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        model = catboost.CatBoost()
        try:
            model.load_model(path, format="json")
        except Exception as e:  # CatBoostError
            raise ModelFormatError(f"CatBoost could not load the model: {e}") from e
    return model


class CategoricalRouting:
    """The ``input_map`` of a CatBoost model with categorical features.

    ``transform(X)`` gives the kernels' input: the model's columns (numeric values; the
    categorical columns are not read) and one 0/1 column per categorical split, 1 where the
    row goes right there. CatBoost computes those through ``calc_leaf_indexes``: the leaf a row
    reaches fixes the side it took at every split on its path (splits off the path get 0 and
    are never read). Attributions of a split's column are credited to the features it uses,
    equally when a CTR combines several.

    ``routes_off_path`` tells whether the columns are also right for splits off a row's path,
    which TreeSHAP reads: true for oblivious trees (every split is on every path) and for
    models without categorical splits, false otherwise (CatBoost does not tell how a split the
    row never reaches would send it).

    Parameters
    ----------
    doc : dict
        The model's JSON export (loaded into CatBoost when ``model`` is None and needed).
    model : catboost.CatBoost or None
        The model, kept to route rows.
    fmap : _cb_trees.FeatureMap
        The feature map, with the synthetic columns of the categorical splits.
    names : sequence of str
        The model's feature names.
    k : int
        Outputs per CatBoost tree (its copies are consecutive ensemble trees).
    joined : dict
        The ensemble's joined node arrays (``_common.join_trees``).
    symmetric : bool
        Whether the trees are oblivious.
    """

    def __init__(self, doc, model, fmap, names, k, joined, symmetric) -> None:
        """Build the routing of a model (see the class docstring for the parameters)."""
        self.routes_off_path = bool(symmetric or not fmap.synth)
        if fmap.synth:
            require_catboost("a CatBoost model with categorical features")
            if model is None:
                model = _load(doc)
        self.model = model
        self.document = doc
        self.n_raw = fmap.n_raw
        self.cat_features = sorted(fmap.cat_cols.values())
        self.float_cols = sorted({c for c, _ in fmap.values()})
        self.output_names = tuple(names)
        # names of the user's (CatBoost gives f0, f1, ... to columns trained without names)
        self.named = self.output_names != tuple(f"f{i}" for i in range(len(names)))
        self.credit = np.zeros((fmap.n_raw + len(fmap.synth), fmap.n_raw))
        self.credit[np.arange(fmap.n_raw), np.arange(fmap.n_raw)] = 1.0
        col_names = list(names)
        for j, cols in enumerate(fmap.synth):
            self.credit[fmap.n_raw + j, list(cols)] = 1.0 / len(cols)
            col_names.append("+".join(names[c] for c in cols))
        self.column_names = tuple(col_names)
        self.trees = sorted(set(fmap.synth_tree))
        self._index_paths(joined, k)

    def saved_state(self) -> tuple[str, dict]:
        """What ``TreeEnsemble.save`` stores to rebuild this routing (``catboost.py``'s
        ``_rebuild_routing``): the kind ``"catboost"`` and the model's JSON export."""
        return "catboost", self.document

    def _index_paths(self, joined: dict[str, np.ndarray], k: int) -> None:
        """Per CatBoost tree with categorical splits (its first output's copy): leaf number ->
        node; and every node's parent."""
        offsets, left, right = joined["tree_offsets"], joined["left"], joined["right"]
        self.k = k
        self.n_cb_trees = (offsets.shape[0] - 1) // k
        parent = np.full(left.shape[0], -1, dtype=np.int64)
        inner = np.flatnonzero(left >= 0)
        parent[left[inner]] = inner
        parent[right[inner]] = inner
        self.parent, self.right, self.feature = parent, right, joined["feature"]
        self.leaf_node = {}
        for t in self.trees:
            lo, hi = offsets[t * k], offsets[t * k + 1]
            ids = joined["leaf_id"][lo:hi]
            table = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
            leaves = np.flatnonzero(ids >= 0)
            table[ids[leaves]] = lo + leaves
            self.leaf_node[t] = table

    def _pandas(self, frame: Any) -> Any:
        """A pandas DataFrame of a polars, pyarrow, ... frame (never handed to CatBoost as it
        is: a polars Categorical column crashes ``catboost.Pool``): numeric columns as
        float64, categorical features as their values (None where missing)."""
        import pandas as pd

        names = [str(c) for c in frame.columns]
        by_name = len(set(names)) == len(names) and set(names) == set(self.output_names)
        cat = {self.output_names[c] for c in self.cat_features} if by_name else None
        cols = {}
        for k, name in enumerate(frame.columns):
            s = frame.get_column(name)
            if (str(name) in cat) if by_name else (k in self.cat_features):
                values = s.to_numpy()
                if s.null_count():
                    values = values.astype(object)
                    values[s.is_null().to_numpy()] = None
            elif s.dtype.is_numeric() or isinstance(s.dtype, nw.Boolean):
                values = _input.numeric_column(s)
            else:
                values = s.to_numpy()
            cols[k] = values
        out = pd.DataFrame(cols)
        out.columns = list(frame.columns)
        return out

    def _numeric(self, X: Any) -> tuple[Any, np.ndarray]:
        """X (a pandas DataFrame reordered by name when its columns are the model's) and the
        kernels' input with the numeric columns filled in, the synthetic ones 0."""
        import pandas as pd

        if not isinstance(X, pd.DataFrame):
            frame = _input.as_frame(X)
            if frame is not None:
                X = self._pandas(frame)
        if isinstance(X, pd.DataFrame):
            if X.shape[1] != self.n_raw:
                raise InputError(
                    f"X has {X.shape[1]} features, but the model expects {self.n_raw}."
                )
            if all(isinstance(c, str) for c in X.columns) and set(X.columns) == set(
                self.output_names
            ):
                X = X[list(self.output_names)]
            raw = {c: X.iloc[:, c] for c in self.float_cols}
        else:
            arr = np.asarray(X, dtype=object)
            if arr.ndim != 2 or arr.shape[1] != self.n_raw:
                raise InputError(
                    f"X has shape {arr.shape}; the model expects {self.n_raw} features."
                )
            if self.named:
                _input.warn_unnamed(self.output_names)
            raw = {c: arr[:, c] for c in self.float_cols}
        out = np.zeros((X.shape[0], self.credit.shape[0]))
        out[:, : self.n_raw] = np.nan
        try:
            for c, v in raw.items():
                if isinstance(v, pd.Series):
                    out[:, c] = v.to_numpy(dtype=np.float64, na_value=np.nan)
                else:
                    out[:, c] = np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise InputError(f"A numeric feature of X holds a non-number: {e}") from e
        return X, out

    def transform(self, X: Any) -> np.ndarray:
        """The kernels' input for ``X``: numeric columns, then the categorical splits' sides."""
        X, out = self._numeric(X)
        n = out.shape[0]
        if n == 0 or not self.trees:
            return out
        import catboost

        try:
            pool = catboost.Pool(X, cat_features=self.cat_features)
            leaves = np.asarray(self.model.calc_leaf_indexes(pool), dtype=np.int64)
        except Exception as e:  # CatBoostError: bad categorical values and the like
            raise InputError(f"CatBoost could not route X: {e}") from e
        rows = np.arange(n)
        for t in self.trees:
            node = self.leaf_node[t][leaves[:, t]]
            p = self.parent[node]
            while (on := p >= 0).any():  # up the path, one level per pass
                pr, nr, rr = p[on], node[on], rows[on]
                col = self.feature[pr]
                syn = col >= self.n_raw
                out[rr[syn], col[syn]] = (self.right[pr[syn]] == nr[syn]).astype(np.float64)
                node = np.where(on, p, node)
                p = self.parent[node]
        return out
