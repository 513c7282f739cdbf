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

import atexit
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from .. import _input
from .._errors import InputError, ModelFormatError
from ._cb_trees import CTR_STRIDES, FeatureMap, array, bad, ctr_key, integer, num

_PIP = "pip install catboost"


def require_catboost(what: str) -> None:
    """ImportError (saying how to install it) when the catboost package is missing."""
    if importlib.util.find_spec("catboost") is None:
        raise ImportError(f"Reading {what} needs the catboost package: {_PIP}")


def _load(doc: dict, checked: bool = False) -> Any:
    """A CatBoost model loaded from its JSON export, once a worker process has probed it
    (``probe``; unless ``checked``: the document is CatBoost's own export of a model in
    memory): CatBoost does not crash on it."""
    if not checked:
        probe(doc)
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


def check_ctr_data(cd: Any, fmap: FeatureMap) -> None:
    """Check ``ctr_data`` against what CatBoost reads from it and what the CTR splits need:
    every table well formed (its key a CTR identifier of described features, ``hash_stride``
    right for its CTR type, ``hash_map`` of decimal 64-bit hashes, each once, and counts),
    and every CTR of ``features_info.ctrs`` with a table whose classes its
    ``target_border_idx`` fits. CatBoost itself reads a corrupt table out of bounds
    (it dies with SIGSEGV or SIGFPE on a missing table or a zero stride)."""
    if cd is None:
        if fmap.ctrs:
            raise bad(f"ctr_data is missing; {fmap.ctrs[0]['what']} needs its table.")
        return
    if not isinstance(cd, dict):
        raise bad("ctr_data is not an object.")
    strides: dict[tuple, int] = {}
    for key, entry in cd.items():
        what = f"ctr_data[{key[:120]!r}]"
        k = _table_key(key, fmap, what)
        if k in strides:
            raise bad(f"{what} describes a CTR another ctr_data key describes too.")
        strides[k] = _table(entry, k[0], what)
    for c in fmap.ctrs:
        stride = strides.get(c["key"])
        if stride is None:
            raise bad(f"ctr_data has no table for {c['what']} ({c['key'][0]} CTR).")
        n_borders = {"Borders": stride - 2, "Buckets": stride - 1}.get(c["key"][0])
        if n_borders is not None and c["tbi"] >= n_borders:
            raise bad(
                f"{c['what']}.target_border_idx is {c['tbi']}; its ctr_data table "
                f"(hash_stride {stride}) has {n_borders} target border(s)."
            )


def _table_key(key: str, fmap: FeatureMap, what: str) -> tuple:
    """The CTR a ``ctr_data`` key identifies (``_cb_trees.ctr_key``), of described features."""
    try:
        ident = json.loads(key)
    except json.JSONDecodeError:
        raise bad(f"{what}: the key is not a CTR identifier (JSON).") from None
    if not isinstance(ident, dict) or not isinstance(ident.get("identifier"), list):
        raise bad(f"{what}: the key has no identifier array.")
    kind = ident.get("type")
    if kind not in CTR_STRIDES:
        raise bad(f"{what}: the key's type {kind!r} is not a CatBoost CTR type.")
    k = ctr_key(kind, ident["identifier"], what)
    if not {c for c in k[1]} | {c for c, _ in k[3]} <= set(fmap.cat_cols) or not {
        f for f, _ in k[2]
    } <= set(fmap):
        raise bad(f"{what}: the key names a feature features_info does not describe.")
    return k


def _table(entry: Any, kind: str, what: str) -> int:
    """Check one ``ctr_data`` table of a CTR of type ``kind``; its stride."""
    if not isinstance(entry, dict):
        raise bad(f"{what} is not an object.")
    want = CTR_STRIDES[kind]
    lo, hi = (want, want) if want else (2 if kind == "Buckets" else 3, 1 << 16)
    stride = integer(entry.get("hash_stride"), f"{what}.hash_stride", lo, hi)
    hm = array(entry.get("hash_map"), f"{what}.hash_map")
    if len(hm) % stride:
        raise bad(f"{what}.hash_map has {len(hm)} entries, not a multiple of hash_stride {stride}.")
    if kind in ("Counter", "FeatureFreq"):
        integer(entry.get("counter_denominator"), f"{what}.counter_denominator")
    hashes = hm[::stride]
    for i, h in enumerate(hashes):
        if not isinstance(h, str) or not h.isdigit() or not h.isascii() or int(h) >= 1 << 64:
            raise bad(f"{what}.hash_map[{i * stride}] is not a 64-bit hash string ({h!r}).")
    if len(set(hashes)) != len(hashes):
        raise bad(f"{what}.hash_map holds a hash twice.")
    mean = kind in ("BinarizedTargetMeanValue", "FloatTargetMeanValue")
    for i, v in enumerate(hm):
        if i % stride == 0:
            continue
        at = f"{what}.hash_map[{i}]"
        if mean and i % stride == 1:  # a sum of targets
            num(v, at)
        else:
            integer(v, at)
    return stride


# ---------------------------------------------------------------------- the probe
#: Seconds a probe may take (loading and routing a few rows) before the model is refused.
PROBE_TIMEOUT = 60.0

#: The probe worker: reads a model file's path per line, loads it into CatBoost, routes a few
#: synthetic rows (NaN and extreme numbers, unseen and empty categories) and answers one line
#: ("ok" or "error <JSON message>"). A model that crashes CatBoost kills the worker, not us.
_WORKER = r"""
import json, sys
import numpy as np, pandas as pd
from catboost import CatBoost, Pool

def probe(path):
    with open(path, encoding="utf-8") as fh:
        fi = json.load(fh)["features_info"]
    floats = fi.get("float_features") or []
    cats = fi.get("categorical_features") or []
    n = 1 + max(f["flat_feature_index"] for f in floats + cats)
    cols = {c: [np.nan, 0.0, -3e38, 3e38, -1.0, 1.0] for c in range(n)}
    for f in floats:
        b = f.get("borders") or [0.0]
        cols[f["flat_feature_index"]] = [np.nan, 0.0, -3e38, 3e38, b[0], b[-1]]
    seen = [str(v) for f in cats for v in (f.get("string_values") or [])]
    for f in cats:
        cols[f["flat_feature_index"]] = (seen + ["", "0", "a", "treeinner", "-1", "nan"])[:6]
    m = CatBoost()
    m.load_model(path, format="json")
    X = pd.DataFrame({c: cols[c] for c in range(n)})
    names = list(m.feature_names_ or [])
    if len(names) == n:
        X.columns = names
    pool = Pool(X, cat_features=[f["flat_feature_index"] for f in cats])
    m.calc_leaf_indexes(pool)
    m.predict(pool, prediction_type="RawFormulaVal")
    big = pd.concat([X] * 200, ignore_index=True)  # a block of rows, as data routes in
    m.predict(Pool(big, cat_features=[f["flat_feature_index"] for f in cats]))

for line in sys.stdin:
    try:
        probe(line.rstrip("\n"))
        answer = "ok"
    except Exception as e:
        answer = "error " + json.dumps(f"{type(e).__name__}: {e}"[-300:])
    sys.stdout.write(answer + "\n")
    sys.stdout.flush()
"""

_verdicts: dict[str, str] = {}  # document hash -> "" (CatBoost reads it) or why not
_worker: list[subprocess.Popen] = []  # the running probe worker, if any
_lock = threading.Lock()


def probe(doc: dict, timeout: float | None = None) -> None:
    """Refuse (ModelFormatError) a model document CatBoost cannot load and route rows with
    without crashing, finding out in a separate process (once per document and process).

    CatBoost reads a corrupt document out of bounds (SIGSEGV, SIGFPE) instead of raising, so
    before treeinner loads a document from a file into CatBoost in its own process, a worker
    process loads it and routes a few synthetic rows: seen and unseen categories, NaN and
    extreme numbers. A worker that dies or takes more than ``timeout`` seconds (default
    ``PROBE_TIMEOUT``) means the model is refused. The worker is started once (about 1 s, the
    import of catboost) and probes each further model in a few milliseconds.
    """
    text = json.dumps(doc, sort_keys=True)
    key = hashlib.sha256(text.encode()).hexdigest()
    with _lock:
        if key not in _verdicts:
            _verdicts[key] = _run_probe(text, PROBE_TIMEOUT if timeout is None else timeout)
        why = _verdicts[key]
    if why:
        raise ModelFormatError(why)


def _run_probe(text: str, timeout: float) -> str:
    """Probe one document in the worker: "" when CatBoost reads it, else why not."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        answer, died = _ask(path, timeout)
    if answer == "ok":
        return ""
    if answer.startswith("error "):
        return f"CatBoost could not load or apply the model: {json.loads(answer[6:])}"
    if died is None:
        return (
            f"CatBoost did not load and apply this model within {timeout:g} s (probed in a "
            "separate process); the model is refused."
        )
    return (
        f"CatBoost crashed reading this model (its process died, exit code {died}, when "
        "treeinner probed it in a separate process): the model document is corrupt."
    )


def _ask(path: str, timeout: float) -> tuple[str, int | None]:
    """Send a path to the worker (started when needed) and wait for its answer: the answer
    ('' when there is none) and the worker's exit code when it died (None: timed out)."""
    if not _worker or _worker[0].poll() is not None:
        _worker[:] = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        ]
    proc = _worker[0]
    stdout = proc.stdout
    assert proc.stdin is not None and stdout is not None  # started with pipes
    box: list[str] = []

    def read() -> None:
        """The worker's one-line verdict (empty when it died)."""
        box.append(stdout.readline())

    try:
        proc.stdin.write(path + "\n")
        proc.stdin.flush()
    except OSError:
        pass  # the worker died: the read below sees it
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    answer = box[0].strip() if box else ""
    if answer:
        return answer, 0
    timed_out = reader.is_alive()
    if timed_out:  # end the worker; a new one starts next time
        proc.kill()
    code = proc.wait()
    _worker.clear()
    return "", (None if timed_out else code)


@atexit.register
def _stop_worker() -> None:
    """End the probe worker with the process."""
    for proc in _worker:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
    _worker.clear()


def _preorder_leaves(left: np.ndarray, right: np.ndarray, root: int) -> np.ndarray:
    """The leaves of the tree at ``root`` in depth-first order, left subtree first."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        if left[node] < 0:
            out.append(node)
        else:
            stack += [right[node], left[node]]
    return np.array(out, dtype=np.int64)


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
    own_export : bool
        Whether ``doc`` is CatBoost's own export of ``model`` (in memory): loading it into
        CatBoost needs no probe (``probe``) then.
    """

    def __init__(self, doc, model, fmap, names, k, joined, symmetric, own_export=False) -> None:
        """Build the routing of a model (see the class docstring for the parameters)."""
        self.routes_off_path = bool(symmetric or not fmap.synth)
        if fmap.synth:
            require_catboost("a CatBoost model with categorical features")
            # CatBoost numbers the leaves of a non-symmetric tree it loaded from JSON in
            # depth-first order, not as the model it trained (the leaf_id numbering): such
            # trees are routed by a model loaded from the document, whose numbering is known
            if model is None or not symmetric:
                model = _load(doc, checked=own_export)
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
        self._index_paths(joined, k, symmetric)

    def saved_state(self) -> tuple[str, dict]:
        """What ``TreeEnsemble.save`` stores to rebuild this routing (``catboost.py``'s
        ``_rebuild_routing``): the kind ``"catboost"`` and the model's JSON export."""
        return "catboost", self.document

    def _index_paths(self, joined: dict[str, np.ndarray], k: int, symmetric: bool) -> None:
        """Per CatBoost tree with categorical splits (its first output's copy): leaf number ->
        node (``leaf_id`` for oblivious trees; the depth-first order, left first, in which
        CatBoost reads a non-symmetric tree from JSON); and every node's parent."""
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
            if not symmetric:
                self.leaf_node[t] = _preorder_leaves(left, right, lo)
                continue
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
        cat = {self.output_names[c] for c in self.cat_features} if by_name else set()
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
        if leaves.shape != (n, self.n_cb_trees):
            raise ModelFormatError(
                f"CatBoost reads {leaves.shape[1] if leaves.ndim == 2 else 0} trees in this "
                f"model, treeinner {self.n_cb_trees}: the model document is inconsistent."
            )
        rows = np.arange(n)
        for t in self.trees:
            table, ids = self.leaf_node[t], leaves[:, t]
            ok = (ids >= 0) & (ids < table.shape[0])
            node = table[np.where(ok, ids, 0)]
            if not ok.all() or (node < 0).any():
                raise ModelFormatError(
                    f"CatBoost routes rows to a leaf tree {t} does not have in treeinner's "
                    "reading: the model document is inconsistent."
                )
            p = self.parent[node]
            while (on := p >= 0).any():  # up the path, one level per pass
                pr, nr, rr = p[on], node[on], rows[on]
                col = self.feature[pr]
                syn = col >= self.n_raw
                out[rr[syn], col[syn]] = (self.right[pr[syn]] == nr[syn]).astype(np.float64)
                node = np.where(on, p, node)
                p = self.parent[node]
        return out
