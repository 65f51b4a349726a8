"""Claims ``softmax-jacobian.*``: the results of :mod:`theory.softmax_jacobian` as checkable claims.

Instances are rows built by the theory constructors (from probabilities or from logits), with
an optional test direction ``u``. Each claim measures both sides in the backend's dtype, and
re-decides near-ties on the exact instance: the row read as exact rationals and normalised
exactly (or, from logits, its softmax in ball arithmetic).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint
import numpy as np
from hypothesis import strategies as st

from checks import exact, tolerance
from checks.backends import Backend, to_numpy
from checks.strategies import (
    any_row,
    runner_up_instances,
    spread_instances,
    tied_instances,
    with_direction,
)
from checks.verdict import REGISTRY, Claim, Instance, Judgement, Measurement, Relation
from theory import softmax_jacobian as sj

# Seed 002 is "Gradients 2: A Confident Attention Head Passes Almost No Gradient"; each claim
# names the section of it that states the result, or "rankwall" where we reconstructed it.

#: Largest V for which dense eigenvalues of J are computed (rank and trace cross-checks).
DENSE_LIMIT = 512

#: Largest V for which an exact rank is computed with python-flint.
EXACT_RANK_LIMIT = 48

# --------------------------------------------------------------------------- instances

BUILDERS: dict[str, tuple[str, Callable[..., Any]]] = {
    "runner-up": ("probabilities", sj.construct_runner_up),
    "tied-atoms": ("probabilities", sj.construct_tied_atoms),
    "spread-tail": ("probabilities", sj.construct_spread_tail),
    "uniform": ("probabilities", sj.construct_uniform),
    "dirichlet": ("probabilities", sj.construct_dirichlet),
    "sparse": ("probabilities", sj.construct_sparse),
    "logits": ("logits", sj.construct_logits),
}
DIRECTION_KEYS = ("direction_seed", "direction_scale", "direction_offset")


@dataclass(frozen=True)
class Built:
    """An instance in a backend: its rows, the raw float row (for the exact route), a direction."""

    rows: sj.SoftmaxRows
    raw: np.ndarray
    form: str
    direction: Any
    V: int

    @functools.cached_property
    def exact_row(self) -> exact.ExactRow:
        if self.form == "logits":
            return exact.ExactRow.from_logits(self.raw)
        return exact.ExactRow.from_probabilities(self.raw)


def build(instance: Instance, backend: Backend) -> Built:
    """Build an instance's row (and direction) in a backend."""
    form, constructor = BUILDERS[instance.family]
    params = {k: v for k, v in instance.params.items() if k not in DIRECTION_KEYS}
    array = constructor(**params, xp=backend.xp, dtype=backend.dtype, device=backend.device)
    row = backend.xp.reshape(array, (1, -1))
    rows = sj.softmax_rows(row) if form == "logits" else sj.probability_rows(row)
    direction = None
    if "direction_seed" in instance.params:
        direction = sj.construct_direction(
            params["V"],
            instance.params["direction_seed"],
            scale=instance.params.get("direction_scale", 1.0),
            offset=instance.params.get("direction_offset", 0.0),
            xp=backend.xp,
            dtype=backend.dtype,
            device=backend.device,
        )
        direction = backend.xp.reshape(direction, (1, -1))
    return Built(rows, to_numpy(row)[0].astype(np.float64), form, direction, int(params["V"]))


@functools.lru_cache(maxsize=64)
def _numpy_backend() -> Backend:
    from checks.backends import resolve

    return resolve("numpy")


def rebuilt(instance: Instance) -> Built:
    """The instance rebuilt in float64 NumPy (what the exact routes read)."""
    return build(instance, _numpy_backend())


def _scalar(x: Any) -> float:
    return float(to_numpy(x).reshape(-1)[0])


def _u(built: Built) -> float:
    return tolerance.unit_roundoff(built.rows.p.dtype)


# --------------------------------------------------------------------------- exact helpers


def exact_entries(built: Built) -> tuple[list[Any], bool]:
    """The exact probabilities of the row: rationals, or (from logits) balls at the current
    working precision."""
    if built.form == "logits":
        w = [(exact.ball(z) - exact.ball(built.raw.max())).exp() for z in built.raw]
        total = sum(w, start=flint.arb(0))
        return [x / total for x in w], False
    values = [exact.rational(x) for x in built.raw]
    total = sum(values, start=flint.fmpq(0))
    return [x / total for x in values], True


def judge_sides(sides: Callable[[], tuple[Any, Any, bool]]) -> Judgement:
    """Evaluate ``(lhs, rhs, is_exact)`` exactly, or in balls at rising precision until the
    sign of ``rhs - lhs`` is decided (a ball can never show two sides equal)."""
    for bits in exact.BALL_PRECISIONS:
        with exact.precision(bits):
            lhs, rhs, is_exact = sides()
            difference = rhs - lhs
            decided = exact.sign(difference)
            method = "exact-rational" if is_exact else f"interval-{bits}"
            if decided is not None or is_exact:
                break
    return Judgement(exact.to_float(lhs), exact.to_float(rhs), decided, method, exact.radius(difference))


def _norm_against(built: Built, bound: exact.Bound, norm_on_left: bool) -> Judgement:
    """Exact comparison of the spectral norm with a bound t(m, s)."""
    row = built.exact_row
    outcome, method = exact.decide_norm_at_most(row, bound)
    estimate = _scalar(sj.spectral_norm(rebuilt_rows(built)))
    lo, hi, _ = exact.certified_norm(row, estimate)
    norm = 0.5 * (lo + hi)
    with exact.precision(128):
        m, s, _, _ = row.parts(False)
        bound_value = exact.to_float(bound.value(m, s, False))
    certificate = {"norm_enclosure": [lo, hi], "decided_by": "sign of the secular function at the bound"}
    if outcome is None:
        sign = None
    else:
        sign = outcome if norm_on_left else -outcome
    lhs, rhs = (norm, bound_value) if norm_on_left else (bound_value, norm)
    return Judgement(lhs, rhs, sign, method, 0.5 * (hi - lo), certificate)


def rebuilt_rows(built: Built) -> sj.SoftmaxRows:
    """The built row in float64 NumPy, as probabilities or logits."""
    row = built.raw.reshape(1, -1)
    return sj.softmax_rows(row) if built.form == "logits" else sj.probability_rows(row)


# --------------------------------------------------------------------------- instance lists


def witness_rows(V: int) -> list[Instance]:
    """Constructed rows at vocabulary size V: attaining, approaching, tied, extreme."""
    rows = [Instance("runner-up", {"V": V, "m": m, "tail_mass": 0.0}) for m in (0.5, 0.75, 0.99, 1 - 1e-9)]
    rows += [Instance("tied-atoms", {"V": V, "m": m}) for m in (0.5, 0.3, 0.25) if V > 2 and m >= 1 / V]
    rows += [Instance("spread-tail", {"V": V, "m": m}) for m in (0.99, 0.5) if m >= 1 / V]
    rows.append(Instance("uniform", {"V": V}))
    rows.append(Instance("logits", {"V": V, "gap": 700.0, "offset": 1e6, "runners": 1, "tail_gap": 1.0}))
    rows.append(Instance("logits", {"V": V, "gap": 30.0, "offset": 0.0, "runners": 1, "tail_gap": 0.0}))
    rows.append(Instance("sparse", {"V": V, "support": min(V, 5), "seed": 0}))
    return rows


def random_rows(V: int, n: int, seed: int) -> list[Instance]:
    """``n`` drawn rows at vocabulary size V (Dirichlet over six decades of concentration)."""
    rng = np.random.default_rng(seed)
    return [
        Instance(
            "dirichlet",
            {"V": V, "concentration": float(10 ** rng.uniform(-3, 3)), "seed": int(rng.integers(2**31))},
        )
        for _ in range(n)
    ]


def _add_direction(instances: list[Instance], seed: int = 0) -> list[Instance]:
    offsets = (0.0, 1e4)
    return [
        Instance(i.family, {**i.params, "direction_seed": seed + k, "direction_offset": offsets[k % 2]})
        for k, i in enumerate(instances)
    ]


# --------------------------------------------------------------------------- measurements


def _measure_norm_bound(kind: str, norm_on_left: bool) -> Callable[[Instance, Backend, Fraction], Measurement]:
    def measure(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
        built = build(instance, backend)
        norm = _scalar(sj.spectral_norm(built.rows))
        m, s = _scalar(built.rows.top), _scalar(built.rows.complement)
        bound = {"lower": m * s, "upper": 2 * m * s, "envelope": min(m, 2 * m * s)}[kind] * float(factor)
        tol = tolerance.spectral_norm_tolerance(built.V, _u(built), max(norm, bound))
        lhs, rhs = (norm, bound) if norm_on_left else (bound, norm)
        return Measurement(lhs, rhs, tol, f"{backend.dtype_name} secular solve")

    return measure


#: The structure of each norm bound: t = coefficient * m(1-m), or * min(m, 2m(1-m)).
BOUND_FORMS = {
    "lower": ("ms", Fraction(1)),
    "upper": ("ms", Fraction(2)),
    "envelope": ("envelope", Fraction(1)),
}


def _judge_norm_bound(kind: str, norm_on_left: bool) -> Callable[[Instance, Fraction], Judgement]:
    def judge(instance: Instance, factor: Fraction) -> Judgement:
        form, coefficient = BOUND_FORMS[kind]
        return _norm_against(rebuilt(instance), exact.Bound(form, coefficient * factor), norm_on_left)

    return judge


def measure_spread(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
    built = build(instance, backend)
    norm = _scalar(sj.spectral_norm(built.rows))
    m, s = _scalar(built.rows.top), _scalar(built.rows.complement)
    atoms = built.V - 1
    ceiling = m * s * atoms / (atoms - 1) * float(factor)
    tol = tolerance.spectral_norm_tolerance(built.V, _u(built), max(norm, ceiling))
    return Measurement(norm, ceiling, tol, f"{backend.dtype_name} secular solve")


def judge_spread(instance: Instance, factor: Fraction) -> Judgement:
    atoms = instance.params["V"] - 1
    bound = exact.Bound("ms", Fraction(atoms, atoms - 1) * factor)
    return _norm_against(rebuilt(instance), bound, norm_on_left=True)


def measure_variance(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
    built = build(instance, backend)
    lhs = _scalar(sj.quadratic_form(built.rows, built.direction))
    rhs = _scalar(sj.variance(built.rows, built.direction))
    second = _scalar(backend.xp.sum(built.rows.p * built.direction**2))
    tol = tolerance.quadratic_form_tolerance(built.V, _u(built), second)
    return Measurement(lhs, rhs, tol, f"{backend.dtype_name} matrix form vs two-pass variance")


def _exact_direction(instance: Instance) -> tuple[Built, list[Any], list[Any], bool]:
    built = rebuilt(instance)
    p, is_exact = exact_entries(built)
    u = [exact.rational(x) if is_exact else exact.ball(x) for x in to_numpy(built.direction)[0]]
    return built, p, u, is_exact


def _exact_form(p: list[Any], u: list[Any], zero: Any) -> tuple[Any, Any]:
    """``(mean, u^T J u)`` in the matrix form, in exact or ball arithmetic."""
    mean = sum((pi * ui for pi, ui in zip(p, u, strict=True)), start=zero)
    return mean, sum((ui * (pi * ui - pi * mean) for pi, ui in zip(p, u, strict=True)), start=zero)


def judge_variance(instance: Instance, factor: Fraction) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        _, p, u, is_exact = _exact_direction(instance)
        zero = flint.fmpq(0) if is_exact else flint.arb(0)
        mean, form = _exact_form(p, u, zero)
        return form, sum((pi * (ui - mean) ** 2 for pi, ui in zip(p, u, strict=True)), start=zero), is_exact

    return judge_sides(sides)


def measure_psd(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
    built = build(instance, backend)
    form = _scalar(sj.quadratic_form(built.rows, built.direction))
    second = _scalar(backend.xp.sum(built.rows.p * built.direction**2))
    tol = tolerance.quadratic_form_tolerance(built.V, _u(built), second)
    return Measurement(0.0, form, tol, f"{backend.dtype_name} matrix form")


def judge_psd(instance: Instance, factor: Fraction) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        _, p, u, is_exact = _exact_direction(instance)
        zero = flint.fmpq(0) if is_exact else flint.arb(0)
        return zero, _exact_form(p, u, zero)[1], is_exact

    return judge_sides(sides)


def measure_kernel(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
    built = build(instance, backend)
    xp = backend.xp
    residual = _scalar(xp.max(xp.abs(sj.jvp(built.rows, xp.ones_like(built.rows.p)))))
    tol = tolerance.gamma(built.V + 2, _u(built)) * _scalar(built.rows.top)
    return Measurement(residual, 0.0, tol, f"{backend.dtype_name} O(V) product")


def judge_kernel(instance: Instance, factor: Fraction) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        p, is_exact = exact_entries(rebuilt(instance))
        total = sum(p, start=flint.fmpq(0) if is_exact else flint.arb(0))
        worst_entry = max((abs(pi * (1 - total)) for pi in p), key=exact.to_float)
        return worst_entry, 0 * worst_entry, is_exact

    return judge_sides(sides)


def _trace_sides(instance: Instance, backend: Backend, other: Callable[[Any], Any]) -> Measurement:
    built = build(instance, backend)
    xp = backend.xp
    u = _u(built)
    if built.V <= DENSE_LIMIT:
        eigenvalues = xp.linalg.eigvalsh(sj.dense_jacobian(built.rows))
        lhs = _scalar(xp.sum(eigenvalues))
        norm = max(_scalar(xp.max(eigenvalues)), 0.0)
        tol = built.V * tolerance.dense_eigenvalue_error(built.V, u, norm, _scalar(built.rows.top))
        method = f"{backend.dtype_name} sum of eigvalsh(J)"
    else:
        lhs = _scalar(sj.trace(built.rows))
        tol = 0.0
        method = f"{backend.dtype_name} diagonal sum"
    rhs = _scalar(other(built.rows))
    tol += 2 * tolerance.sum_tolerance(built.V, u, max(lhs, rhs, 0.0), extra_operations=3)
    return Measurement(lhs, rhs, tol, method)


def measure_trace(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
    return _trace_sides(instance, backend, sj.collision_complement)


def judge_trace(instance: Instance, factor: Fraction) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        p, is_exact = exact_entries(rebuilt(instance))
        zero = flint.fmpq(0) if is_exact else flint.arb(0)
        trace = sum((pi * (1 - pi) for pi in p), start=zero)
        return trace, 1 - sum((pi * pi for pi in p), start=zero), is_exact

    return judge_sides(sides)


def measure_trace_entropy(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
    return _trace_sides(instance, backend, sj.entropy)


def judge_trace_entropy(instance: Instance, factor: Fraction) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        p, _ = exact_entries(rebuilt(instance))
        balls = [flint.arb(x) for x in p]
        trace = sum((x * (1 - x) for x in balls), start=flint.arb(0))
        return trace, -sum((x * x.log() for x in balls if x > 0), start=flint.arb(0)), False

    return judge_sides(sides)


def numerical_rank(built: Built, backend: Backend) -> tuple[float, dict[str, Any]]:
    """Rank of J with a certificate: dense eigenvalues against a Weyl threshold for small V,
    else the interlacing bound (smallest nonzero eigenvalue >= smallest positive p). Returns
    ``nan`` when the eigenvalue gap does not clear the threshold."""
    xp = backend.xp
    u = _u(built)
    if built.V <= DENSE_LIMIT:
        eigenvalues = np.sort(to_numpy(xp.linalg.eigvalsh(sj.dense_jacobian(built.rows)))[0])
        threshold = tolerance.dense_eigenvalue_error(
            built.V, u, max(float(eigenvalues[-1]), 0.0), _scalar(built.rows.top)
        )
        rank = int(np.sum(eigenvalues > threshold))
        above = float(eigenvalues[-rank]) if rank else 0.0
        below = float(eigenvalues[-rank - 1]) if rank < built.V else 0.0
        certified = rank == 0 or (above > 4 * threshold and below < threshold / 4)
        certificate = {"threshold": threshold, "smallest_counted": above, "largest_dropped": below}
        return (float(rank) if certified else math.nan), certificate
    positive = built.rows.p > 0
    smallest = _scalar(xp.min(xp.where(positive, built.rows.p, xp.ones_like(built.rows.p))))
    support = int(_scalar(sj.support_size(built.rows)))
    threshold = tolerance.gamma(built.V + 2, u) * _scalar(built.rows.top) * 4
    certificate = {"smallest_positive_p": smallest, "threshold": threshold, "support": support}
    return (float(support - 1) if smallest > threshold else math.nan), certificate


def exact_rank(instance: Instance) -> tuple[int | None, str]:
    """Exact rank of :math:`J(\\hat p)` over the rationals (python-flint), small V only; else the
    interlacing certificate on the exact row: rank = |support| - 1 (every positive entry
    is an exact positive rational)."""
    built = rebuilt(instance)
    if built.form == "logits":
        return int(np.count_nonzero(np.isfinite(built.raw))) - 1, "certificate (softmax of logits is positive)"
    p, _ = exact_entries(built)
    if built.V <= EXACT_RANK_LIMIT:
        n = len(p)
        matrix = flint.fmpq_mat(
            n, n, [(pi if i == j else 0) - pi * pj for i, pi in enumerate(p) for j, pj in enumerate(p)]
        )
        return matrix.rank(), "exact-rational rank (python-flint)"
    return sum(1 for x in p if x > 0) - 1, "interlacing certificate on the exact row"


def measure_rank(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
    built = build(instance, backend)
    rank, certificate = numerical_rank(built, backend)
    support = _scalar(sj.support_size(built.rows))
    return Measurement(rank, support - 1, 0.0, f"{backend.dtype_name} rank certificate", certificate)


def judge_rank(instance: Instance, factor: Fraction) -> Judgement:
    rank, method = exact_rank(instance)
    built = rebuilt(instance)
    support = int(np.count_nonzero(built.raw)) if built.form == "probabilities" else built.V
    return Judgement(float(rank), float(support - 1), (support - 1 > rank) - (support - 1 < rank), method)


def measure_rank_full(instance: Instance, backend: Backend, factor: Fraction) -> Measurement:
    built = build(instance, backend)
    rank, certificate = numerical_rank(built, backend)
    return Measurement(rank, float(built.V), 0.0, f"{backend.dtype_name} rank certificate", certificate)


def judge_rank_full(instance: Instance, factor: Fraction) -> Judgement:
    rank, method = exact_rank(instance)
    V = instance.params["V"]
    return Judgement(float(rank), float(V), (V > rank) - (V < rank), method)


# --------------------------------------------------------------------------- registration


def _claim(name: str, **fields: Any) -> Claim:
    fields.setdefault("witnesses", witness_rows)
    fields.setdefault("random_instances", random_rows)
    fields.setdefault("strategy", any_row)
    fields.setdefault("bound", None)
    return Claim(id=f"softmax-jacobian.{name}", **fields)


def _with_factor(
    measure: Callable[..., Measurement], judge: Callable[..., Judgement], extra: Fraction
) -> dict[str, Any]:
    return {
        "measure": lambda i, b, f: measure(i, b, f * extra),
        "judge_exactly": lambda i, f: judge(i, f * extra),
    }


#: Instances for the quadratic-form claims: every row with a test direction u attached.
WITH_DIRECTIONS: dict[str, Any] = {
    "witnesses": lambda V: _add_direction(witness_rows(V)),
    "random_instances": lambda V, n, seed: _add_direction(random_rows(V, n, seed), seed),
    "strategy": lambda: with_direction(any_row()),
}


variance_form = _claim(
    "variance-form",
    source="seed 002, 'The gradient is a variance' (displayed identity)",
    title="The quadratic form of J is a variance",
    statement="uᵀ J u = Var_p(u) = Σ p_i (u_i − E_p u)²  for every u",
    domain="every probability vector p, every real u",
    relation=Relation.EQUAL,
    measure=measure_variance,
    judge_exactly=judge_variance,
    **WITH_DIRECTIONS,
)
psd = _claim(
    "psd",
    source="seed 002, 'The gradient is a variance'",
    title="J is symmetric positive semidefinite",
    statement="uᵀ J u ≥ 0 for every u (J = diag(p) − ppᵀ is symmetric by construction)",
    domain="every probability vector p, every real u",
    relation=Relation.AT_MOST,
    measure=measure_psd,
    judge_exactly=judge_psd,
    **WITH_DIRECTIONS,
)
kernel = _claim(
    "kernel",
    source="seed 002, 'How tight that is' (smallest eigenvalue); 'What to keep' 3",
    title="J annihilates the constant direction",
    statement="J·1 = 0 (the logit gradients of a softmax row sum to zero)",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_kernel,
    judge_exactly=judge_kernel,
)
trace = _claim(
    "trace",
    source="seed 002, 'How tight that is' (trace line); 'What to keep' 3",
    title="The trace of J is a collision complement",
    statement="tr J = 1 − Σ p_i²",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_trace,
    judge_exactly=judge_trace,
)
rank = _claim(
    "rank",
    source="rankwall (reconstructed; seed 002 shows only the zero eigenvalue)",
    title="The rank of J is the support size minus one",
    statement="rank J = |supp p| − 1",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_rank,
    judge_exactly=judge_rank,
)
lower_bound = _claim(
    "lower-bound",
    source="seed 002, 'How tight that is' (displayed bound, lower half)",
    title="Lower bound on the spectral norm",
    statement="m(1 − m) ≤ ‖J‖₂,  m = max_i p_i",
    domain="every probability vector p (the seed states it for m ≥ 1/2)",
    relation=Relation.AT_MOST,
    bound="lower",
    measure=_measure_norm_bound("lower", norm_on_left=False),
    judge_exactly=_judge_norm_bound("lower", norm_on_left=False),
)
upper_bound = _claim(
    "upper-bound",
    source="seed 002, 'How tight that is' (displayed bound, upper half)",
    title="Upper bound on the spectral norm",
    statement="‖J‖₂ ≤ 2m(1 − m),  m = max_i p_i",
    domain="every probability vector p (the seed states it for m ≥ 1/2; sharp exactly there)",
    relation=Relation.AT_MOST,
    bound="upper",
    measure=_measure_norm_bound("upper", norm_on_left=True),
    judge_exactly=_judge_norm_bound("upper", norm_on_left=True),
)
envelope = _claim(
    "envelope",
    source="rankwall (exact envelope; sharpens seed 002's upper bound for m < 1/2)",
    title="The exact envelope of the spectral norm",
    statement="‖J‖₂ ≤ min(m, 2m(1 − m))",
    domain="every probability vector p",
    relation=Relation.AT_MOST,
    bound="upper",
    measure=_measure_norm_bound("envelope", norm_on_left=True),
    judge_exactly=_judge_norm_bound("envelope", norm_on_left=True),
)


def _attaining(V: int) -> list[Instance]:
    rows = [Instance("runner-up", {"V": V, "m": m, "tail_mass": 0.0}) for m in (0.5, 0.75, 0.99, 1 - 1e-9)]
    return rows + [Instance("tied-atoms", {"V": V, "m": m}) for m in (0.5, 0.3, 0.25) if V > 2 and m >= 1 / V]


envelope_attained = _claim(
    "envelope-attained",
    source="rankwall (witnesses for the envelope)",
    title="The envelope is attained",
    statement="‖J‖₂ = min(m, 2m(1 − m)) for the runner-up row (m, 1 − m) when m ≥ 1/2 "
    "and for two atoms tied at m ≤ 1/2",
    domain="the two constructed witnesses",
    relation=Relation.EQUAL,
    measure=_measure_norm_bound("envelope", norm_on_left=True),
    judge_exactly=_judge_norm_bound("envelope", norm_on_left=True),
    witnesses=_attaining,
    random_instances=lambda V, n, seed: [],
    strategy=lambda: st.one_of(runner_up_instances(exact_witness=True), tied_instances()),
)
lower_bound_approached = _claim(
    "lower-bound-approached",
    source="rankwall (seed 002's 64-position row, generalised)",
    title="The lower bound is approached by spreading the tail",
    statement="‖J‖₂ ≤ m(1 − m)·n/(n − 1) for (m, (1−m)/n, …, (1−m)/n) with n = V − 1 ≥ 2 tail atoms, "
    "so inf{‖J‖₂ : max p = m} = m(1 − m) over all V",
    domain="the spread-tail witness, V ≥ 3",
    relation=Relation.AT_MOST,
    bound="upper",
    measure=measure_spread,
    judge_exactly=judge_spread,
    witnesses=lambda V: [Instance("spread-tail", {"V": V, "m": m}) for m in (0.99, 0.75, 0.5) if V >= 3 and m >= 1 / V],
    random_instances=lambda V, n, seed: [],
    strategy=lambda: spread_instances(low_vocabulary=3),
)

upper_bound.with_mutant(
    "constant-1.9",
    statement="‖J‖₂ ≤ 1.9·m(1 − m)  (false: the runner-up row attains 2m(1 − m))",
    **_with_factor(upper_bound.measure, upper_bound.judge_exactly, Fraction(19, 20)),
)
lower_bound.with_mutant(
    "factor-1.1",
    statement="1.1·m(1 − m) ≤ ‖J‖₂  (false: a spread tail comes within a factor n/(n−1))",
    **_with_factor(lower_bound.measure, lower_bound.judge_exactly, Fraction(11, 10)),
)
trace.with_mutant(
    "equals-entropy",
    statement="tr J = −Σ p_i log p_i  (false: the trace is a collision complement)",
    measure=measure_trace_entropy,
    judge_exactly=judge_trace_entropy,
)
rank.with_mutant(
    "equals-V",
    statement="rank J = V  (false: J·1 = 0 always)",
    measure=measure_rank_full,
    judge_exactly=judge_rank_full,
)

for _claim_object in (
    variance_form,
    psd,
    kernel,
    trace,
    rank,
    lower_bound,
    upper_bound,
    envelope,
    envelope_attained,
    lower_bound_approached,
):
    REGISTRY.register(_claim_object)
