"""Claims ``softmax-jacobian.*``: the results of :mod:`rankwall.theory.softmax_jacobian` as checkable claims.

Cases (:class:`Row` dataclasses) are rows built by the theory constructors (from probabilities or from logits), with
an optional test direction ``u``. Each claim measures both sides in the backend's dtype, and
re-decides near-ties on the exact instance: the row read as exact rationals and normalised
exactly (or, from logits, its softmax in ball arithmetic).

What certifies a verdict (``certified_by``): a float margin beyond the rounding model, and balls,
are two-sided; exact rationals and the two-atom lemma are exact. ``rank`` is measured as an
interval lo ≤ rank J ≤ hi from J itself (:func:`rank_enclosure`), never from its right side
|supp p| − 1; either end alone proves a violation (one-sided). ``kernel`` is measured as the
product J·1 (:func:`rankwall.theory.softmax_jacobian.jvp`, and :func:`exact_jvp` on the exact row).

``--tighten F`` multiplies the bound of each inequality (the right side of an upper bound, the
left side of a lower bound); every bound here is real, so F multiplies it as it is. ``psd``,
uᵀJu ≥ 0, is the upper bound (E_p u)² ≤ E_p[u²] (as uᵀJu = E_p[u²] − (E_p u)²), so F asks for
(E_p u)² ≤ F·E_p[u²]; it is measured without cancellation as (1 − F)·E_p[u²] ≤ uᵀJu.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from typing import Any, ClassVar

import flint
import numpy as np
from hypothesis import strategies as st

from rankwall.checks import exact, exact_softmax, exact_vectors, tolerance
from rankwall.checks.backends import Backend, to_numpy
from rankwall.checks.verdict import (
    Case,
    Certification,
    Family,
    Judgement,
    Measurement,
    RankInterval,
    Relation,
    planted_side,
)
from rankwall.theory import softmax_jacobian as sj

# --------------------------------------------------------------------------- cases

#: The fields of a case that attach a test direction u to its row (absent from the JSON when unset).
DIRECTION_KEYS = ("direction_seed", "direction_scale", "direction_offset")


@dataclass(frozen=True)
class Row(Case):
    """Base of this family's cases: a row's constructor arguments (``V`` first, then the family's
    own), and an optional test direction u, ``sj.construct_direction(V, direction_seed,
    scale=direction_scale, offset=direction_offset)``, for the quadratic-form claims."""

    V: int
    direction_seed: int | None = field(default=None, kw_only=True)
    direction_scale: float | None = field(default=None, kw_only=True)
    direction_offset: float | None = field(default=None, kw_only=True)

    @property
    def arguments(self) -> dict[str, Any]:
        """The row constructor's arguments: every field but the direction."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in DIRECTION_KEYS}

    @property
    def params(self) -> dict[str, Any]:
        """The arguments, then the direction fields that are set (the keys of the JSON form)."""
        direction = {key: getattr(self, key) for key in DIRECTION_KEYS if getattr(self, key) is not None}
        return {**self.arguments, **direction}


@dataclass(frozen=True)
class RunnerUp(Row):
    """Top mass m, one runner-up, ``tail_mass`` spread over the rest (:func:`sj.construct_runner_up`)."""

    FAMILY: ClassVar[str] = "runner-up"
    m: float
    tail_mass: float = 0.0


@dataclass(frozen=True)
class TiedAtoms(Row):
    """Two atoms tied at m, the rest spread evenly (:func:`sj.construct_tied_atoms`)."""

    FAMILY: ClassVar[str] = "tied-atoms"
    m: float


@dataclass(frozen=True)
class SpreadTail(Row):
    """Top mass m, 1 − m spread evenly over V − 1 atoms (:func:`sj.construct_spread_tail`)."""

    FAMILY: ClassVar[str] = "spread-tail"
    m: float


@dataclass(frozen=True)
class Uniform(Row):
    """The uniform row 1/V (:func:`sj.construct_uniform`)."""

    FAMILY: ClassVar[str] = "uniform"


@dataclass(frozen=True)
class Dirichlet(Row):
    """A Dirichlet draw of the given concentration (:func:`sj.construct_dirichlet`)."""

    FAMILY: ClassVar[str] = "dirichlet"
    concentration: float
    seed: int


@dataclass(frozen=True)
class Sparse(Row):
    """Random masses on ``support`` random atoms, zeros elsewhere (:func:`sj.construct_sparse`)."""

    FAMILY: ClassVar[str] = "sparse"
    support: int
    seed: int


@dataclass(frozen=True)
class Logits(Row):
    """Logits with a top gap over ``runners`` runner-ups (:func:`sj.construct_logits`)."""

    FAMILY: ClassVar[str] = "logits"
    gap: float
    offset: float = 0.0
    runners: int = 1
    tail_gap: float | None = None


#: Every case of this family.
SoftmaxRow = RunnerUp | TiedAtoms | SpreadTail | Uniform | Dirichlet | Sparse | Logits

# --------------------------------------------------------------------------- strategies

BIG_VOCABULARIES = (1024, 8192, 32768, 131072)


def vocabularies(low: int = 2) -> st.SearchStrategy[int]:
    """V from ``low`` to 131,072, mostly small (fast to escalate), sometimes huge."""
    return st.one_of(
        st.integers(low, 16),
        st.integers(low, 600),
        st.sampled_from([v for v in BIG_VOCABULARIES if v >= low]),
    )


def top_masses(low: float, high: float) -> st.SearchStrategy[float]:
    """m in [low, high], with the ends, 1/2 and values a few ulps from 1 drawn often."""
    specials = [x for x in (0.5, 0.9, 0.99, 1 - 1e-6, 1 - 1e-12, 1 - 2**-52, 1.0) if low <= x <= high]
    return st.one_of(
        st.floats(low, high, allow_nan=False),
        st.sampled_from(specials or [high]),
        st.just(low),
    )


@st.composite
def runner_up_instances(draw: Any, exact_witness: bool = False) -> RunnerUp:
    V = draw(vocabularies())
    m = draw(top_masses(0.5, 1.0))
    tail = 0.0 if exact_witness or V < 3 else draw(st.one_of(st.just(0.0), st.floats(0, 1 - m)))
    return RunnerUp(V, m, tail_mass=min(tail, 1 - m))


@st.composite
def tied_instances(draw: Any) -> TiedAtoms:
    V = draw(vocabularies())
    m = draw(top_masses(max(1.0 / V, 1e-9), 0.5))
    if V == 2:
        m = 0.5
    return TiedAtoms(V, m)


@st.composite
def spread_instances(draw: Any, low_vocabulary: int = 2) -> SpreadTail:
    V = draw(vocabularies(low_vocabulary))
    return SpreadTail(V, draw(top_masses(1.0 / V, 1.0)))


@st.composite
def dirichlet_instances(draw: Any) -> Dirichlet:
    V = draw(vocabularies())
    alpha = 10 ** draw(st.floats(-3, 3))
    return Dirichlet(V, alpha, draw(st.integers(0, 2**16)))


@st.composite
def sparse_instances(draw: Any) -> Sparse:
    V = draw(vocabularies())
    support = draw(st.integers(1, V))
    return Sparse(V, support, draw(st.integers(0, 2**16)))


@st.composite
def logit_instances(draw: Any) -> Logits:
    V = draw(vocabularies())
    gap = draw(st.one_of(st.floats(0, 50), st.floats(50, 800), st.sampled_from([0.0, 700.0, 745.0, 800.0])))
    offset = draw(st.sampled_from([0.0, 1e3, -1e6, 1e8]))
    runners = draw(st.integers(1, V - 1))
    tail_gap = draw(st.floats(0, 50))
    return Logits(V, gap, offset=offset, runners=runners, tail_gap=tail_gap)


def any_row() -> st.SearchStrategy[SoftmaxRow]:
    """Every family: runner-ups, ties, spread tails, uniform, Dirichlet, sparse, logit gaps."""
    return st.one_of(
        runner_up_instances(),
        tied_instances(),
        spread_instances(),
        vocabularies().map(Uniform),
        dirichlet_instances(),
        sparse_instances(),
        logit_instances(),
    )


@st.composite
def with_direction(draw: Any, rows: st.SearchStrategy[SoftmaxRow]) -> SoftmaxRow:
    case = draw(rows)
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.sampled_from([1.0, 1e-6, 1e6]))
    offset = draw(st.sampled_from([0.0, 1.0, 1e4, -1e8]))
    return replace(case, direction_seed=seed, direction_scale=scale, direction_offset=offset)


# Seed 002 is "Gradients 2: A Confident Attention Head Passes Almost No Gradient"; each claim
# names the section of it that states the result, or "rankwall" where we reconstructed it.

#: Largest V for which dense eigenvalues of J are computed (rank and trace cross-checks).
DENSE_LIMIT = 512

#: Largest V for which an exact rank is computed with python-flint.
EXACT_RANK_LIMIT = 48

# --------------------------------------------------------------------------- instances

#: Each case type's form (a row of probabilities or of logits) and constructor.
BUILDERS: dict[type[Row], tuple[str, Callable[..., Any]]] = {
    RunnerUp: ("probabilities", sj.construct_runner_up),
    TiedAtoms: ("probabilities", sj.construct_tied_atoms),
    SpreadTail: ("probabilities", sj.construct_spread_tail),
    Uniform: ("probabilities", sj.construct_uniform),
    Dirichlet: ("probabilities", sj.construct_dirichlet),
    Sparse: ("probabilities", sj.construct_sparse),
    Logits: ("logits", sj.construct_logits),
}


@dataclass(frozen=True)
class Built:
    """An instance in a backend: its rows, the raw float row (for the exact route), a direction."""

    rows: sj.SoftmaxRows
    raw: np.ndarray
    form: str
    direction: Any
    V: int

    @functools.cached_property
    def exact_row(self) -> exact_softmax.ExactRow:
        if self.form == "logits":
            return exact_softmax.ExactRow.from_logits(self.raw)
        return exact_softmax.ExactRow.from_probabilities(self.raw)


def build(case: SoftmaxRow, backend: Backend) -> Built:
    """Build a case's row (and direction) in a backend."""
    form, constructor = BUILDERS[type(case)]
    array = constructor(**case.arguments, xp=backend.xp, dtype=backend.dtype, device=backend.device)
    row = backend.xp.reshape(array, (1, -1))
    rows = sj.softmax_rows(row) if form == "logits" else sj.probability_rows(row)
    direction = None
    if case.direction_seed is not None:
        direction = sj.construct_direction(
            case.V,
            case.direction_seed,
            scale=1.0 if case.direction_scale is None else case.direction_scale,
            offset=0.0 if case.direction_offset is None else case.direction_offset,
            xp=backend.xp,
            dtype=backend.dtype,
            device=backend.device,
        )
        direction = backend.xp.reshape(direction, (1, -1))
    return Built(rows, to_numpy(row)[0].astype(np.float64), form, direction, int(case.V))


@functools.lru_cache(maxsize=64)
def _numpy_backend() -> Backend:
    from rankwall.checks.backends import resolve

    return resolve("numpy")


def rebuilt(case: SoftmaxRow) -> Built:
    """The case rebuilt in float64 NumPy (what the exact routes read)."""
    return build(case, _numpy_backend())


def _scalar(x: Any) -> float:
    return float(to_numpy(x).reshape(-1)[0])


def _u(built: Built) -> float:
    return tolerance.unit_roundoff(built.rows.p.dtype)


# --------------------------------------------------------------------------- exact helpers


def exact_entries(built: Built) -> tuple[list[Any], bool]:
    """The exact probabilities of the row: rationals, or (from logits) balls at the current
    working precision."""
    if built.form == "logits":
        # One ball per distinct logit (the same ball each entry would get): a constructed row has three.
        top = exact.ball(built.raw.max())
        values, inverse = np.unique(built.raw, return_inverse=True)
        w = [(exact.ball(z) - top).exp() for z in values]
        total = sum((w[i] for i in inverse.reshape(-1)), start=flint.arb(0))
        shares = [x / total for x in w]
        return [shares[i] for i in inverse.reshape(-1)], False
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
    kind = None if decided is None else Certification.EXACT if is_exact else Certification.TWO_SIDED
    return Judgement(
        exact.to_float(lhs), exact.to_float(rhs), decided, method, exact.radius(difference), certified_by=kind
    )


def norm_certification(method: str, bound: exact_softmax.Bound) -> Certification:
    """What certifies a decision of :func:`rankwall.checks.exact_softmax.decide_norm_at_most`: exact rationals, or the
    two-atom lemma and the tie lemma against an envelope (coefficients compared as rationals), are
    exact; balls, and the tie lemma against t = c m(1 - m) (the sign of c s - 1 in balls), are two-sided."""
    if (
        method == "exact-rational"
        or method.startswith("two-atom")
        or (method.startswith("tie") and bound.kind == "envelope")
    ):
        return Certification.EXACT
    return Certification.TWO_SIDED


def _norm_against(built: Built, bound: exact_softmax.Bound, norm_on_left: bool) -> Judgement:
    """Exact comparison of the spectral norm with a bound t(m, s)."""
    row = built.exact_row
    outcome, method = exact_softmax.decide_norm_at_most(row, bound)
    estimate = _scalar(sj.spectral_norm(rebuilt_rows(built)))
    lo, hi, _ = exact_softmax.certified_norm(row, estimate)
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
    kind = None if sign is None else norm_certification(method, bound)
    return Judgement(lhs, rhs, sign, method, 0.5 * (hi - lo), certificate, kind)


def rebuilt_rows(built: Built) -> sj.SoftmaxRows:
    """The built row in float64 NumPy, as probabilities or logits."""
    row = built.raw.reshape(1, -1)
    return sj.softmax_rows(row) if built.form == "logits" else sj.probability_rows(row)


# --------------------------------------------------------------------------- instance lists


def witness_rows(V: int) -> list[SoftmaxRow]:
    """Constructed rows at vocabulary size V: attaining, approaching, tied, extreme."""
    rows: list[SoftmaxRow] = [RunnerUp(V, m, tail_mass=0.0) for m in (0.5, 0.75, 0.99, 1 - 1e-9)]
    rows += [TiedAtoms(V, m) for m in (0.5, 0.3, 0.25) if V > 2 and m >= 1 / V]
    rows += [SpreadTail(V, m) for m in (0.99, 0.5) if m >= 1 / V]
    rows.append(Uniform(V))
    rows.append(Logits(V, 700.0, offset=1e6, runners=1, tail_gap=1.0))
    rows.append(Logits(V, 30.0, offset=0.0, runners=1, tail_gap=0.0))
    rows.append(Sparse(V, min(V, 5), 0))
    return rows


def random_rows(V: int, n: int, seed: int) -> list[SoftmaxRow]:
    """``n`` drawn rows at vocabulary size V (Dirichlet over six decades of concentration)."""
    rng = np.random.default_rng(seed)
    return [Dirichlet(V, float(10 ** rng.uniform(-3, 3)), int(rng.integers(2**31))) for _ in range(n)]


def _add_direction(cases: list[SoftmaxRow], seed: int = 0) -> list[SoftmaxRow]:
    offsets = (0.0, 1e4)
    return [replace(case, direction_seed=seed + k, direction_offset=offsets[k % 2]) for k, case in enumerate(cases)]


# --------------------------------------------------------------------------- measurements


def subnormal(built: Built, *values: float) -> bool:
    """Whether a side falls below the dtype's normal range (a complement 1 − m past a logit gap of
    ~708 in float64), where the relative rounding model no longer bounds its error."""
    tiny = tolerance.smallest_normal(built.rows.p.dtype)
    return any(0 < abs(v) < tiny or (v == 0 and built.form == "logits") for v in values)


def left_to_the_exact_route(method: str) -> Measurement:
    """A float measurement that decides nothing (NaN sides never clear a tolerance): the exact
    judge, in balls on the exact row, decides instead."""
    nan = math.nan
    return Measurement(nan, nan, nan, f"{method}: a side below the normal range, left to the exact route")


def _measure_norm_bound(kind: str, norm_on_left: bool) -> Callable[[SoftmaxRow, Backend, Fraction], Measurement]:
    def measure(case: SoftmaxRow, backend: Backend, factor: Fraction) -> Measurement:
        built = build(case, backend)
        norm = _scalar(sj.spectral_norm(built.rows))
        m, s = _scalar(built.rows.top), _scalar(built.rows.complement)
        if subnormal(built, s, norm):
            return left_to_the_exact_route(f"{backend.dtype_name} secular solve")
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


def _judge_norm_bound(kind: str, norm_on_left: bool) -> Callable[[SoftmaxRow, Fraction], Judgement]:
    def judge(case: SoftmaxRow, factor: Fraction) -> Judgement:
        form, coefficient = BOUND_FORMS[kind]
        return _norm_against(rebuilt(case), exact_softmax.Bound(form, coefficient * factor), norm_on_left)

    return judge


def measure_spread(case: SpreadTail, backend: Backend, factor: Fraction) -> Measurement:
    built = build(case, backend)
    norm = _scalar(sj.spectral_norm(built.rows))
    m, s = _scalar(built.rows.top), _scalar(built.rows.complement)
    if subnormal(built, s, norm):
        return left_to_the_exact_route(f"{backend.dtype_name} secular solve")
    atoms = built.V - 1
    ceiling = m * s * atoms / (atoms - 1) * float(factor)
    tol = tolerance.spectral_norm_tolerance(built.V, _u(built), max(norm, ceiling))
    return Measurement(norm, ceiling, tol, f"{backend.dtype_name} secular solve")


def judge_spread(case: SpreadTail, factor: Fraction) -> Judgement:
    atoms = case.V - 1
    bound = exact_softmax.Bound("ms", Fraction(atoms, atoms - 1) * factor)
    return _norm_against(rebuilt(case), bound, norm_on_left=True)


def measure_variance(case: SoftmaxRow, backend: Backend, factor: Fraction, centred: bool = True) -> Measurement:
    """uᵀJu (matrix form) against Var_p(u) (two-pass), or against E_p[u²] for the mutant."""
    built = build(case, backend)
    lhs = _scalar(sj.quadratic_form(built.rows, built.direction))
    second = _scalar(backend.xp.sum(built.rows.p * built.direction**2))
    rhs = planted_side(_scalar(sj.variance(built.rows, built.direction)) if centred else second, factor)
    tol = tolerance.quadratic_form_tolerance(built.V, _u(built), second)
    return Measurement(
        lhs, rhs, tol, f"{backend.dtype_name} matrix form vs {'two-pass variance' if centred else 'E_p[u^2]'}"
    )


def _exact_direction(case: SoftmaxRow) -> tuple[Built, list[Any], list[Any], bool]:
    built = rebuilt(case)
    p, is_exact = exact_entries(built)
    u = [exact.rational(x) if is_exact else exact.ball(x) for x in to_numpy(built.direction)[0]]
    return built, p, u, is_exact


def exact_jvp(p: list[Any], u: list[Any], zero: Any) -> list[Any]:
    """``J u = p ⊙ (u − ⟨p, u⟩)`` (the O(V) product of :func:`rankwall.theory.softmax_jacobian.jvp`) in exact
    or ball arithmetic."""
    mean = sum((pi * ui for pi, ui in zip(p, u, strict=True)), start=zero)
    return [pi * (ui - mean) for pi, ui in zip(p, u, strict=True)]


def _exact_moments(p: list[Any], u: list[Any], zero: Any) -> tuple[Any, Any, Any]:
    """``(uᵀJu in the matrix form Σ u_i (Ju)_i, Var_p(u) two-pass, E_p[u²])`` in exact or ball arithmetic."""
    form = sum((ui * ji for ui, ji in zip(u, exact_jvp(p, u, zero), strict=True)), start=zero)
    mean = sum((pi * ui for pi, ui in zip(p, u, strict=True)), start=zero)
    variance = sum((pi * (ui - mean) ** 2 for pi, ui in zip(p, u, strict=True)), start=zero)
    return form, variance, sum((pi * ui * ui for pi, ui in zip(p, u, strict=True)), start=zero)


def judge_variance(case: SoftmaxRow, factor: Fraction, centred: bool = True) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        form, variance, second, is_exact = _vector_moments(case)
        return form, exact.planted_exactly(variance if centred else second, factor), is_exact

    return judge_sides(sides)


def measure_psd(case: SoftmaxRow, backend: Backend, factor: Fraction, allowed: Fraction = Fraction(1)) -> Measurement:
    """(E_p u)² ≤ F·c·E_p[u²] as (1 − F·c)·E_p[u²] ≤ uᵀJu (matrix form): c = 1 is uᵀJu ≥ 0, c = 0 the
    mutant J ⪰ diag(p)."""
    built = build(case, backend)
    form = _scalar(sj.quadratic_form(built.rows, built.direction))
    second = _scalar(backend.xp.sum(built.rows.p * built.direction**2))
    tol = tolerance.quadratic_form_tolerance(built.V, _u(built), second)
    return Measurement(float(1 - factor * allowed) * second, form, tol, f"{backend.dtype_name} matrix form")


def _vector_moments(case: SoftmaxRow) -> tuple[Any, Any, Any, bool]:
    """:func:`_exact_moments` of the exact row and direction: vectorised exact rationals
    (:func:`exact_vectors.quadratic_moments`) for probabilities, balls entry by entry for logits."""
    built = rebuilt(case)
    if built.form == "logits":
        _, p, u, _ = _exact_direction(case)
        return (*_exact_moments(p, u, flint.arb(0)), False)
    return (*exact_vectors.quadratic_moments(built.raw, to_numpy(built.direction)[0]), True)


def judge_psd(case: SoftmaxRow, factor: Fraction, allowed: Fraction = Fraction(1)) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        form, _, second, is_exact = _vector_moments(case)
        scale = flint.fmpq((1 - factor * allowed).numerator, (1 - factor * allowed).denominator)
        return scale * second, form, is_exact

    return judge_sides(sides)


def _kernel_direction(xp: Any, p: Any, direction: str) -> Any:
    """The vector J is applied to: 1 (the claim), or p itself (the mutant "J p = 0")."""
    return xp.ones_like(p) if direction == "ones" else p


def measure_kernel(case: SoftmaxRow, backend: Backend, factor: Fraction, direction: str = "ones") -> Measurement:
    """max_i |(J u)_i| through the O(V) product, u = 1: each entry p_i(1 − Σ_j p_j) of the computed
    row carries at most γ_{V+2}·m of rounding."""
    built = build(case, backend)
    xp = backend.xp
    product = sj.jvp(built.rows, _kernel_direction(xp, built.rows.p, direction))
    residual = _scalar(xp.max(xp.abs(product)))
    tol = tolerance.gamma(built.V + 2, _u(built)) * _scalar(built.rows.top)
    return Measurement(residual, planted_side(0.0, factor), tol, f"{backend.dtype_name} O(V) product J·u")


def judge_kernel(case: SoftmaxRow, factor: Fraction, direction: str = "ones") -> Judgement:
    """max_i |(J u)_i| from the product on the exact row (:func:`exact_vectors.kernel_residual` for
    probabilities, :func:`exact_jvp` in balls for logits), not from 1 − Σ p."""

    def sides() -> tuple[Any, Any, bool]:
        built = rebuilt(case)
        if built.form == "logits":
            p, is_exact = exact_entries(built)
            u = [flint.arb(1) for _ in p] if direction == "ones" else p
            worst_entry = max((abs(x) for x in exact_jvp(p, u, flint.arb(0))), key=exact.to_float)
        else:
            worst_entry, is_exact = exact_vectors.kernel_residual(built.raw, direction), True
        return worst_entry, exact.planted_exactly(0 * worst_entry, factor), is_exact

    return judge_sides(sides)


def _trace_sides(
    case: SoftmaxRow, backend: Backend, other: Callable[[Any], Any], factor: Fraction = Fraction(1)
) -> Measurement:
    """tr J (eigenvalues summed, or the diagonal) against ``other`` of the row, moved by ``factor``."""
    built = build(case, backend)
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
    rhs = planted_side(_scalar(other(built.rows)), factor)
    tol += 2 * tolerance.sum_tolerance(built.V, u, max(lhs, rhs, 0.0), extra_operations=3)
    return Measurement(lhs, rhs, tol, method)


def measure_trace(case: SoftmaxRow, backend: Backend, factor: Fraction) -> Measurement:
    return _trace_sides(case, backend, sj.collision_complement, factor)


def judge_trace(case: SoftmaxRow, factor: Fraction) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        built = rebuilt(case)
        if built.form == "logits":
            p, is_exact = exact_entries(built)
            trace = sum((pi * (1 - pi) for pi in p), start=flint.arb(0))
            collision = 1 - sum((pi * pi for pi in p), start=flint.arb(0))
        else:
            (trace, collision), is_exact = exact_vectors.trace_sides(built.raw), True
        return trace, exact.planted_exactly(collision, factor), is_exact

    return judge_sides(sides)


def measure_trace_entropy(case: SoftmaxRow, backend: Backend, factor: Fraction) -> Measurement:
    return _trace_sides(case, backend, sj.entropy)


def judge_trace_entropy(case: SoftmaxRow, factor: Fraction) -> Judgement:
    def sides() -> tuple[Any, Any, bool]:
        p, _ = exact_entries(rebuilt(case))
        balls = [flint.arb(x) for x in p]
        trace = sum((x * (1 - x) for x in balls), start=flint.arb(0))
        return trace, -sum((x * x.log() for x in balls if x > 0), start=flint.arb(0)), False

    return judge_sides(sides)


def interlacing_rank(row: exact_softmax.ExactRow) -> tuple[int, int, dict[str, Any]]:
    """Both ends of rank J(p̂) from the structure J = diag(p̂) − p̂p̂ᵀ of the exactly normalised row,
    never from a count of its support.

    Upper end: J is positive semidefinite, so a zero diagonal entry J_ii = p̂_i Σ_{j≠i} p̂_j zeroes row
    and column i; the n other rows carry the kernel vector 1 (J1 = p̂(1 − Σp̂) = 0 exactly, the row
    being normalised exactly), so rank J ≤ max(n − 1, 0).
    Lower end (interlacing, the secular equation): on those n rows J is a diagonal minus a rank-one
    term with every weight p̂_i > 0; a value c taken k times is an eigenvalue k − 1 times, and between
    consecutive distinct values lies one root of the secular equation, so J has at least
    Σ(k − 1) + (#distinct − 1) eigenvalues ≥ min p̂ > 0."""
    atoms = [int(c) for v, c in zip(row.values, row.counts, strict=True) if row.logits or v > 0]
    rows = sum(atoms) if len(atoms) > 1 or sum(atoms) > 1 else 0  # J_ii > 0: other mass exists
    hi = max(rows - 1, 0)
    lo = sum(k - 1 for k in atoms) + len(atoms) - 1 if rows else 0
    return lo, hi, {"nonzero_rows": rows, "distinct_values": len(atoms)}


def rank_enclosure(built: Built, backend: Backend) -> RankInterval:
    """rank J for the computed row p (read exactly, normalised exactly). Upper end from
    :func:`interlacing_rank`; lower end from dense eigenvalues above a Weyl threshold for V ≤ 512
    (an independent, rounding-model certificate: two-sided), else from :func:`interlacing_rank` (exact)."""
    row = exact_softmax.ExactRow.from_probabilities(to_numpy(built.rows.p)[0].astype(np.float64))
    lo, hi, certificate = interlacing_rank(row)
    upper = "zero rows of J and the kernel vector 1"
    if built.V > DENSE_LIMIT:
        return RankInterval(lo, hi, "interlacing (eigenvalues ≥ min p)", upper, True, certificate)
    xp = backend.xp
    eigenvalues = np.sort(to_numpy(xp.linalg.eigvalsh(sj.dense_jacobian(built.rows)))[0])
    threshold = tolerance.dense_eigenvalue_error(
        built.V, _u(built), max(float(eigenvalues[-1]), 0.0), _scalar(built.rows.top)
    )
    lo = int(np.sum(eigenvalues > threshold))
    lower = f"{built.V}x{built.V} eigvalsh above a Weyl threshold"
    return RankInterval(lo, hi, lower, upper, False, {**certificate, "weyl_threshold": threshold})


def exact_rank_enclosure(case: SoftmaxRow) -> RankInterval:
    """rank J(p̂) on the exact instance: over the rationals with python-flint for V ≤ 48 (rows of
    probabilities), else :func:`interlacing_rank` on the exact row (the softmax of logits is positive)."""
    built = rebuilt(case)
    if built.form == "probabilities" and built.V <= EXACT_RANK_LIMIT:
        p, _ = exact_entries(built)
        n = len(p)
        entries = [(pi if i == j else 0) - pi * pj for i, pi in enumerate(p) for j, pj in enumerate(p)]
        rank = flint.fmpq_mat(n, n, entries).rank()
        how = "exact-rational rank (python-flint)"
        return RankInterval(rank, rank, how, how, True)
    lo, hi, certificate = interlacing_rank(built.exact_row)
    return RankInterval(lo, hi, "interlacing on the exact row", "zero rows and the kernel vector 1", True, certificate)


def claimed_rank(built: Built, statement: str, exact_row: bool = False) -> int:
    """The right side: V for the mutant, else |supp p| − 1 of the computed row, or of the exact row
    (where every entry of the softmax of finite logits is positive)."""
    if statement == "V":
        return built.V
    if exact_row and built.form == "logits":
        return built.V - 1
    return int(_scalar(sj.support_size(built.rows))) - 1


def measure_rank(case: SoftmaxRow, backend: Backend, factor: Fraction, statement: str = "support") -> Measurement:
    """rank J of the computed row (:func:`rank_enclosure`) against |supp p| − 1 (or V)."""
    built = build(case, backend)
    return rank_enclosure(built, backend).sides(planted_side(claimed_rank(built, statement), factor), "equal")[0]


def judge_rank(case: SoftmaxRow, factor: Fraction, statement: str = "support") -> Judgement:
    """rank J(p̂) of the exact row (:func:`exact_rank_enclosure`) against |supp p̂| − 1 (or V)."""
    value = planted_side(claimed_rank(rebuilt(case), statement, exact_row=True), factor)
    return exact_rank_enclosure(case).sides(value, "equal")[1]


# --------------------------------------------------------------------------- registration


FAMILY = Family("softmax-jacobian", witnesses=witness_rows, random_instances=random_rows, strategy=any_row, bound=None)


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


variance_form = FAMILY.claim(
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
psd = FAMILY.claim(
    "psd",
    source="seed 002, 'The gradient is a variance'",
    title="J is symmetric positive semidefinite",
    statement="uᵀ J u ≥ 0 for every u, i.e. (E_p u)² ≤ E_p[u²] (J = diag(p) − ppᵀ is symmetric by construction)",
    domain="every probability vector p, every real u",
    relation=Relation.AT_MOST,
    bound="upper",
    measure=measure_psd,
    judge_exactly=judge_psd,
    **WITH_DIRECTIONS,
)
kernel = FAMILY.claim(
    "kernel",
    source="seed 002, 'How tight that is' (smallest eigenvalue); 'What to keep' 3",
    title="J annihilates the constant direction",
    statement="J·1 = 0 (the logit gradients of a softmax row sum to zero)",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_kernel,
    judge_exactly=judge_kernel,
)
trace = FAMILY.claim(
    "trace",
    source="seed 002, 'How tight that is' (trace line); 'What to keep' 3",
    title="The trace of J is a collision complement",
    statement="tr J = 1 − Σ p_i²",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_trace,
    judge_exactly=judge_trace,
)
rank = FAMILY.claim(
    "rank",
    source="rankwall (reconstructed; seed 002 shows only the zero eigenvalue)",
    title="The rank of J is the support size minus one",
    statement="rank J = |supp p| − 1",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_rank,
    judge_exactly=judge_rank,
)
lower_bound = FAMILY.claim(
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
upper_bound = FAMILY.claim(
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
envelope = FAMILY.claim(
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


def _attaining(V: int) -> list[RunnerUp | TiedAtoms]:
    rows: list[RunnerUp | TiedAtoms] = [RunnerUp(V, m, tail_mass=0.0) for m in (0.5, 0.75, 0.99, 1 - 1e-9)]
    return rows + [TiedAtoms(V, m) for m in (0.5, 0.3, 0.25) if V > 2 and m >= 1 / V]


envelope_attained = FAMILY.claim(
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
lower_bound_approached = FAMILY.claim(
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
    witnesses=lambda V: [SpreadTail(V, m) for m in (0.99, 0.75, 0.5) if V >= 3 and m >= 1 / V],
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
variance_form.with_mutant(
    "second-moment",
    statement="uᵀ J u = E_p[u²]  (false: the mean is not removed; J = diag(p) − ppᵀ)",
    measure=lambda i, b, f: measure_variance(i, b, f, centred=False),
    judge_exactly=lambda i, f: judge_variance(i, f, centred=False),
)
psd.with_mutant(
    "dominates-diag-p",
    statement="uᵀ J u ≥ E_p[u²], i.e. J ⪰ diag(p)  (false: J = diag(p) − ppᵀ ⪯ diag(p))",
    measure=lambda i, b, f: measure_psd(i, b, f, allowed=Fraction(0)),
    judge_exactly=lambda i, f: judge_psd(i, f, allowed=Fraction(0)),
)
kernel.with_mutant(
    "annihilates-p",
    statement="J·p = 0  (false: (Jp)_i = p_i(p_i − Σ_j p_j²), zero only for a row uniform on its support)",
    measure=lambda i, b, f: measure_kernel(i, b, f, direction="p"),
    judge_exactly=lambda i, f: judge_kernel(i, f, direction="p"),
)
envelope.with_mutant(
    "at-most-m(1-m)",
    statement="‖J‖₂ ≤ m(1 − m)  (false: the runner-up row has ‖J‖₂ = 2m(1 − m))",
    measure=_measure_norm_bound("lower", norm_on_left=True),
    judge_exactly=_judge_norm_bound("lower", norm_on_left=True),
)
envelope_attained.with_mutant(
    "always-2m(1-m)",
    statement="‖J‖₂ = 2m(1 − m) on both witnesses  (false: two atoms tied at m < 1/2 give ‖J‖₂ = m)",
    measure=_measure_norm_bound("upper", norm_on_left=True),
    judge_exactly=_judge_norm_bound("upper", norm_on_left=True),
)
lower_bound_approached.with_mutant(
    "attained",
    statement="‖J‖₂ ≤ m(1 − m) for the spread tail  (false: the infimum m(1 − m) is not attained for m < 1)",
    measure=_measure_norm_bound("lower", norm_on_left=True),
    judge_exactly=_judge_norm_bound("lower", norm_on_left=True),
)
rank.with_mutant(
    "equals-V",
    statement="rank J = V  (false: J·1 = 0 always)",
    measure=lambda i, b, f: measure_rank(i, b, f, "V"),
    judge_exactly=lambda i, f: judge_rank(i, f, "V"),
)
