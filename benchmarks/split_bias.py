"""Split-selection bias (Dobra and Gehrke, ICML 2001): Experiments 1 and 2 and the
bias curves over N and over the class balance p_1, for classic and boosting split criteria.

Data (the paper's): two classes; X1 with 10 equally likely values, X2 with 2 equally likely
values, drawn independently. Experiment 1: the class is independent of both, P[C = 1] = p_1
(0.5 unless a curve varies it), N = 100. Experiment 2: X2 weakly informative,
P[C = 1 | X2 = x21] = 0.51 and P[C = 1 | X2 = x22] = 0.49 (so P[C = 1] = 0.5), N = 100 and 1000.

Bias of criterion s (the paper's definition):
``Bias(X1, X2) = log10(P[s(D, X1) > s(D, X2)] / (1 - P[s(D, X1) > s(D, X2)]))``, ties (equal
scores, relative tolerance 1e-12) counted as one half (the expected value of the paper's fair
coin). Its standard error is the delta-method ``1 / (ln 10 sqrt(n P (1 - P)))`` for ``n``
trials; every configuration runs until every log-odds has s.e. <= 0.05 (``--max-trials`` caps
it). The same simulated data sets are scored by every criterion.

Criteria (``CRITERIA``), each for three kinds of split:

* multiway: one child per value (the paper's setting);
* binary, ordered: the best threshold over X's values in their order;
* binary, partition: the best binary partition of X's categories (the categories sorted by class
  proportion, optimal for two classes and any concave impurity, Breiman et al. 1984; by
  ``G/(H + lambda)`` for the second-order gain, as LightGBM and XGBoost sort).

gini gain, information gain (natural log), gain ratio and the chi-square test's p-value
(df (n - 1)(k - 1); for a binary split, the chosen split's own df-1 p-value) each choose their
own best binary split. The gini gain p-value: Gamma with the exact permutation moments
(``treeinner.kernels.pvalue.gini_log_pvalue``) for multiway splits, and for binary splits the
best-split p-value of ``gain_log_pvalue`` on g = class indicator, h = 1, lambda = 0 (for two
classes gini gain is proportional to that sum of squares). XGBoost's gain: logistic loss
gradients at the initial prediction (the base margin log(p/(1 - p)) of the class share p of the
N rows, as XGBoost >= 2 and treeinner's booster start), lambda = 1, no min_child_weight.
UnbiasedGBM's unbiased gain (Zhang et al. 2023; METHODS.md): the rows divided at random into D
(half) and D1' (the other half); the split of a feature is chosen by gain on D (binary splits
need a D and a D1' row on each side, as treeinner's booster requires), and scored by
``sum_children G_u^D rho_u - G^D rho_t`` with ``rho_u`` = G/H over the D1' rows of u (the exact
held-out estimate: the hessian is constant); a multiway child without D1' rows takes the node's
rho. The booster's p-value criterion: ``gain_log_pvalue`` of the logistic gradients (lambda =
1), the criterion the native booster's ``split="pvalue"`` is to use. p-value criteria rank by
the smaller p-value.

Run from the repository root::

    python benchmarks/split_bias.py            # full run (about 70 s on 2 cores, one process)
    python benchmarks/split_bias.py --quick    # fewer trials (s.e. target 0.15), ~10 s

Writes ``benchmarks/results/split_bias.json``, ``docs/split_bias.md`` and
``docs/img/split_bias_n.png``, ``docs/img/split_bias_p1.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from treeinner.kernels import pvalue as KP

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_predict as bp  # noqa: E402  (shared benchmark helpers)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "split_bias.json"
DOCS = ROOT / "docs" / "split_bias.md"
FIG_N = ROOT / "docs" / "img" / "split_bias_n.png"
FIG_P = ROOT / "docs" / "img" / "split_bias_p1.png"

CRITERIA = (
    "gini gain",
    "information gain",
    "gain ratio",
    "chi-square p-value",
    "gini gain p-value (Gamma)",
    "XGBoost gain",
    "unbiased gain (UnbiasedGBM)",
    "booster p-value",
)
SPLITS = ("multiway", "binary, ordered", "binary, partition")
PVALUE_CRITERIA = (3, 4, 7)  # indices of the p-value criteria
N_CRIT = len(CRITERIA)
N_SPLIT = len(SPLITS)
N_VALUES = (10, 2)  # X1, X2
LAMBDA = 1.0
SE_TARGET = 0.05
TIE_RTOL = 1e-12
PAPER_TRIALS = 100000  # "100000 Monte Carlo trials" (slides, Experimental Setup)
HEADLINE = {  # the paper's odds X1 vs X2 for gini gain, multiway
    "experiment 1, N = 100": 80.0,
    "experiment 2, N = 100": 62.0,
    "experiment 2, N = 1000": 32.0,
}


# ---------------------------------------------------------------------- criteria (Numba)
# Not cached on disk: Numba's cache of a function is not invalidated when a function it calls in
# another module (the kernels) changes, and results must come from the current kernels.
@njit(cache=False)
def _xlogx(x: float) -> float:
    return x * math.log(x) if x > 0.0 else 0.0


@njit(cache=False)
def _impurity(tab: np.ndarray, m: int, out: np.ndarray) -> None:
    """gini gain, information gain, gain ratio and the chi-square statistic of the split of the
    rows into the ``m`` children ``tab[:m]`` (counts of class 0, class 1); out[4] = its df."""
    N = 0.0
    n1 = 0.0
    for i in range(m):
        N += tab[i, 0] + tab[i, 1]
        n1 += tab[i, 1]
    n0 = N - n1
    within = 0.0
    cond = 0.0
    hx = 0.0
    chi2 = 0.0
    nonempty = 0
    for i in range(m):
        a = tab[i, 0]
        b = tab[i, 1]
        ni = a + b
        if ni <= 0.0:
            continue
        nonempty += 1
        within += (a * a + b * b) / ni
        cond += _xlogx(a) + _xlogx(b) - _xlogx(ni)  # = -N_i H(C | x_i)
        hx -= _xlogx(ni / N)
        if n0 > 0.0 and n1 > 0.0:
            e0 = ni * n0 / N
            e1 = ni * n1 / N
            chi2 += (a - e0) ** 2 / e0 + (b - e1) ** 2 / e1
    hc = -(_xlogx(n0 / N) + _xlogx(n1 / N))
    out[0] = within / N - (n0 * n0 + n1 * n1) / (N * N)
    ig = hc + cond / N
    out[1] = ig
    out[2] = ig / hx if hx > 0.0 else 0.0
    out[3] = chi2
    classes = (1 if n0 > 0.0 else 0) + (1 if n1 > 0.0 else 0)
    out[4] = (nonempty - 1.0) * (classes - 1.0)


@njit(cache=False)
def _feature_scores(
    x: np.ndarray,
    nv: int,
    y: np.ndarray,
    heldout: np.ndarray,
    pbar: float,
    out: np.ndarray,
    tab: np.ndarray,
    G: np.ndarray,
    H: np.ndarray,
    C: np.ndarray,
    gD: np.ndarray,
    hD: np.ndarray,
    cD: np.ndarray,
    gP: np.ndarray,
    cP: np.ndarray,
    y1: np.ndarray,
    scratch: np.ndarray,
    two: np.ndarray,
    imp: np.ndarray,
) -> None:
    """Scores ``out[criterion, split]`` of feature ``x`` (values 0..nv-1), larger = preferred
    (p-value criteria as -log p)."""
    N = x.shape[0]
    h = pbar * (1.0 - pbar)
    tab[:nv] = 0.0
    G[:nv] = 0.0
    H[:nv] = 0.0
    C[:nv] = 0.0
    gD[:nv] = 0.0
    hD[:nv] = 0.0
    cD[:nv] = 0.0
    gP[:nv] = 0.0
    cP[:nv] = 0.0
    y1[:nv] = 0.0
    n1 = 0.0
    for r in range(N):
        v = x[r]
        yi = y[r]
        tab[v, yi] += 1.0
        y1[v] += yi
        n1 += yi
        g = pbar - yi
        G[v] += g
        H[v] += h
        C[v] += 1.0
        if heldout[r]:
            gP[v] += g
            cP[v] += 1.0
        else:
            gD[v] += g
            hD[v] += h
            cD[v] += 1.0
    # node-level power sums of g (g = pbar - y takes two values)
    n0 = N - n1
    g2 = n1 * (pbar - 1.0) ** 2 + n0 * pbar**2
    g3 = n1 * (pbar - 1.0) ** 3 + n0 * pbar**3
    g4 = n1 * (pbar - 1.0) ** 4 + n0 * pbar**4
    # ---- multiway
    _impurity(tab, nv, imp)
    out[0, 0] = imp[0]
    out[1, 0] = imp[1]
    out[2, 0] = imp[2]
    out[3, 0] = -KP.chi2_log_pvalue(imp[3], imp[4])
    out[4, 0] = -KP.gini_log_pvalue(tab[:nv], scratch)
    out[5, 0] = KP.gain_statistic(G, H, C, nv, LAMBDA, KP.KIND_MULTIWAY)
    out[7, 0] = -KP.gain_log_pvalue(G, H, C, nv, g2, g3, g4, LAMBDA, KP.KIND_MULTIWAY, scratch)
    # unbiased gain, multiway: rho over the held-out rows (constant h: rho = mean g / h)
    GtD = 0.0
    gtP = 0.0
    ctP = 0.0
    for v in range(nv):
        GtD += gD[v]
        gtP += gP[v]
        ctP += cP[v]
    rho_t = gtP / (ctP * h) if (ctP > 0.0 and h > 0.0) else 0.0
    s = -GtD * rho_t
    for v in range(nv):
        rho = gP[v] / (cP[v] * h) if (cP[v] > 0.0 and h > 0.0) else rho_t
        s += gD[v] * rho
    out[6, 0] = s
    # ---- binary: ordered (values in order) and partition (sorted by class proportion)
    for sp in range(1, 3):
        order = np.arange(nv)
        if sp == 2:
            key = np.empty(nv)
            for v in range(nv):
                key[v] = tab[v, 1] / C[v] if C[v] > 0.0 else 0.0
            order = np.argsort(key)
        best = np.full(4, -np.inf)
        best_df = 1.0
        two[:, :] = 0.0
        for v in range(nv):
            two[1, 0] += tab[v, 0]
            two[1, 1] += tab[v, 1]
        for t in range(nv - 1):
            v = order[t]
            if C[v] <= 0.0:
                continue
            two[0, 0] += tab[v, 0]
            two[0, 1] += tab[v, 1]
            two[1, 0] -= tab[v, 0]
            two[1, 1] -= tab[v, 1]
            if two[1, 0] + two[1, 1] <= 0.0:
                continue
            _impurity(two, 2, imp)
            for c in range(4):
                if imp[c] > best[c]:
                    best[c] = imp[c]
                    if c == 3:
                        best_df = imp[4]
        kind = KP.KIND_ORDERED if sp == 1 else KP.KIND_PARTITION
        for c in range(3):
            out[c, sp] = best[c] if best[c] > -np.inf else 0.0
        out[3, sp] = -KP.chi2_log_pvalue(best[3], best_df) if best[3] > -np.inf else 0.0
        # gini p-value: g = class indicator, h = 1, lambda = 0 (y^k = y for 0/1)
        out[4, sp] = -KP.gain_log_pvalue(y1, C, C, nv, n1, n1, n1, 0.0, kind, scratch)
        out[5, sp] = KP.gain_statistic(G, H, C, nv, LAMBDA, kind)
        out[7, sp] = -KP.gain_log_pvalue(G, H, C, nv, g2, g3, g4, LAMBDA, kind, scratch)
        # unbiased gain: split chosen by gain on D (both parts non-empty on both sides)
        order2 = np.arange(nv)
        if sp == 2:
            key = np.empty(nv)
            for v in range(nv):
                key[v] = gD[v] / (hD[v] + LAMBDA)
            order2 = np.argsort(key)
        HtD = 0.0
        CtD = 0.0
        for v in range(nv):
            HtD += hD[v]
            CtD += cD[v]
        parent = GtD * GtD / (HtD + LAMBDA)
        bestg = -np.inf
        bl_g = 0.0
        bl_p = 0.0
        bl_c = 0.0
        gl = 0.0
        hl = 0.0
        cl = 0.0
        pl = 0.0
        pc = 0.0
        for t in range(nv - 1):
            v = order2[t]
            gl += gD[v]
            hl += hD[v]
            cl += cD[v]
            pl += gP[v]
            pc += cP[v]
            if cl <= 0.0 or CtD - cl <= 0.0 or pc <= 0.0 or ctP - pc <= 0.0:
                continue
            gain = gl * gl / (hl + LAMBDA) + (GtD - gl) ** 2 / (HtD - hl + LAMBDA) - parent
            if gain > bestg:
                bestg = gain
                bl_g = gl
                bl_p = pl
                bl_c = pc
        if bestg > -np.inf and h > 0.0:
            rl = bl_p / (bl_c * h)
            rr = (gtP - bl_p) / ((ctP - bl_c) * h)
            out[6, sp] = bl_g * rl + (GtD - bl_g) * rr - GtD * rho_t
        else:
            out[6, sp] = -np.inf


@njit(cache=False)
def run_trials(n_trials: int, N: int, p1: float, p21: float, seed: int) -> np.ndarray:
    """``n_trials`` data sets of ``N`` rows; returns wins[criterion, split] of X1 over X2 (a tie
    counts 1/2) and, in ``[N_CRIT:]``, the number of ties. ``p21`` < 0: Experiment 1 with
    P[C = 1] = p1; else Experiment 2 with P[C = 1 | X2 = x21] = p21, 1 - p21 for x22."""
    np.random.seed(seed)  # noqa: NPY002 (Numba supports the legacy API only)
    res = np.zeros((2 * N_CRIT, N_SPLIT))
    x1 = np.empty(N, dtype=np.int64)
    x2 = np.empty(N, dtype=np.int64)
    y = np.empty(N, dtype=np.int64)
    held = np.zeros(N, dtype=np.bool_)
    perm = np.arange(N)
    s1 = np.empty((N_CRIT, N_SPLIT))
    s2 = np.empty((N_CRIT, N_SPLIT))
    nv = 10
    tab = np.zeros((nv, 2))
    bufs = np.zeros((9, nv))
    scratch = np.zeros((4, nv))
    two = np.zeros((2, 2))
    imp = np.zeros(5)
    for _ in range(n_trials):
        n1 = 0
        for r in range(N):
            x1[r] = np.random.randint(0, 10)  # noqa: NPY002 (Numba supports the legacy API only)
            x2[r] = np.random.randint(0, 2)  # noqa: NPY002 (Numba supports the legacy API only)
            if p21 < 0.0:
                p = p1
            else:
                p = p21 if x2[r] == 0 else 1.0 - p21
            y[r] = 1 if np.random.random() < p else 0  # noqa: NPY002 (Numba supports the legacy API only)
            n1 += y[r]
        np.random.shuffle(perm)  # noqa: NPY002 (Numba supports the legacy API only)
        for r in range(N):
            held[perm[r]] = r < N // 2
        pbar = n1 / N
        b = bufs
        _feature_scores(
            x1, 10, y, held, pbar, s1, tab, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
            b[8], scratch, two, imp,
        )  # fmt: skip
        _feature_scores(
            x2, 2, y, held, pbar, s2, tab, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
            b[8], scratch, two, imp,
        )  # fmt: skip
        for c in range(N_CRIT):
            for s in range(N_SPLIT):
                a = s1[c, s]
                d = s2[c, s]
                scale = max(abs(a), abs(d))
                if a == d or (scale < np.inf and abs(a - d) <= TIE_RTOL * scale):
                    res[c, s] += 0.5
                    res[N_CRIT + c, s] += 1.0
                elif a > d:
                    res[c, s] += 1.0
    return res


# ---------------------------------------------------------------------- Monte Carlo driver
def log_odds(wins: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """log10 odds of P = wins / n and its delta-method standard error (inf where P is 0 or 1)."""
    P = wins / n
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.log10(P / (1.0 - P))
        se = 1.0 / (math.log(10.0) * np.sqrt(n * P * (1.0 - P)))
    return lo, se


def simulate(
    N: int, p1: float, p21: float, seed: int, start: int, cap: int, se_target: float
) -> dict[str, Any]:
    """Trials in batches until every log-odds has s.e. <= se_target (or ``cap`` trials)."""
    res = np.zeros((2 * N_CRIT, N_SPLIT))
    n = 0
    batch = start
    t0 = time.perf_counter()
    while True:
        res += run_trials(batch, N, p1, p21, seed * 1000003 + n)
        n += batch
        lo, se = log_odds(res[:N_CRIT], n)
        worst = float(np.nanmax(np.where(np.isfinite(se), se, np.inf)))
        if worst <= se_target or n >= cap:
            break
        # trials needed scale as se^2
        need = int(math.ceil(n * (worst / se_target) ** 2 * 1.05))
        batch = min(max(need - n, 1000), cap - n)
    return {
        "N": N,
        "p1": p1,
        "p21": p21 if p21 >= 0 else None,
        "trials": n,
        "seconds": time.perf_counter() - t0,
        "wins": res[:N_CRIT].tolist(),
        "ties": res[N_CRIT:].tolist(),
        "log_odds": lo.tolist(),
        "se": se.tolist(),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="s.e. target 0.15, coarse curves")
    ap.add_argument("--seed", type=int, default=2001)
    ap.add_argument("--trials", type=int, default=20000, help="first batch per configuration")
    ap.add_argument("--headline-trials", type=int, default=400000)
    ap.add_argument("--max-trials", type=int, default=400000)
    ap.add_argument("--se", type=float, default=SE_TARGET, help="target s.e. of log-odds")
    ap.add_argument("--output", type=Path, default=RESULTS)
    ap.add_argument("--docs", type=Path, default=DOCS)
    ap.add_argument("--no-docs", action="store_true", help="write the JSON only")
    return ap.parse_args(argv)


def configurations(quick: bool) -> list[dict[str, Any]]:
    ns = (10, 20, 50, 100, 200, 500, 1000) if not quick else (20, 100, 1000)
    p1s = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5) if not quick else (0.1, 0.3, 0.5)
    cfgs: list[dict[str, Any]] = [
        {"name": "experiment 1, N = 100", "N": 100, "p1": 0.5, "p21": -1.0, "headline": True},
        {"name": "experiment 2, N = 100", "N": 100, "p1": 0.5, "p21": 0.51, "headline": True},
        {"name": "experiment 2, N = 1000", "N": 1000, "p1": 0.5, "p21": 0.51, "headline": True},
    ]
    cfgs += [
        {"name": f"curve N, N = {n}", "N": n, "p1": 0.5, "p21": -1.0, "curve": "N"}
        for n in ns
        if n != 100
    ]
    cfgs += [
        {"name": f"curve p1, p1 = {p}", "N": 100, "p1": p, "p21": -1.0, "curve": "p1"}
        for p in p1s
        if p != 0.5
    ]
    return cfgs


# ---------------------------------------------------------------------- report
def _fmt(lo: float, se: float) -> str:
    if not math.isfinite(lo):
        return "+inf" if lo > 0 else "-inf"
    return f"{lo:+.3f} ± {se:.3f}"


def headline_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's three odds against ours (gini gain, multiway)."""
    rows = []
    for r in results:
        if r["name"] not in HEADLINE:
            continue
        lo = r["log_odds"][0][0]
        se = r["se"][0][0]
        paper = math.log10(HEADLINE[r["name"]])
        # the paper's value is itself a Monte Carlo estimate from PAPER_TRIALS trials
        pp = HEADLINE[r["name"]] / (1.0 + HEADLINE[r["name"]])
        se_paper = 1.0 / (math.log(10.0) * math.sqrt(PAPER_TRIALS * pp * (1.0 - pp)))
        se_both = math.hypot(se, se_paper)
        rows.append(
            {
                "name": r["name"],
                "paper_odds": HEADLINE[r["name"]],
                "paper_log_odds": paper,
                "odds": 10**lo,
                "log_odds": lo,
                "se": se,
                "se_paper": se_paper,
                "z": (lo - paper) / se_both,
                "within_3se": abs(lo - paper) <= 3 * se_both,
            }
        )
    return rows


def checks(results: list[dict[str, Any]], se_target: float) -> dict[str, Any]:
    exp1 = next(r for r in results if r["name"] == "experiment 1, N = 100")
    worst_se = max(float(np.max(r["se"])) for r in results)
    pv = {
        f"{CRITERIA[c]}, {SPLITS[s]}": exp1["log_odds"][c][s]
        for c in (4, 7)
        for s in range(N_SPLIT)
    }
    return {
        "pvalue_criteria_exp1_abs_bias_le_0.1": all(abs(v) <= 0.1 for v in pv.values()),
        "pvalue_criteria_exp1": pv,
        "max_se": worst_se,
        "all_se_le_target": worst_se <= se_target + 1e-12,
    }


def plot(results: list[dict[str, Any]], curve: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = "N" if curve == "N" else "p1"
    base = next(r for r in results if r["name"] == "experiment 1, N = 100")
    pts = sorted([r for r in results if r.get("curve") == curve] + [base], key=lambda r: r[key])
    xs = [r[key] for r in pts]
    fig, axes = plt.subplots(1, N_SPLIT, figsize=(15, 5.2), sharey=True)
    for s, ax in enumerate(axes):
        for c in range(N_CRIT):
            lo = np.array([r["log_odds"][c][s] for r in pts])
            se = np.array([r["se"][c][s] for r in pts])
            ls = "--" if c in PVALUE_CRITERIA or c == 6 else "-"
            ax.errorbar(xs, lo, yerr=2 * se, label=CRITERIA[c], ls=ls, marker="o", ms=3)
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_title(f"{SPLITS[s]} splits")
        ax.set_xlabel("N (rows)" if curve == "N" else "p_1 = P[C = 1]")
        if curve == "N":
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("bias: log10 odds X1 (10 values) over X2 (2 values)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    what = "p_1 = 0.5" if curve == "N" else "N = 100"
    fig.suptitle(
        f"Split-selection bias under the null ({what}); bars: ±2 s.e.; dashed: p-value and "
        "held-out criteria (gini gain p-value and booster p-value coincide for binary splits)"
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(doc: dict[str, Any]) -> str:
    cfg = doc["config"]
    m = doc["machine"]
    res = doc["results"]
    byname = {r["name"]: r for r in res}
    L = [
        "# Split-selection bias (Dobra and Gehrke 2001)",
        "",
        "<!-- generated by benchmarks/split_bias.py; edit the script, not this page -->",
        "",
        "Do split criteria prefer a feature with more distinct values when no feature is "
        "informative, and do p-value criteria (the paper's correction, and the booster's "
        '`split="pvalue"` criterion) remove that preference? Dobra and Gehrke (ICML 2001) '
        "define the bias of criterion s as the log-odds "
        "`log10(P[s(D, X1) > s(D, X2)] / (1 - P[...]))` that s prefers X1 (10 equally likely "
        "values) over X2 (2 values) on data sets D drawn under the null. Two classes; "
        "Experiment 1: both features independent of the class, N = 100; Experiment 2: "
        "P[C = 1 | X2 = x21] = 0.51 (0.49 for x22), N = 100 and 1000. Ties count one half "
        "(the paper's fair coin, in expectation). Every log-odds is a Monte Carlo estimate "
        "with its delta-method standard error; each configuration ran until every s.e. was "
        f"at most {cfg['se_target']}. Definitions of the criteria and of the Gamma "
        "approximations: [methods](methods.md) and the docstrings of "
        "`benchmarks/split_bias.py` and `treeinner/kernels/pvalue.py`.",
        "",
        "## The paper's three odds (gini gain, multiway splits)",
        "",
        "| setting | paper | ours | log10 odds (paper) | log10 odds (ours) ± s.e. | trials |",
        "|---|---|---|---|---|---|",
    ]
    for h in doc["headline"]:
        r = byname[h["name"]]
        L.append(
            f"| {h['name']} | {h['paper_odds']:.0f}:1 | {h['odds']:.1f}:1 | "
            f"{h['paper_log_odds']:.3f} | {h['log_odds']:.3f} ± {h['se']:.3f} | {r['trials']} |"
        )
    L += ["", doc["headline_note"], ""]
    for name in HEADLINE:
        r = byname[name]
        L += [
            f"## Bias, {name} ({r['trials']} trials)",
            "",
            "log10 odds that the criterion prefers X1 over X2, ± s.e. (0 = no bias; for "
            "Experiment 2, X2 is the informative feature, so an unbiased criterion has a "
            "slightly negative value).",
            "",
            "| criterion | " + " | ".join(SPLITS) + " |",
            "|---|" + "---|" * N_SPLIT,
        ]
        for c in range(N_CRIT):
            cells = [_fmt(r["log_odds"][c][s], r["se"][c][s]) for s in range(N_SPLIT)]
            L.append(f"| {CRITERIA[c]} | " + " | ".join(cells) + " |")
        L.append("")
    for curve, fig, key in (("N", FIG_N, "N"), ("p1", FIG_P, "p1")):
        base = byname["experiment 1, N = 100"]
        pts = sorted([r for r in res if r.get("curve") == curve] + [base], key=lambda r: r[key])
        title = "over N (p_1 = 0.5)" if curve == "N" else "over the class balance p_1 (N = 100)"
        L += [
            f"## Bias curves {title}",
            "",
            f"![bias {title}](img/{fig.name})",
            "",
            "| criterion, split | " + " | ".join(f"{key} = {r[key]:g}" for r in pts) + " |",
            "|---|" + "---|" * len(pts),
        ]
        for c in range(N_CRIT):
            for s in range(N_SPLIT):
                cells = [_fmt(r["log_odds"][c][s], r["se"][c][s]) for r in pts]
                L.append(f"| {CRITERIA[c]}, {SPLITS[s]} | " + " | ".join(cells) + " |")
        L.append("")
        L.append("Trials: " + ", ".join(f"{key} = {r[key]:g}: {r['trials']}" for r in pts))
        L.append("")
    rare = byname.get("curve p1, p1 = 0.05", byname["experiment 1, N = 100"])["log_odds"][7]
    e1 = byname["experiment 1, N = 100"]["log_odds"][0][0]
    e2 = byname["experiment 2, N = 100"]["log_odds"][0][0]
    L += [
        "## Notes and decisions",
        "",
        '- **Bias and ties.** log10 odds as on the slides ("Bias(X1, X2) = log10(P / (1 - P))"); '
        "scores equal to a relative 1e-12 are ties and count 1/2 each (the paper breaks them "
        "with a fair coin; counting the coin's expectation gives the same mean with less "
        "noise). p-value criteria compare log p-values (smaller wins).",
        f"- **The 80:1.** Our Experiment 1 estimate for gini gain, multiway, is "
        f"{10**e1:.0f}:1 (log10 {e1:.3f}); Experiment 2 at N = 100 gives {10**e2:.0f}:1 "
        f"(log10 {e2:.3f}), a difference of {e1 - e2:.3f}. The paper's 80:1 and 62:1 differ by "
        f"{math.log10(80 / 62):.3f}, more than P[C = 1 | X2 = x21] = 0.51 can cause at N = 100 "
        "(the expected chi-square noncentrality of X2 is N 0.02^2 = 0.04), so both cannot come "
        "from one setup as described; we reproduce 62:1 and 32:1 and get a smaller Experiment 1 "
        "value. Variants tried while writing this benchmark (2e5 trials each, not run by the "
        "script): class counts fixed at exactly N/2, 73.6:1; X1, X2 values stratified (each "
        "value equally often), 70.8:1; both, 68.6:1.",
        "- **Gini gain p-value.** The slides' formula `1 - Q(E^2/Var, dg Var/E)` has the Gamma "
        "scale inverted (a Gamma with shape E^2/Var has scale Var/E, so the tail at dg is "
        "`Q(E^2/Var, dg E/Var)`, which is what we compute). E and Var are the exact moments "
        "under the permutation null given the margins, not the paper's multinomial "
        "approximation (docs/methods.md).",
        "- **chi-square test.** Its multiway p-value (df (n - 1)(k - 1)) is nearly unbiased in "
        "Experiment 1; for binary splits the p-value of the chosen split (df 1) ignores that it "
        "is the best of 9 candidates, so it is exactly as biased as gini gain (for two classes "
        "chi-square and gini gain order 2x2 splits alike).",
        "- **Booster p-value vs gini p-value, binary.** With a constant hessian (logistic loss at "
        "the initial prediction) each candidate's statistic divided by its null mean is free of "
        "lambda and h, so the two binary p-values coincide; multiway differs through lambda.",
        "- **Experiment 2.** X2 is informative there, so an unbiased criterion's log-odds is "
        "slightly negative (it prefers X2 slightly more often), increasingly so with N.",
        "- **UnbiasedGBM's unbiased gain** is unbiased by construction (Zhang et al. 2023, "
        "Theorem 2; "
        "held-out gradients at the initial prediction), at the price of choosing splits on half "
        "of the rows.",
        "- **Small nodes and rare classes.** At N = 10 the categories of X1 hold about one row "
        "each: the partition p-value then uses its conservative multiway bound (kernel "
        "docstring), and many criteria tie (counted 1/2). With p_1 = 0.05 (about 5 rows of "
        "class 1 in 100) the Gamma of the best partition is anti-conservative for X1 (bias "
        f"{rare[2]:+.3f} for the booster's partition p-value): the statistic is far from its "
        "large-sample form there; its ordered and multiway p-values stay within "
        f"{max(abs(rare[0]), abs(rare[1])):.3f} of 0. UnbiasedGBM's "
        "held-out estimate prefers X2 somewhat there (rho is 0 in every child of X1 without a "
        "held-out row of class 1).",
        "",
    ]
    ck = doc["checks"]
    L += [
        "## Checks",
        "",
        f"- p-value criteria (gini gain p-value, booster p-value), Experiment 1, |bias| <= 0.1 "
        f"for multiway and binary splits: **{ck['pvalue_criteria_exp1_abs_bias_le_0.1']}** "
        + ", ".join(f"{k}: {v:+.3f}" for k, v in ck["pvalue_criteria_exp1"].items())
        + ".",
        f"- largest s.e. of any log-odds: {ck['max_se']:.4f} (target {cfg['se_target']}).",
        "",
        "## How it was run",
        "",
        f"- command: `{doc['command']}`",
        f"- date: {doc['date']}; runtime {doc['runtime_s']:.0f} s (including Numba "
        "compilation or cache loading); one process, one thread",
        f"- machine: {m['cpu_model']}, cpu_count {m['cpu_count']} (affinity "
        f"{m['cpu_affinity']}), load average at end {m['loadavg_end']}",
        f"- versions: python {m['python']}, numpy {m['numpy']}, numba {m['numba']}, "
        f"treeinner {m.get('treeinner')}; git {doc.get('git')}",
        "",
    ]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    se_target = 0.15 if args.quick and args.se == SE_TARGET else args.se
    start = 2000 if args.quick else args.trials
    head = 5000 if args.quick else args.headline_trials
    results = []
    for i, cfg in enumerate(configurations(args.quick)):
        first = head if cfg.get("headline") else start
        r = simulate(
            cfg["N"], cfg["p1"], cfg["p21"], args.seed + i, first, args.max_trials, se_target
        )
        r.update({k: v for k, v in cfg.items() if k not in ("N", "p1", "p21")})
        results.append(r)
        lo = np.array(r["log_odds"])
        print(
            f"{cfg['name']:28s} trials {r['trials']:7d} ({r['seconds']:.1f} s)  gini multiway "
            f"{lo[0, 0]:+.3f}  max s.e. {np.max(r['se']):.3f}",
            flush=True,
        )
    heads = headline_rows(results)
    missed = [h for h in heads if not h["within_3se"]]
    note = (
        "All three are within 3 combined s.e. (ours and the paper's, from its 100000 trials) "
        "of the paper's value: "
        + "; ".join(f"{h['name']}: {h['z']:+.1f} s.e." for h in heads)
        + "."
        if not missed
        else "Not reproduced within 3 s.e.: "
        + "; ".join(
            f"{h['name']}: {h['odds']:.1f}:1 (log10 {h['log_odds']:.3f} ± {h['se']:.3f}) "
            f"against the paper's {h['paper_odds']:.0f}:1 ({h['paper_log_odds']:.3f} ± "
            f"{h['se_paper']:.3f}), {h['z']:+.1f} combined s.e."
            for h in missed
        )
        + ". See the notes below the tables."
    )
    runtime = time.perf_counter() - t0
    doc = {
        "benchmark": "split_bias",
        "command": shlex.join(
            ["python", "benchmarks/split_bias.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runtime_s": runtime,
        "config": {
            "quick": args.quick,
            "seed": args.seed,
            "se_target": se_target,
            "max_trials": args.max_trials,
            "criteria": list(CRITERIA),
            "splits": list(SPLITS),
            "lambda": LAMBDA,
            "tie_rtol": TIE_RTOL,
            "log_base": 10,
        },
        "machine": bp.machine_info(1),
        "git": bp.git_state(),
        "headline": heads,
        "headline_note": note,
        "checks": checks(results, se_target),
        "results": results,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    if not args.no_docs:
        plot(results, "N", FIG_N)
        plot(results, "p1", FIG_P)
        args.docs.write_text(markdown(doc))
    print(note)
    print(json.dumps(doc["checks"], indent=1))
    print(f"runtime {runtime:.0f} s")
    return 0 if doc["checks"]["pvalue_criteria_exp1_abs_bias_le_0.1"] else 1


if __name__ == "__main__":
    sys.exit(main())
