"""The statistics of leafcost (DESIGN.md, "Definitions"): Avg@k, pass@k, pass^k, cost-per-resolved ratios and
paired differences of two arms, each with a 95 % CI over tasks (a bootstrap in which a task's seeds and attempts
stay together; Student's t for the paired resolve-rate difference), and McNemar's exact test. Pure functions:
arrays in, numbers out, no I/O.

Intervals. A figure of one arm (the resolve rates, the cost-per-resolved ratios) takes the BCa interval
(bias-corrected and accelerated, Efron 1987) with Hesterberg's small-sample expansion: the same resamples read at
the percentiles Φ(z0 + (z0 + z)/(1 − a·(z0 + z))) for z = ±z_n, where
  - z0 = Φ⁻¹(share of resamples below the point, ties and undefined ones counted half) corrects median bias;
  - a = Σd³ / (6·(Σd²)^1.5), d = mean − each leave-one-task-out value (the jackknife over tasks), corrects skew;
  - z_n = √(n/(n − 1))·t(n − 1, 0.975) for n tasks (2.080 at 30 tasks, 1.994 at 100, 1.96 in the limit) undoes
    the bootstrap's narrowness at small n: its spread is the plug-in one, short by √((n − 1)/n), and the
    standard error it stands for is itself estimated.
With z0 = a = 0 and z = 1.96 it is the percentile interval. At 30 tasks × 3 seeds the percentile interval of a
cost per resolved covers 91–93 %, this one 94–97 %; of Avg@3 at low resolve rates (p ~ Beta(.3, 2)) 92 %, this
one 95 %: a mean of per-task rates near 0 is skewed too. A paired difference of costs per resolved (A − B) takes
the expanded percentile interval, z0 = a = 0 at ±z_n: estimated from the differences of 30 tasks, the bias and
skew corrections move its interval more by noise than by skew (its BCa interval covered 91.5–92.3 % at
p ~ Beta(.7, .7), this one 93.2–95.3 % in every design). The paired difference of resolve rates takes Student's
t interval over the tasks' differences. Coverage of each: bench/ci_coverage.py, docs/benchmarks.md.

Resampling. A bootstrap is fixed by (n_tasks, resamples, seed): numpy's Generator(PCG64(seed)) draws task
indices with replacement, `rows` resamples at a time (rows × n_tasks ≤ 4 Mi draws; uint16 draws when
n_tasks ≤ 65,536, else int32). Every estimator takes `indices`, which is either
  - the (resamples × n_tasks) array of `bootstrap_indices` (simple, for small task counts), or
  - a `Resampler` with the same three numbers: it draws the same indices chunk by chunk and keeps only how often
    each resample draws each task, at one byte per (resample, task) where the counts fit (60 MB at
    2,000 × 30,000 instead of 240 MB of int32 indices), computed once and reused by every estimator given it.
Both give identical results. Giving both arms the same `indices` (or calling a paired function) pairs them.
A resampled statistic is `counts @ per-task contributions`: one matrix product for all columns at once.

Unbounded and undefined resamples. In a resample where a ratio's denominator is 0 (nothing resolved) the ratio
is +inf (even with a 0 numerator: no finite cost per resolved), and it takes part in the percentiles as +inf.
A bound that lands on, or interpolates with, an infinite resample is unbounded; for a ratio that happens when more
resamples resolve nothing than the upper tail holds (about 2 %). The bound that still exists is given: ci95 is
(low, None), the one-sided interval [low, ∞), with a reason; ci95 is None only when both bounds are unbounded.
Otherwise the infinite resamples lie beyond the percentile and do not move the interval. When a single task holds
every resolve, leaving it out resolves nothing: the jackknife (and with it the acceleration) is undefined, so
the interval is only bias-corrected (a = 0), and as about a third of the resamples miss that task, its upper side
is open. In a difference of ratios A − B, an A that resolves nothing gives +inf (the upper side open: [low, ∞)),
a B that resolves nothing −inf (the lower side open: (−∞, high]), and both is undefined: an undefined resample
counts against both bounds (−inf for the lower, +inf for the upper: the widest interval any placement of it could
give). No value or bound is ever inf, nan, or a made-up 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from statistics import NormalDist

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20261202

LOW, HIGH = 0.025, 0.975
CHUNK_DRAWS = 1 << 22  # draws per chunk: bounds the memory of one chunk's indices and counts
NO_TASKS = "no tasks"
TIE_TOLERANCE = 1e-9  # relative: a resample this close to the point ties it (float sums differ in the last bits)
_NORMAL = NormalDist()
_Z_HIGH = _NORMAL.inv_cdf(HIGH)  # 1.959963…


Bounds = tuple[float | None, float | None]  # (low, high); None on a side where the interval has no finite bound


@dataclass(frozen=True)
class Estimate:
    value: float | None
    ci95: Bounds | None  # a one-sided interval has None on its unbounded side, and a reason
    reason: str | None = None  # why value, ci95 or one of its bounds is None

    def as_json(self) -> dict:
        out: dict = {"value": self.value, "ci95": list(self.ci95) if self.ci95 is not None else None}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


# --- per-task estimators ------------------------------------------------------------------------------------------

def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task, 1 − C(n−c,k)/C(n,k), as a product (the binomials overflow floats)."""
    _check_task(n, c, k)
    if n - c < k:  # every draw of k includes a resolved seed
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one task, C(c,k)/C(n,k): all k of k draws resolved, as a product of factors in [0, 1]."""
    _check_task(n, c, k)
    if c < k:
        return 0.0
    return math.prod((c - j) / (n - j) for j in range(k))


def _check_task(n: int, c: int, k: int) -> None:
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need n ≥ 1, 0 ≤ c ≤ n and 1 ≤ k ≤ n; got n={n}, c={c}, k={k}")


# --- resampling ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Resampler:
    """The bootstrap over `n_tasks` tasks fixed by (resamples, seed), drawn chunk by chunk; its per-resample task
    counts are computed once and shared by every estimator (and both arms) that gets this object."""
    n_tasks: int
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.n_tasks < 0 or self.resamples < 1:
            raise ValueError(f"need n_tasks ≥ 0 and resamples ≥ 1; got {self.n_tasks}, {self.resamples}")

    def index_chunks(self) -> Iterator[np.ndarray]:
        """The resampled task indices, `_chunk_rows` resamples at a time, always the same for the same fields."""
        rows = _chunk_rows(self.n_tasks, self.resamples)
        if self.n_tasks == 0:
            yield np.empty((self.resamples, 0), dtype=np.int32)
            return
        rng = np.random.Generator(np.random.PCG64(self.seed))
        dtype = np.uint16 if self.n_tasks <= 1 << 16 else np.int32  # uint16 draws are ~3x faster
        for start in range(0, self.resamples, rows):
            yield rng.integers(0, self.n_tasks, size=(min(rows, self.resamples - start), self.n_tasks), dtype=dtype)

    @cached_property
    def counts(self) -> list[np.ndarray]:
        """How often each resample draws each task, chunk by chunk (rows × n_tasks, narrowest int that fits)."""
        return [_draw_counts(chunk, self.n_tasks) for chunk in self.index_chunks()]


Indices = np.ndarray | Resampler


def bootstrap_indices(n_tasks: int, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """All resampled task indices at once, (resamples × n_tasks) int32: the same draws as `Resampler`. For large
    task counts prefer `Resampler(n_tasks, resamples, seed)`, which never holds them all."""
    chunks = Resampler(n_tasks, resamples, seed).index_chunks()
    return np.concatenate([chunk.astype(np.int32) for chunk in chunks])


def _chunk_rows(n_tasks: int, resamples: int) -> int:
    return max(1, min(resamples, CHUNK_DRAWS // max(n_tasks, 1)))


def _draw_counts(chunk: np.ndarray, n_tasks: int) -> np.ndarray:
    """Task counts of each resample in a chunk of indices: one bincount over row-offset indices."""
    rows = chunk.shape[0]
    if n_tasks == 0:
        return np.zeros((rows, 0), dtype=np.uint8)
    # int32 offsets (a chunk holds far fewer than 2^31 draws) add ~7x faster than int64 ones
    offsets = np.arange(rows, dtype=np.int32 if rows * n_tasks < 1 << 31 else np.int64)[:, None] * n_tasks
    counts = np.bincount((chunk + offsets).ravel(), minlength=rows * n_tasks).reshape(rows, n_tasks)
    top = int(counts.max())  # a task drawn > 255 times in one resample is near impossible, but then say so
    return counts.astype(np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF else np.int64)


def _count_chunks(indices: Indices, n_tasks: int) -> Iterator[np.ndarray] | list[np.ndarray]:
    if isinstance(indices, Resampler):
        if indices.n_tasks != n_tasks:
            raise ValueError(f"the resampler is for {indices.n_tasks} tasks, the data has {n_tasks}")
        return indices.counts
    idx = np.asarray(indices)
    if idx.ndim != 2 or idx.shape[0] < 1 or idx.shape[1] != n_tasks:
        raise ValueError(f"indices must be (resamples ≥ 1) × {n_tasks}; got shape {idx.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= n_tasks):
        raise ValueError(f"indices must lie in [0, {n_tasks})")
    rows = _chunk_rows(n_tasks, idx.shape[0])
    return (_draw_counts(idx[s:s + rows], n_tasks) for s in range(0, idx.shape[0], rows))


def _resampled_sums(indices: Indices, columns: np.ndarray) -> np.ndarray:
    """Σ over each resample's drawn tasks of every column: (resamples × columns)."""
    chunks = _count_chunks(indices, columns.shape[0])
    return np.concatenate([chunk.astype(np.float64) @ columns for chunk in chunks])


# --- intervals ----------------------------------------------------------------------------------------------------

def _percentile_ci(stats: np.ndarray, unresolved: str) -> tuple[Bounds | None, str | None]:
    """(2.5 %, 97.5 %) percentiles (numpy's linear method); a bound that is unbounded is None, with a reason."""
    return _levels_ci(stats, LOW, HIGH, unresolved)


def _levels_ci(stats: np.ndarray, low: float, high: float, unresolved: str) -> tuple[Bounds | None, str | None]:
    """The `low` and `high` quantiles of the resamples (numpy's linear method). ±inf resamples sit at their end,
    undefined (nan) ones at the end of whichever bound is computed. A bound whose quantile reads an infinite
    resample is unbounded: None on its side, with a reason (the one-sided interval that exists), and no interval
    at all when both are."""
    undefined = int(np.count_nonzero(np.isnan(stats)))
    minus, plus = int(np.count_nonzero(stats == -np.inf)), int(np.count_nonzero(stats == np.inf))
    if undefined == minus == plus == 0:
        lo, hi = np.quantile(stats, [low, high])
        return (float(lo), float(hi)), None
    r = stats.size
    bad = undefined + minus + plus
    # the sorted positions linear interpolation reads (numpy's virtual index (r − 1)·q) against where the finite
    # resamples sit; a quantile that reads the far end's infinity has the near end's open too (q_low ≤ q_high)
    lower_open = math.floor((r - 1) * low) < minus + undefined
    upper_open = math.ceil((r - 1) * high) > r - 1 - plus - undefined
    if lower_open and upper_open:
        return None, (f"{unresolved} in {bad} of {r} resamples of the tasks, more than either tail: the lower and "
                      "upper bounds are unbounded, so there is no interval")
    finite = np.isfinite(stats)
    bottom, top = stats[finite].min(), stats[finite].max()
    # stand-ins that keep the order: a bound that is not open reads only finite positions, as checked above
    lower = np.where(finite, stats, np.where(stats == np.inf, top, bottom))
    upper = np.where(finite, stats, np.where(stats == -np.inf, bottom, top))
    lo = None if lower_open else float(np.quantile(lower, low))
    hi = None if upper_open else float(np.quantile(upper, high))
    if not (lower_open or upper_open):
        return (lo, hi), None
    side, tail, shape, beyond = (("lower", low, "(−∞, upper]", minus + undefined) if lower_open
                                 else ("upper", 1 - high, "[lower, ∞)", plus + undefined))
    return (lo, hi), (f"{unresolved} in {beyond} of {r} resamples of the tasks, more than the {100 * tail:.3g} % "
                      f"{side} tail: the {side} bound is unbounded, so the 95 % interval is one-sided, {shape}")


def _bca_ci(stats: np.ndarray, point: float, jackknife: np.ndarray, unresolved: str,
            z: float = _Z_HIGH) -> tuple[Bounds | None, str | None]:
    """The BCa interval of the resamples `stats` around the full-sample `point`, the acceleration from the
    leave-one-task-out values `jackknife` (all finite), read at ±`z` (default: ±1.96; ratios pass the expanded
    `expanded_z(n_tasks)`). A bound that is unbounded is None, with a reason (`_levels_ci`)."""
    z0 = _bias_correction(stats, point)
    a = _acceleration(jackknife)
    levels = []
    for shifted in (z0 - z, z0 + z):
        if 1 - a * shifted <= 0:  # only for an absurd skew: the BCa map is no longer monotone
            return None, f"the resamples are too skewed for a BCa interval (acceleration {a:.3g})"
        levels.append(_NORMAL.cdf(z0 + shifted / (1 - a * shifted)))
    return _levels_ci(stats, levels[0], levels[1], unresolved)


def expanded_z(n_tasks: int) -> float:
    """√(n/(n − 1))·t(n − 1, 0.975): the normal quantile 1.96 widened for n tasks (Hesterberg 2015, "expanded
    percentile"); 1.96 itself for fewer than two tasks (no spread to widen)."""
    if n_tasks < 2:
        return _Z_HIGH
    return math.sqrt(n_tasks / (n_tasks - 1)) * _student_t_quantile(HIGH, n_tasks - 1)


def _student_t_quantile(p: float, df: int) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish–Fisher expansion in 1/df
    (Abramowitz & Stegun 26.7.5), within 0.2 % of the exact value at 3 df and 1e-5 from 10 df on."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    x = _NORMAL.inv_cdf(p)
    terms = ((x ** 3 + x) / 4,
             (5 * x ** 5 + 16 * x ** 3 + 3 * x) / 96,
             (3 * x ** 7 + 19 * x ** 5 + 17 * x ** 3 - 15 * x) / 384,
             (79 * x ** 9 + 776 * x ** 7 + 1482 * x ** 5 - 1920 * x ** 3 - 945 * x) / 92160)
    return x + sum(term / df ** (power + 1) for power, term in enumerate(terms))


def _bias_correction(stats: np.ndarray, point: float) -> float:
    """z0 = Φ⁻¹(share of resamples below the point): ties and undefined (nan) resamples count half, since they
    sit on neither side; the share is kept within half a resample of 0 and 1 so z0 stays finite. A tie is within
    TIE_TOLERANCE of the largest magnitude: resolve rates tie the point exactly in exact arithmetic (a mean of
    c/3), and which side a float sum's last bit lands on would otherwise move z0, and the interval, with it."""
    r = stats.size
    finite = stats[np.isfinite(stats)]
    tol = TIE_TOLERANCE * max(abs(point), float(np.max(np.abs(finite))) if finite.size else 0.0)
    below = np.count_nonzero(stats < point - tol)
    level = (below + 0.5 * (r - below - np.count_nonzero(stats > point + tol))) / r
    return _NORMAL.inv_cdf(min(max(level, 0.5 / r), 1 - 0.5 / r))


def _acceleration(jackknife: np.ndarray) -> float:
    """a = Σd³ / (6·(Σd²)^1.5), d = mean − each jackknife value; 0 with fewer than two tasks or no spread."""
    if jackknife.size < 2:
        return 0.0
    d = jackknife.mean() - jackknife
    peak = float(np.max(np.abs(d)))
    if not peak > 0:
        return 0.0
    d = d / peak  # a does not change with the scale; tiny costs (a what-if at 1e-160 $) would underflow to 0
    spread = float(np.sum(d * d))
    return float(np.sum(d * d * d)) / (6 * spread ** 1.5) if spread > 0 else 0.0


def _mean_estimates(columns: np.ndarray, indices: Indices) -> list[Estimate]:
    """Mean over tasks of every column, each with its bootstrap CI from the same resamples."""
    sums = _resampled_sums(indices, columns)
    return [mean_from_sums(columns[:, j], sums[:, j]) for j in range(columns.shape[1])]


def mean_from_sums(column: np.ndarray, sums: np.ndarray) -> Estimate:
    """The mean over tasks of one per-task column with its expanded BCa interval, from the column's resampled
    sums (drawn by the caller; bench/ci_coverage.py draws many simulated runs' at once). The jackknife of a mean
    is (Σ − x_i)/(n − 1); a column without spread gives z0 = a = 0 and the point itself as interval."""
    n = column.size
    jackknife = (column.sum() - column) / (n - 1) if n > 1 else np.zeros(0)
    ci, reason = _bca_ci(sums / n, float(column.mean()), jackknife, "", expanded_z(n))
    return Estimate(float(column.mean()), ci, reason)


def _ratios(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Resampled ratios, +inf where nothing was resolved (a zero denominator)."""
    out = np.full(numerator.shape, np.inf)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


# --- estimators over tasks ----------------------------------------------------------------------------------------

def resolve_rates(n: np.ndarray, c: np.ndarray, indices: Indices) -> dict:
    """Avg@k, pass@k and pass^k (k = 1..min n) over tasks, from each task's seed count n and resolved count c."""
    n, c = _seed_counts(n, c)
    if n.size == 0:
        return {"avg_at_k": Estimate(None, None, NO_TASKS), "pass_at_k": {}, "pass_hat_k": {}}
    k_max = int(n.min())
    j = np.arange(k_max)
    draws_left = (n[:, None] - j).astype(np.float64)  # n − j ≥ 1 for j < k_max ≤ n
    # column k−1 is the product over j < k: C(n−c,k)/C(n,k) and C(c,k)/C(n,k), one factor per draw
    all_missed = np.cumprod(np.maximum(n[:, None] - c[:, None] - j, 0) / draws_left, axis=1)
    all_resolved = np.cumprod(np.maximum(c[:, None] - j, 0) / draws_left, axis=1)
    estimates = _mean_estimates(np.column_stack([c / n, 1.0 - all_missed, all_resolved]), indices)
    ks = range(1, k_max + 1)
    return {"avg_at_k": estimates[0], "pass_at_k": dict(zip(ks, estimates[1:1 + k_max])),
            "pass_hat_k": dict(zip(ks, estimates[1 + k_max:]))}


def ratio(numerator: np.ndarray, denominator: np.ndarray, indices: Indices, *, nothing: str) -> Estimate:
    """Σ numerator / Σ denominator over tasks (e.g. cost per resolved attempt) with its expanded BCa interval;
    `nothing` is the reason when nothing is resolved at all (a zero denominator)."""
    num, den = _ratio_terms(numerator, denominator)
    if num.size == 0:
        return Estimate(None, None, NO_TASKS)
    if den.sum() == 0:
        return Estimate(None, None, nothing)
    return ratio_from_sums(num, den, _resampled_sums(indices, np.column_stack([num, den])))


def ratio_from_sums(num: np.ndarray, den: np.ndarray, sums: np.ndarray) -> Estimate:
    """`ratio` of checked terms (some resolved) from their resampled sums (resamples × [Σnum, Σden]), drawn by
    the caller: bench/ci_coverage.py draws many simulated runs' sums in one matrix product. Where one task holds
    every resolve, leaving it out resolves nothing: the jackknife, and with it the acceleration, is undefined, so
    the interval is only bias-corrected (a = 0); the resamples without that task (about a third) leave its upper
    side open anyway, and the lower bound is still given."""
    value = float(num.sum() / den.sum())
    jackknife = _leave_one_out(num, den)
    defined = bool(np.isfinite(jackknife).all())
    ci, reason = _bca_ci(_ratios(sums[:, 0], sums[:, 1]), value, jackknife if defined else np.zeros(0),
                         "nothing resolves", expanded_z(num.size))
    if not defined and reason is not None:
        reason = f"only one task resolves anything: {reason}"
    return Estimate(value, ci, reason)


def _leave_one_out(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """The ratio without each task in turn (the jackknife over tasks); +inf where the others resolve nothing. One
    task has no leave-one-out sample: its jackknife is empty (no acceleration)."""
    if num.size < 2:
        return np.zeros(0)
    return _ratios(num.sum() - num, den.sum() - den)


def _expanded_percentile_ci(stats: np.ndarray, n_tasks: int, unresolved: str) -> tuple[Bounds | None, str | None]:
    """The resamples' quantiles at Φ(∓z_n): the expanded percentile interval (BCa with z0 = a = 0)."""
    z = expanded_z(n_tasks)
    return _levels_ci(stats, _NORMAL.cdf(-z), _NORMAL.cdf(z), unresolved)


def paired_rate_difference(c_a: np.ndarray, n_a: np.ndarray, c_b: np.ndarray, n_b: np.ndarray,
                           indices: Indices) -> Estimate:
    """Avg@k(A) − Avg@k(B) over the shared tasks (arrays aligned by task), with the paired t interval over tasks
    (`indices` is taken for the signature the other estimators share; the t interval draws no resamples)."""
    n_a, c_a = _seed_counts(n_a, c_a)
    n_b, c_b = _seed_counts(n_b, c_b)
    _same_tasks(n_a, n_b)
    if n_a.size == 0:
        return Estimate(None, None, NO_TASKS)
    return rate_difference(c_a / n_a - c_b / n_b)


def rate_difference(column: np.ndarray) -> Estimate:
    """The mean of per-task differences of resolve rates with the paired Student t interval, mean ± t(n − 1,
    0.975)·s/√n, within [−1, 1]: at 30 tasks it covers 95.0–95.3 % where the bootstrap's intervals of these
    mostly-zero differences covered 90.7–92.9 % at low resolve rates (bench/ci_coverage.py). One task: the
    point."""
    n, mean = column.size, float(column.mean())
    if n < 2:
        return Estimate(mean, (mean, mean))
    half = _student_t_quantile(HIGH, n - 1) * float(column.std(ddof=1)) / math.sqrt(n)
    return Estimate(mean, (max(-1.0, mean - half), min(1.0, mean + half)))


def paired_ratio_difference(num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray,
                            indices: Indices, *, nothing: str) -> Estimate:
    """Ratio(A) − ratio(B) over the shared tasks (arrays aligned by task), both on the same resamples, with the
    expanded percentile interval; None with `nothing` (naming the arm) when an arm resolves nothing at all."""
    num_a, den_a = _ratio_terms(num_a, den_a)
    num_b, den_b = _ratio_terms(num_b, den_b)
    _same_tasks(num_a, num_b)
    if num_a.size == 0:
        return Estimate(None, None, NO_TASKS)
    empty = [arm for arm, den in (("A", den_a), ("B", den_b)) if den.sum() == 0]
    if empty:
        return Estimate(None, None, f"arm{'s' if len(empty) == 2 else ''} {' and '.join(empty)}: {nothing}")
    sums = _resampled_sums(indices, np.column_stack([num_a, den_a, num_b, den_b]))
    return ratio_difference_from_sums(num_a, den_a, num_b, den_b, sums)


def ratio_difference_from_sums(num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray,
                               sums: np.ndarray) -> Estimate:
    """`paired_ratio_difference` of checked terms (both arms resolve something) from their resampled sums
    (resamples × [Σnum_a, Σden_a, Σnum_b, Σden_b]), drawn by the caller."""
    with np.errstate(invalid="ignore"):  # inf − inf: neither arm resolves anything in that resample
        diff = _ratios(sums[:, 0], sums[:, 1]) - _ratios(sums[:, 2], sums[:, 3])
    value = float(num_a.sum() / den_a.sum() - num_b.sum() / den_b.sum())
    ci, reason = _expanded_percentile_ci(diff, num_a.size, "an arm resolves nothing")
    return Estimate(value, ci, reason)


def mcnemar(resolved_a: np.ndarray, resolved_b: np.ndarray) -> dict:
    """McNemar's exact test on one seed per task: b = A resolved and B not, c = the reverse, two-sided p =
    min(1, 2·P[X ≤ min(b, c)]) with X ~ Binomial(b + c, 1/2); exact in integers, p = 1 when b + c = 0."""
    a, b = _flags(resolved_a), _flags(resolved_b)
    _same_tasks(a, b)
    a_only, b_only = int(np.count_nonzero(a & ~b)), int(np.count_nonzero(b & ~a))
    trials = a_only + b_only
    # Σ_{i ≤ min} C(trials, i) in exact integers, each C from the last (a math.comb per term took 18 s at
    # 15,000 disagreements)
    tail, term = 0, 1
    for i in range(min(a_only, b_only) + 1):
        tail += term
        term = term * (trials - i) // (i + 1)
    return {"a_only": a_only, "b_only": b_only, "p_value": min(1.0, 2 * tail / 2 ** trials)}


# --- input checks -------------------------------------------------------------------------------------------------

def _ints(values: Sequence[int] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "biu":
        raise ValueError(f"{name} must be a 1-D integer array")
    return arr.astype(np.int64)


def _seed_counts(n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, c = _ints(n, "n"), _ints(c, "c")
    if n.shape != c.shape:
        raise ValueError(f"n and c differ in length: {n.size} and {c.size}")
    if n.size and ((n < 1).any() or (c < 0).any() or (c > n).any()):
        raise ValueError("need n ≥ 1 and 0 ≤ c ≤ n for every task")
    return n, c


def _ratio_terms(numerator: np.ndarray, denominator: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    num = np.asarray(numerator, dtype=np.float64).reshape(-1)
    den = np.asarray(denominator, dtype=np.float64).reshape(-1)
    if num.shape != den.shape:
        raise ValueError(f"numerator and denominator differ in length: {num.size} and {den.size}")
    if not (np.isfinite(num).all() and np.isfinite(den).all()) or (den < 0).any():
        raise ValueError("numerators must be finite and denominators finite and ≥ 0")
    return num, den


def _flags(values: np.ndarray) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or (arr.size and not np.isin(arr, (0, 1)).all()):
        raise ValueError("resolved flags must be a 1-D array of booleans (or 0/1)")
    return arr.astype(bool)


def _same_tasks(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ValueError(f"the arms' arrays must be aligned by task; lengths {a.size} and {b.size}")
