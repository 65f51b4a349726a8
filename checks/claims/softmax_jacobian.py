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

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "Dirichlet",
    "Logits",
    "Row",
    "RunnerUp",
    "Sparse",
    "SpreadTail",
    "TiedAtoms",
    "Uniform",
    "collision_complement",
    "complement",
    "entropy",
    "envelope_witnesses",
    "kernel_residual",
    "mean",
    "norm",
    "quadratic_form",
    "rank",
    "rows",
    "rows_with_direction",
    "runner_ups",
    "second_moment",
    "spread_tails",
    "support",
    "tied_atoms",
    "top",
    "trace",
    "variance",
    "vocabulary",
]

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from typing import Any, ClassVar

import array_api_compat
import flint
import mpmath
import numpy as np
from hypothesis import strategies as st

from rankwall.checks import exact, exact_softmax, exact_vectors, tolerance, toolkit
from rankwall.checks.backends import Backend, to_numpy
from rankwall.checks.quantities import Combination, Compared, Constant, Context, Measured, Quantity, quantity
from rankwall.checks.statements import Kind, Statement
from rankwall.checks.toolkit import (
    Cases,
    Family,
    Reference,
    judge_sides,
    left_to_the_exact_route,
    numpy_float64,
    planted_exactly,
    planted_side,
    scalar,
)
from rankwall.checks.verdict import Case, Certification, Judgement, Measurement, OutsideDomain, RankInterval, Relation
from rankwall.theory import softmax_jacobian as sj
from rankwall.theory.validation import InputError

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

    def domain_violation(self, raw: np.ndarray) -> str | None:
        """Why the built row ``raw`` (read exactly) leaves the domain its constructor guarantees, or
        ``None``. The base guarantees nothing beyond a probability row."""
        return None


def _top_is_largest(raw: np.ndarray, what: str) -> str | None:
    """The guarantee "entry 0 is a largest entry", checked on the built values."""
    if raw[0] < raw[1:].max(initial=-np.inf):
        return f"{what} {float(raw[0])!r} is not the largest entry ({float(raw[1:].max())!r} is larger)"
    return None


@dataclass(frozen=True)
class RunnerUp(Row):
    """Top mass m, one runner-up, ``tail_mass`` spread over the rest (:func:`sj.construct_runner_up`)."""

    KIND: ClassVar[str] = "runner-up"
    m: float
    tail_mass: float = 0.0

    def domain_violation(self, raw: np.ndarray) -> str | None:
        return _top_is_largest(raw, "the top mass m")


@dataclass(frozen=True)
class TiedAtoms(Row):
    """Two atoms tied at m, the rest spread evenly (:func:`sj.construct_tied_atoms`)."""

    KIND: ClassVar[str] = "tied-atoms"
    m: float

    def domain_violation(self, raw: np.ndarray) -> str | None:
        if raw[0] != raw[1]:
            return f"the two atoms are no longer tied ({raw[0]!r} and {raw[1]!r})"
        return _top_is_largest(raw, "the tied mass m")


@dataclass(frozen=True)
class SpreadTail(Row):
    """Top mass m, 1 − m spread evenly over V − 1 atoms (:func:`sj.construct_spread_tail`)."""

    KIND: ClassVar[str] = "spread-tail"
    m: float

    def domain_violation(self, raw: np.ndarray) -> str | None:
        return _top_is_largest(raw, "the top mass m")


@dataclass(frozen=True)
class Uniform(Row):
    """The uniform row 1/V (:func:`sj.construct_uniform`)."""

    KIND: ClassVar[str] = "uniform"


@dataclass(frozen=True)
class Dirichlet(Row):
    """A Dirichlet draw of the given concentration (:func:`sj.construct_dirichlet`)."""

    KIND: ClassVar[str] = "dirichlet"
    concentration: float
    seed: int


@dataclass(frozen=True)
class Sparse(Row):
    """Random masses on ``support`` random atoms, zeros elsewhere (:func:`sj.construct_sparse`)."""

    KIND: ClassVar[str] = "sparse"
    support: int
    seed: int


@dataclass(frozen=True)
class Logits(Row):
    """Logits with a top gap over ``runners`` runner-ups (:func:`sj.construct_logits`)."""

    KIND: ClassVar[str] = "logits"
    gap: float
    offset: float = 0.0
    runners: int = 1
    tail_gap: float | None = None

    def domain_violation(self, raw: np.ndarray) -> str | None:
        return _top_is_largest(raw, "the top logit")


#: Every case of this family.
SoftmaxRow = RunnerUp | TiedAtoms | SpreadTail | Uniform | Dirichlet | Sparse | Logits

# --------------------------------------------------------------------------- strategies

BIG_VOCABULARIES = (1024, 8192, 32768, 131072)


#: The smallest vocabularies, drawn apart so that they come often.
SMALLEST_VOCABULARIES = (2, 3)


def vocabularies(low: int = 2) -> st.SearchStrategy[int]:
    """V from ``low`` to 131,072, mostly small (fast to escalate), sometimes huge; the smallest sizes
    (V = 2, 3) drawn apart, a quarter of the time."""
    return st.one_of(
        st.sampled_from([v for v in SMALLEST_VOCABULARIES if v >= low] or [low]),
        st.integers(low, 16),
        st.integers(low, 600),
        st.sampled_from([v for v in BIG_VOCABULARIES if v >= low]),
    )


def top_masses(low: float, high: float) -> st.SearchStrategy[float]:
    """m in [low, high], with both ends (a quarter of the time each), 1/2 and values a few ulps from 1
    drawn often."""
    specials = [x for x in (0.5, 0.9, 0.99, 1 - 1e-6, 1 - 1e-12, 1 - 2**-52, 1.0) if low <= x <= high]
    return st.one_of(
        st.floats(low, high, allow_nan=False),
        st.sampled_from(specials or [high]),
        st.just(low),
        st.just(high),
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
    support = draw(st.one_of(st.just(1), st.integers(1, V)))
    return Sparse(V, support, draw(st.integers(0, 2**16)))


@st.composite
def logit_instances(draw: Any) -> Logits:
    V = draw(vocabularies())
    # a gap past 708 puts the runner-ups below the normal range: two branches of five
    below_normal = st.one_of(st.floats(709, 800), st.sampled_from([745.0, 800.0]))
    gap = draw(
        st.one_of(st.floats(0, 50), st.floats(50, 800), below_normal, st.sampled_from([0.0, 700.0]), below_normal)
    )
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
class Built(toolkit.Built):
    """A row in a backend: its rows, the raw float row (for the exact route), a direction."""

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
    """Build a case's row (and direction) in a backend; a row whose built values leave the domain its
    constructor guarantees (its top atom not the largest after rounding, a tie broken) is refused
    (:class:`~rankwall.checks.verdict.OutsideDomain`): it is no instance of the family's statements."""
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
    raw = to_numpy(row)[0].astype(np.float64)
    violation = case.domain_violation(raw)
    if violation is not None:
        raise OutsideDomain(f"{case.KIND} (V = {case.V}) in {backend.dtype_name}: {violation}")
    return Built(backend, rows, raw, form, direction, int(case.V))


def rebuilt(case: SoftmaxRow) -> Built:
    """The case rebuilt in float64 NumPy (what the exact routes read)."""
    return build(case, numpy_float64())


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
    estimate = scalar(sj.spectral_norm(rebuilt_rows(built)))
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
    # the edges at this V: one-hot rows (at the first atom, and at a random one), a tail below the normal range
    rows += [RunnerUp(V, 1.0), Sparse(V, 1, 1), Logits(V, 745.0, offset=0.0, runners=V - 1)]
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


def _measure_norm_bound(kind: str, norm_on_left: bool) -> Callable[[SoftmaxRow, Backend, Fraction], Measurement]:
    def measure(case: SoftmaxRow, backend: Backend, factor: Fraction) -> Measurement:
        built = build(case, backend)
        norm = scalar(sj.spectral_norm(built.rows))
        m, s = scalar(built.rows.top), scalar(built.rows.complement)
        if subnormal(built, s, norm):
            return left_to_the_exact_route(f"{backend.dtype_name} secular solve", "a side below the normal range")
        bound = {"lower": m * s, "upper": 2 * m * s, "envelope": min(m, 2 * m * s)}[kind] * float(factor)
        tol = tolerance.spectral_norm_tolerance(built.V, built.u, max(norm, bound))
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
    norm = scalar(sj.spectral_norm(built.rows))
    m, s = scalar(built.rows.top), scalar(built.rows.complement)
    if subnormal(built, s, norm):
        return left_to_the_exact_route(f"{backend.dtype_name} secular solve", "a side below the normal range")
    atoms = built.V - 1
    ceiling = m * s * atoms / (atoms - 1) * float(factor)
    tol = tolerance.spectral_norm_tolerance(built.V, built.u, max(norm, ceiling))
    return Measurement(norm, ceiling, tol, f"{backend.dtype_name} secular solve")


def judge_spread(case: SpreadTail, factor: Fraction) -> Judgement:
    atoms = case.V - 1
    bound = exact_softmax.Bound("ms", Fraction(atoms, atoms - 1) * factor)
    return _norm_against(rebuilt(case), bound, norm_on_left=True)


def measure_variance(case: SoftmaxRow, backend: Backend, factor: Fraction, centred: bool = True) -> Measurement:
    """uᵀJu (matrix form) against Var_p(u) (two-pass), or against E_p[u²] for the mutant."""
    built = build(case, backend)
    lhs = scalar(sj.quadratic_form(built.rows, built.direction))
    second = scalar(backend.xp.sum(built.rows.p * built.direction**2))
    rhs = planted_side(scalar(sj.variance(built.rows, built.direction)) if centred else second, factor)
    tol = tolerance.quadratic_form_tolerance(built.V, built.u, second)
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
        return form, planted_exactly(variance if centred else second, factor), is_exact

    return judge_sides(sides)


def measure_psd(case: SoftmaxRow, backend: Backend, factor: Fraction, allowed: Fraction = Fraction(1)) -> Measurement:
    """(E_p u)² ≤ F·c·E_p[u²] as (1 − F·c)·E_p[u²] ≤ uᵀJu (matrix form): c = 1 is uᵀJu ≥ 0, c = 0 the
    mutant J ⪰ diag(p)."""
    built = build(case, backend)
    form = scalar(sj.quadratic_form(built.rows, built.direction))
    second = scalar(backend.xp.sum(built.rows.p * built.direction**2))
    tol = tolerance.quadratic_form_tolerance(built.V, built.u, second)
    return Measurement(float(1 - factor * allowed) * second, form, tol, f"{backend.dtype_name} matrix form")


def _vector_moments(case: SoftmaxRow) -> tuple[Any, Any, Any, bool]:
    """:func:`_exact_moments` of the exact row and direction: vectorised exact rationals
    (:func:`exact_vectors.quadratic_moments`) for probabilities, balls grouped by distinct logit
    (:func:`exact_vectors.logit_quadratic_moments`) for logits."""
    built = rebuilt(case)
    if built.form == "logits":
        return (*exact_vectors.logit_quadratic_moments(built.raw, to_numpy(built.direction)[0]), False)
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
    residual = scalar(xp.max(xp.abs(product)))
    tol = tolerance.gamma(built.V + 2, built.u) * scalar(built.rows.top)
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
        return worst_entry, planted_exactly(0 * worst_entry, factor), is_exact

    return judge_sides(sides)


def _trace_sides(
    case: SoftmaxRow, backend: Backend, other: Callable[[Any], Any], factor: Fraction = Fraction(1)
) -> Measurement:
    """tr J (eigenvalues summed, or the diagonal) against ``other`` of the row, moved by ``factor``."""
    built = build(case, backend)
    xp = backend.xp
    u = built.u
    if built.V <= DENSE_LIMIT:
        eigenvalues = support_eigenvalues(built.rows)
        lhs = scalar(xp.sum(eigenvalues))
        norm = max(scalar(xp.max(eigenvalues)), 0.0)
        tol = built.V * tolerance.dense_eigenvalue_error(built.V, u, norm, scalar(built.rows.top))
        method = f"{backend.dtype_name} sum of eigvalsh(J on the support)"
    else:
        lhs = scalar(sj.trace(built.rows))
        tol = 0.0
        method = f"{backend.dtype_name} diagonal sum"
    rhs = planted_side(scalar(other(built.rows)), factor)
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
        return trace, planted_exactly(collision, factor), is_exact

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


def rank_closeness(p: np.ndarray) -> float:
    """How near a row comes to losing a rank (for the search's target()): the positive eigenvalues of J
    interlace the support's entries, so the smallest is at least min_{p_i > 0} p_i; minus that over m
    (0 is the edge, where an entry underflows)."""
    positive = p[p > 0]
    return -float(positive.min() / positive.max()) if len(positive) else 0.0


def support_block(rows: sj.SoftmaxRows) -> Any:
    """J_S, the block of J = diag(p) − ppᵀ on the support S = {i : p_i > 0} of one row p (the same
    entries, in the row's namespace and dtype). J's rows and columns off S are zero."""
    xp, p = rows.xp, rows.p[0, :]
    q = xp.take(p, xp.nonzero(p > 0)[0])
    eye = xp.eye(q.shape[0], dtype=q.dtype, device=array_api_compat.device(q))
    return q[:, None] * eye - q[:, None] * q[None, :]


def support_eigenvalues(rows: sj.SoftmaxRows) -> Any:
    """The |S| eigenvalues of J_S (:func:`support_block`): J's spectrum is theirs with V − |S| zeros
    added. Only the block goes to the dense eigensolver, since a sparse row's many repeated zeros can
    stop LAPACK's from converging (torch's float32 eigh on an Intel Xeon); the tolerances keep V,
    which bounds |S|."""
    return rows.xp.linalg.eigvalsh(support_block(rows))


def rank_enclosure(built: Built, backend: Backend) -> RankInterval:
    """rank J for the computed row p (read exactly, normalised exactly). Upper end from
    :func:`interlacing_rank`; lower end from dense eigenvalues above a Weyl threshold for V ≤ 512
    (an independent, rounding-model certificate: two-sided), else from :func:`interlacing_rank` (exact)."""
    computed = to_numpy(built.rows.p)[0].astype(np.float64)
    row = exact_softmax.ExactRow.from_probabilities(computed)
    lo, hi, certificate = interlacing_rank(row)
    certificate = {**certificate, "closeness": rank_closeness(computed)}
    upper = "zero rows of J and the kernel vector 1"
    if built.V > DENSE_LIMIT:
        return RankInterval(lo, hi, "interlacing (eigenvalues ≥ min p)", upper, True, certificate)
    eigenvalues = np.sort(to_numpy(support_eigenvalues(built.rows)))
    threshold = tolerance.dense_eigenvalue_error(
        built.V, built.u, max(float(eigenvalues[-1]), 0.0), scalar(built.rows.top)
    )
    lo = int(np.sum(eigenvalues > threshold))
    lower = f"{len(eigenvalues)}x{len(eigenvalues)} eigvalsh of J on the support above a Weyl threshold"
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
    return int(scalar(sj.support_size(built.rows))) - 1


def measure_rank(case: SoftmaxRow, backend: Backend, factor: Fraction, statement: str = "support") -> Measurement:
    """rank J of the computed row (:func:`rank_enclosure`) against |supp p| − 1 (or V)."""
    built = build(case, backend)
    return rank_enclosure(built, backend).sides(planted_side(claimed_rank(built, statement), factor), "equal")[0]


def judge_rank(case: SoftmaxRow, factor: Fraction, statement: str = "support") -> Judgement:
    """rank J(p̂) of the exact row (:func:`exact_rank_enclosure`) against |supp p̂| − 1 (or V)."""
    value = planted_side(claimed_rank(rebuilt(case), statement, exact_row=True), factor)
    return exact_rank_enclosure(case).sides(value, "equal")[1]


# --------------------------------------------------------------------------- quantities (the public API)
#
# Each quantity of a row is measured in the backend with a bound on its distance from the same
# quantity of the exact instance (the built row read exactly and normalised exactly, or the softmax of
# the built logits), and evaluated exactly on the float64 instance, in rationals or balls. A user states
# a claim with them (``rankwall.declare``): ``norm <= 2 * top * complement``.


def built_in(ctx: Context) -> Built:
    """The case built once per context (both sides of a claim share it)."""
    return ctx.once("built", lambda: build(ctx.case, ctx.backend))


def exact_row_of(ctx: Context) -> exact_softmax.ExactRow:
    return ctx.once("exact row", lambda: rebuilt(ctx.case).exact_row)


def exact_probabilities(ctx: Context) -> tuple[list[Any], bool]:
    """The exact row p̂ (rationals, or balls at the working precision) and whether it is rational."""
    return ctx.once(("exact p", flint.ctx.prec), lambda: exact_entries(rebuilt(ctx.case)))


def exact_direction(ctx: Context) -> list[Any]:
    """The test direction u of the float64 instance, exactly (rationals, or balls beside a ball row)."""
    built = rebuilt(ctx.case)
    if built.direction is None:
        raise InputError(f"{ctx.case.KIND}: this quantity needs a test direction u (use rows_with_direction)")
    _, is_exact = exact_probabilities(ctx)
    return [exact.rational(x) if is_exact else exact.ball(x) for x in to_numpy(built.direction)[0]]


def entry_error(built: Built) -> float:
    """Relative error of each computed p_i against p̂_i: a division by a sum of V terms (and, from logits,
    an exponential): gamma_{V+4}."""
    return tolerance.gamma(built.V + 4, built.u)


def _relative(value: float, relative_error: float, built: Built, *, tiny_is_exact: bool = False) -> Measured:
    """``value`` within ``relative_error`` of itself, unless it fell below the dtype's normal range (the
    relative model no longer holds there: the exact route decides)."""
    if subnormal(built, value) and not tiny_is_exact:
        return Measured(value, math.inf)
    return Measured(value, relative_error * abs(value))


def _second_moment_of(built: Built) -> float:
    return scalar(built.backend.xp.sum(built.rows.p * built.direction**2))


def _exact_sum(ctx: Context, term: Callable[[Any, Any], Any]) -> Any:
    p, is_exact = exact_probabilities(ctx)
    zero = flint.fmpq(0) if is_exact else flint.arb(0)
    return sum((term(pi, ui) for pi, ui in zip(p, exact_direction(ctx), strict=True)), start=zero)


def _exact_mean(ctx: Context) -> Any:
    return _exact_sum(ctx, lambda pi, ui: pi * ui)


def _exact_norm(ctx: Context) -> Any:
    """‖J(p̂)‖₂ exactly where the structure gives it (one-hot 0, a tied top m, two atoms 2m(1 − m)),
    else a ball from the certified enclosure of the secular equation's largest root."""
    row = exact_row_of(ctx)
    positive = [(v, c) for v, c in zip(row.values[::-1], row.counts[::-1], strict=True) if row.logits or v > 0]
    m, s, _, _ = row.parts(row.use_exact())
    if len(positive) == 1 and positive[0][1] == 1:
        return 0 * m
    if positive[0][1] >= 2:
        return m
    if len(positive) == 2 and positive[1][1] == 1:
        return 2 * m * s
    estimate = scalar(sj.spectral_norm(rebuilt_rows(rebuilt(ctx.case))))
    lo, hi, _ = exact_softmax.certified_norm(row, estimate)
    return flint.arb(exact.rational(lo)).union(flint.arb(exact.rational(hi)))


def norm_bound_of(expression: Quantity) -> exact_softmax.Bound | None:
    """The structure of a bound t on ‖J‖₂ written with this family's quantities, where it has one:
    c·m·(1 − m) (``"ms"``), c·min(m, 2m(1 − m)) (``"envelope"``) or a constant c. Known structure lets
    the exact comparison use the tie and two-atom lemmas, which decide equalities no ball can."""
    constant, factors = _product_of(expression)
    if constant is None:
        return None
    if not factors:
        return exact_softmax.Bound("constant", constant)
    if sorted(map(id, factors)) == sorted((id(top), id(complement))):
        return exact_softmax.Bound("ms", constant)
    if len(factors) == 1 and isinstance(factors[0], Combination) and factors[0].op == "min":
        a, b = factors[0].operands
        inner = [norm_bound_of(x) for x in (a, b)]
        if {(x.kind, x.coefficient) for x in inner if x is not None} == {("ms", Fraction(2))} and any(
            x is top for x in (a, b)
        ):
            return exact_softmax.Bound("envelope", constant)
    return None


def _product_of(expression: Quantity) -> tuple[Fraction | None, list[Quantity]]:
    """``(c, factors)`` with expression = c · Π factors, for a product of constants and quantities."""
    if isinstance(expression, Constant):
        return expression.value, []
    if isinstance(expression, Combination) and expression.op == "*":
        (c1, f1), (c2, f2) = (_product_of(x) for x in expression.operands)
        return (None, []) if c1 is None or c2 is None else (c1 * c2, f1 + f2)
    return Fraction(1), [expression]


def _compare_norm(ctx: Context, t: Any, expression: Quantity) -> Compared | None:
    """sign(‖J(p̂)‖₂ − t), from the sign of the secular function at t: against a bound of known structure
    (:func:`norm_bound_of`) through :func:`rankwall.checks.exact_softmax.decide_norm_at_most` and its
    lemmas, else against a rational t."""
    bound = norm_bound_of(expression)
    if bound is None and isinstance(t, flint.fmpq):
        bound = exact_softmax.Bound("constant", Fraction(int(t.p), int(t.q)))
    if bound is None:
        return None
    outcome, method = exact_softmax.decide_norm_at_most(exact_row_of(ctx), bound)
    if outcome is None:
        return None
    return Compared(-outcome, method, norm_certification(method, bound) is Certification.EXACT)


def _measure_norm(ctx: Context) -> Measured:
    built = built_in(ctx)
    norm = scalar(sj.spectral_norm(built.rows))
    if subnormal(built, norm, scalar(built.rows.complement)):
        return Measured(norm, math.inf)
    return Measured(norm, tolerance.spectral_norm_tolerance(built.V, built.u, norm))


def _support_interval(built: Built) -> RankInterval:
    """|supp p̂|: the positive entries of the built row (every entry of a softmax of finite logits is
    positive, whatever underflowed in floating point)."""
    n = built.V if built.form == "logits" else int(np.count_nonzero(built.raw > 0))
    return RankInterval(n, n, "the positive entries", "the positive entries", exact=True)


def _top(ctx: Context) -> Measured:
    built = built_in(ctx)
    return _relative(scalar(built.rows.top), entry_error(built), built)


def _exact_parts(ctx: Context) -> tuple[Any, Any, list[Any], list[int]]:
    """(m, s, tail values, tail counts) of p̂, rational where the row is (:meth:`ExactRow.parts`)."""
    row = exact_row_of(ctx)
    return ctx.once(("parts", flint.ctx.prec), lambda: row.parts(row.use_exact()))


def _complement(ctx: Context) -> Measured:
    built = built_in(ctx)
    return _relative(scalar(built.rows.complement), tolerance.gamma(2 * built.V + 4, built.u), built)


def _trace(ctx: Context) -> Measured:
    built = built_in(ctx)
    value = scalar(sj.trace(built.rows))
    return _relative(value, tolerance.gamma(3 * built.V + 16, built.u), built, tiny_is_exact=True)


def _exact_trace(ctx: Context) -> Any:
    p, _ = exact_probabilities(ctx)
    return sum((pi * (1 - pi) for pi in p), start=0 * p[0])


def _collision_complement(ctx: Context) -> Measured:
    """1 − Σ p² ≥ s (see :func:`rankwall.theory.softmax_jacobian.collision_complement`), so the errors of
    s(1 + m) and of Σ_{i≠k} p_i², each at most gamma·s, stay within 3·gamma of the result."""
    built = built_in(ctx)
    value = scalar(sj.collision_complement(built.rows))
    return _relative(value, 3 * tolerance.gamma(3 * built.V + 16, built.u), built, tiny_is_exact=True)


def _exact_collision_complement(ctx: Context) -> Any:
    p, _ = exact_probabilities(ctx)
    return 1 - sum((pi * pi for pi in p), start=0 * p[0])


def _entropy(ctx: Context) -> Measured:
    """H(p): each p_i off by gamma_{V+4} moves p_i log p_i by at most that times p_i(|log p_i| + 1), and
    the logarithms, products and the sum add gamma_{V+4} of H: within gamma_{3V+16}(2H + 1)."""
    built = built_in(ctx)
    value = scalar(sj.entropy(built.rows))
    return Measured(value, tolerance.gamma(3 * built.V + 16, built.u) * (2 * value + 1))


def _exact_entropy(ctx: Context) -> Any:
    p, _ = exact_probabilities(ctx)
    return -sum((flint.arb(pi) * flint.arb(pi).log() for pi in p if pi > 0), start=flint.arb(0))


def _kernel_residual(ctx: Context) -> Measured:
    """max_i |(J·1)_i| of the O(V) product: its exact value is 0, and each entry p_i(1 − Σ_j p_j) of the
    computed row carries at most gamma_{V+4}·m of rounding."""
    built = built_in(ctx)
    xp = built.backend.xp
    value = scalar(xp.max(xp.abs(sj.jvp(built.rows, xp.ones_like(built.rows.p)))))
    return Measured(value, tolerance.gamma(built.V + 4, built.u) * scalar(built.rows.top))


def _exact_kernel_residual(ctx: Context) -> Any:
    p, _ = exact_probabilities(ctx)
    ones = [1 + 0 * pi for pi in p]
    return max((abs(x) for x in exact_jvp(p, ones, 0 * p[0])), key=exact.to_float)


def _with_direction(ctx: Context) -> Built:
    built = built_in(ctx)
    if built.direction is None:
        raise InputError(f"{ctx.case.KIND}: this quantity needs a test direction u (use rows_with_direction)")
    return built


def _mean(ctx: Context) -> Measured:
    """E_p u: the entries of p (gamma_{V+4} each) and the sum (gamma_V) give gamma_{2V+6}·E_p|u|."""
    built = _with_direction(ctx)
    xp, p, u = built.backend.xp, built.rows.p, built.direction
    value = scalar(xp.sum(p * u))
    return Measured(value, tolerance.gamma(2 * built.V + 6, built.u) * scalar(xp.sum(p * xp.abs(u))))


def _second_moment(ctx: Context) -> Measured:
    built = _with_direction(ctx)
    value = _second_moment_of(built)
    return Measured(value, tolerance.gamma(2 * built.V + 8, built.u) * value)


def _form(ctx: Context, computed: Callable[[Built], Any], own: float) -> Measured:
    """A quadratic form in u computed two ways: its rounding (gamma_{V+5} of 2E_p[u²], as in
    :func:`rankwall.checks.tolerance.quadratic_form_tolerance`) and the error of the entries of p
    (at most 3·gamma_{V+4}·E_p[u²]) stay within 6·gamma_{V+5}·E_p[u²], plus ``own`` of the value."""
    built = _with_direction(ctx)
    value = scalar(computed(built))
    error = 6 * tolerance.gamma(built.V + 5, built.u) * _second_moment_of(built)
    return Measured(value, error + own * abs(value))


def _quadratic_form(ctx: Context) -> Measured:
    return _form(ctx, lambda b: sj.quadratic_form(b.rows, b.direction), 0.0)


def _variance(ctx: Context) -> Measured:
    built = _with_direction(ctx)
    return _form(ctx, lambda b: sj.variance(b.rows, b.direction), tolerance.gamma(built.V + 6, built.u))


def _exact_second_moment(ctx: Context) -> Any:
    return _exact_sum(ctx, lambda pi, ui: pi * ui * ui)


def _exact_variance(ctx: Context) -> Any:
    mu = _exact_mean(ctx)
    return _exact_sum(ctx, lambda pi, ui: pi * (ui - mu) ** 2)


def _vocabulary(ctx: Context) -> RankInterval:
    return RankInterval(ctx.case.V, ctx.case.V, "the case", "the case", exact=True)


norm = quantity("‖J‖₂", _measure_norm, _exact_norm, compare=_compare_norm, doc="the spectral norm of J = diag(p) − ppᵀ")
top = quantity("m", _top, lambda ctx: _exact_parts(ctx)[0], doc="m = max_i p_i")
complement = quantity(
    "(1 − m)", _complement, lambda ctx: _exact_parts(ctx)[1], doc="1 − m, as the sum of the other entries"
)
trace = quantity("tr J", _trace, _exact_trace, doc="tr J = Σ_i p_i(1 − p_i), from the diagonal")
collision_complement = quantity("(1 − Σ p_i²)", _collision_complement, _exact_collision_complement, doc="1 − Σ p_i²")
entropy = quantity("H(p)", _entropy, _exact_entropy, doc="the Shannon entropy −Σ p_i log p_i, in nats")
kernel_residual = quantity(
    "max_i |(J·1)_i|", _kernel_residual, _exact_kernel_residual, doc="the largest entry of the product J·1"
)
mean = quantity("E_p u", _mean, _exact_mean, doc="the mean of the test direction u under p")
second_moment = quantity("E_p[u²]", _second_moment, _exact_second_moment, doc="E_p[u²] of the test direction u")
quadratic_form = quantity(
    "uᵀJu", _quadratic_form, lambda ctx: _exact_second_moment(ctx) - _exact_mean(ctx) ** 2, doc="uᵀJu, matrix form"
)
variance = quantity("Var_p(u)", _variance, _exact_variance, doc="Var_p(u), two-pass")
support = quantity(
    "|supp p|",
    lambda ctx: _support_interval(built_in(ctx)),
    lambda ctx: _support_interval(rebuilt(ctx.case)),
    integer=True,
    doc="the number of positive entries",
)
vocabulary = quantity("V", _vocabulary, _vocabulary, integer=True, doc="the vocabulary size V")
rank = quantity(
    "rank J",
    lambda ctx: rank_enclosure(built_in(ctx), ctx.backend),
    lambda ctx: exact_rank_enclosure(ctx.case),
    integer=True,
    doc="rank J, enclosed from J itself (eigenvalues above a Weyl threshold, interlacing)",
)

# --------------------------------------------------------------------------- boundary classes (issue 18)
#
# Each a predicate on a case's parameters (no row is built): the edges of the statements, which the
# strategies above draw with real probability (tests/test_boundaries.py measures the shares).


def one_hot(case: SoftmaxRow) -> bool:
    """A single atom carries all the mass: ‖J‖₂ = tr J = rank J = 0."""
    if isinstance(case, RunnerUp | SpreadTail):
        return case.m == 1.0
    return isinstance(case, Sparse) and case.support == 1


def has_zeros(case: SoftmaxRow) -> bool:
    """Some probability is exactly zero (rank J counts the support, not V)."""
    if isinstance(case, RunnerUp):
        return case.m == 1.0 or (case.tail_mass == 0.0 and case.V >= 3)
    if isinstance(case, TiedAtoms):
        return case.m == 0.5 and case.V >= 3
    if isinstance(case, SpreadTail):
        return case.m == 1.0
    return isinstance(case, Sparse) and case.support < case.V


def tied_top(case: SoftmaxRow) -> bool:
    """Two or more atoms share the top mass (‖J‖₂ = m exactly: the tie lemma)."""
    if isinstance(case, RunnerUp):
        return case.m == 0.5 and case.tail_mass == 0.0
    if isinstance(case, Logits):
        return case.gap == 0.0
    return isinstance(case, TiedAtoms | Uniform)


def smallest_top(case: SoftmaxRow) -> bool:
    """m = 1/V, the least top mass: the row is uniform (its top atom the largest only just)."""
    if isinstance(case, SpreadTail | TiedAtoms):
        return case.m == 1.0 / case.V
    return isinstance(case, Uniform)


def tail_below_normal(case: SoftmaxRow) -> bool:
    """Logits whose runner-ups sit past e^{-708}: the complement 1 − m falls below the normal range."""
    return isinstance(case, Logits) and case.gap > 708.0


def large_offset(case: SoftmaxRow) -> bool:
    """A test direction with a large common offset, |c| >= 10^4 (u and u + c1 have the same uᵀJu: cancellation)."""
    return abs(case.direction_offset or 0.0) >= 1e4


ROW_BOUNDARY = {
    "V = 2 or 3": lambda c: c.V <= 3,
    "V >= 1024": lambda c: c.V >= 1024,
    "a tied top": tied_top,
    "zero probabilities": has_zeros,
    "one-hot": one_hot,
    "m = 1/V": smallest_top,
    "a tail below the normal range": tail_below_normal,
}
ENVELOPE_BOUNDARY = {
    "V = 2 or 3": lambda c: c.V <= 3,
    "V >= 1024": lambda c: c.V >= 1024,
    "m = 1/2 (the envelope's corner)": lambda c: c.m == 0.5,
    "one-hot": one_hot,
    "m = 1/V": smallest_top,
}

#: Where the claims of this family range: every row; every row with a test direction u; the witnesses
#: of the envelope; spread tails (V >= 3).
rows = Cases(any_row, witness_rows, random_rows, ROW_BOUNDARY)
rows_with_direction = Cases(
    lambda: with_direction(any_row()),
    lambda V: _add_direction(witness_rows(V)),
    lambda V, n, seed: _add_direction(random_rows(V, n, seed), seed),
    {**ROW_BOUNDARY, "a direction offset by >= 10^4": large_offset},
)
runner_ups = Cases(
    lambda: runner_up_instances(exact_witness=True),
    lambda V: [RunnerUp(V, m) for m in (0.5, 0.75, 0.99, 1 - 1e-9, 1.0)],
    boundary={
        k: ENVELOPE_BOUNDARY[k] for k in ("V = 2 or 3", "V >= 1024", "m = 1/2 (the envelope's corner)", "one-hot")
    },
)
tied_atoms = Cases(
    tied_instances,
    lambda V: [TiedAtoms(V, m) for m in (0.5, 0.3, 0.25) if V > 2 and m >= 1 / V],
    boundary={
        k: ENVELOPE_BOUNDARY[k] for k in ("V = 2 or 3", "V >= 1024", "m = 1/2 (the envelope's corner)", "m = 1/V")
    },
)
envelope_witnesses = Cases(
    lambda: st.one_of(runner_ups.strategy(), tied_atoms.strategy()),
    lambda V: runner_ups.witnesses(V) + tied_atoms.witnesses(V),
    boundary=ENVELOPE_BOUNDARY,
)
spread_tails = Cases(
    lambda: spread_instances(low_vocabulary=3),
    lambda V: [SpreadTail(V, m) for m in (0.99, 0.75, 0.5, 1.0) if V >= 3 and m >= 1 / V],
    boundary={
        "V = 3": lambda c: c.V == 3,
        "V >= 1024": lambda c: c.V >= 1024,
        "one-hot": one_hot,
        "m = 1/V": smallest_top,
    },
)


# --------------------------------------------------------------------------- references (issue 18)
#
# Both sides of every claim the slow, obviously right way, sharing nothing with the measures but the
# instance: the row as the backend built it, read exactly; p̂ as Python Fractions (or, from logits, its
# softmax in 200-bit mpmath); the dense V x V matrix J = diag(p̂) − p̂p̂ᵀ; its eigenvalues from mpmath's
# symmetric eigensolver at 200 bits; its rank exactly over the rationals (python-flint's fmpq_mat) or,
# from logits, as the eigenvalues above 2^-100. Small V only (the tests run them at V <= 64).


@dataclass(frozen=True)
class DenseRow:
    """The exact row, its dense J, and the test direction (if any), for the references."""

    p: list[Any]
    J: Any
    u: list[Any] | None
    exact: bool
    others: list[Any]


def dense_row(case: SoftmaxRow, backend: Backend, computed: bool = False) -> DenseRow:
    """The case as ``backend`` built it, p̂ exactly (Fractions) or in 200-bit mpmath (from logits);
    with ``computed``, the computed probability row itself read exactly (the instance ``rank``'s float
    route measures, zeros from underflow included)."""
    built = build(case, backend)
    if computed:
        built = replace(built, raw=to_numpy(built.rows.p)[0].astype(np.float64), form="probabilities")
    if built.form == "logits":
        z = [mpmath.mpf(float(x)) for x in built.raw]
        top = max(z)
        weights = [mpmath.exp(x - top) for x in z]
        total = mpmath.fsum(weights)
        p: list[Any] = [w / total for w in weights]
        exact_row = False
    else:
        values = [Fraction(float(x)) for x in built.raw]
        total_q = sum(values, Fraction(0))
        p = [x / total_q for x in values]
        exact_row = True
    n = len(p)
    # J_ii = p_i (1 − p_i) as p_i Σ_{j≠i} p_j: 1 − p_i cancels for a near-one-hot row from logits.
    others = [sum((p[j] for j in range(n) if j != i), 0 * p[0]) for i in range(n)]
    J = [[p[i] * others[i] if i == j else -p[i] * p[j] for j in range(n)] for i in range(n)]
    u = None
    if built.direction is not None:
        u = [Fraction(float(x)) if exact_row else mpmath.mpf(float(x)) for x in to_numpy(built.direction)[0]]
    return DenseRow(p, J, u, exact_row, others)


def _mp(x: Any) -> Any:
    return mpmath.mpf(x.numerator) / x.denominator if isinstance(x, Fraction) else mpmath.mpf(x)


def _arb(x: Any) -> flint.arb:
    """A Fraction or an mpf as an arb ball, exactly (an mpf is man·2^exp)."""
    if isinstance(x, Fraction):
        return flint.arb(exact.fmpq_of(x))
    man, exp = x.man_exp
    return flint.arb(int(man)) * flint.arb(2) ** int(exp)


@functools.lru_cache(maxsize=512)
def _dense_eigenvalues(p: tuple[Any, ...], prec: int) -> tuple[Any, ...]:
    """The eigenvalues of the dense J = diag(p) − ppᵀ (entries as :func:`dense_row` forms them), to
    ``prec`` bits: Arb's eigensolver (clusters allowed), mpmath's Jacobi ``eigsy`` where Arb cannot
    isolate them. Cached on p: the claims of the family and the float64 backends share rows."""
    n = len(p)
    others = [sum((p[j] for j in range(n) if j != i), 0 * p[0]) for i in range(n)]
    J = [[p[i] * others[i] if i == j else -p[i] * p[j] for j in range(n)] for i in range(n)]
    try:
        with exact.precision(prec):
            matrix = flint.acb_mat([[flint.acb(_arb(x)) for x in r] for r in J])
            midpoints = [e.real.mid().man_exp() for e in matrix.eig(multiple=True)]
        with mpmath.workprec(prec):
            return tuple(mpmath.mpf((int(m), int(e))) for m, e in midpoints)
    except ValueError:  # Arb failed to isolate a near-cluster
        with mpmath.workprec(prec):
            return tuple(mpmath.eigsy(mpmath.matrix([[_mp(x) for x in r] for r in J]), eigvals_only=True))


def dense_norm(row: DenseRow) -> Any:
    """‖J‖₂ = λ_max(J), from a dense eigensolver on J at the working precision."""
    return max(_dense_eigenvalues(tuple(row.p), mpmath.mp.prec))


def dense_rank(row: DenseRow) -> int:
    """rank J: exactly over the rationals, or (from logits) the eigenvalues above 2^-100."""
    if row.exact:
        n = len(row.p)
        entries = [flint.fmpq(x.numerator, x.denominator) for r in row.J for x in r]
        return int(flint.fmpq_mat(n, n, entries).rank())
    eigenvalues = _dense_eigenvalues(tuple(row.p), mpmath.mp.prec)
    return sum(1 for e in eigenvalues if abs(e) > mpmath.mpf(2) ** -100)


def _top(row: DenseRow) -> tuple[Any, Any]:
    """m and 1 − m, the latter as the sum of the other entries (no cancellation)."""
    k = max(range(len(row.p)), key=lambda i: row.p[i])
    return row.p[k], row.others[k]


def _reference(
    sides: Callable[[DenseRow], tuple[Any, Any]], what: str, computed: bool = False
) -> Callable[[SoftmaxRow, Backend], Reference]:
    def reference(case: SoftmaxRow, backend: Backend) -> Reference:
        row = dense_row(case, backend, computed)
        lhs, rhs = sides(row)
        method = f"dense J, {what}, p̂ {'in Fractions' if row.exact else 'in 200-bit mpmath'}"
        return Reference(lhs, rhs, method)

    return reference


def _quadratic_form_and_variance(row: DenseRow) -> tuple[Any, Any]:
    u = row.u
    form = sum((u[i] * row.J[i][j] * u[j] for i in range(len(u)) for j in range(len(u))), 0 * u[0])
    mean = sum((pi * ui for pi, ui in zip(row.p, u, strict=True)), 0 * u[0])
    return form, sum((pi * (ui - mean) ** 2 for pi, ui in zip(row.p, u, strict=True)), 0 * u[0])


REFERENCES: dict[str, Callable[[SoftmaxRow, Backend], Reference]] = {
    "variance-form": _reference(_quadratic_form_and_variance, "uᵀJu as a double sum, Var_p(u) two-pass"),
    "psd": _reference(lambda r: (0, _quadratic_form_and_variance(r)[0]), "0 against uᵀJu as a double sum"),
    "kernel": _reference(lambda r: (max(abs(sum(row, 0 * row[0])) for row in r.J), 0), "the row sums of J (J·1)"),
    "trace": _reference(
        lambda r: (
            sum((r.J[i][i] for i in range(len(r.p))), 0 * r.p[0]),
            sum((x * (x + o) for x, o in zip(r.p, r.others, strict=True)), 0 * r.p[0]) - sum(x * x for x in r.p),
        ),
        "the diagonal of J against 1 − Σ p̂² (with 1 = Σ p̂)",
    ),
    "rank": _reference(
        lambda r: (dense_rank(r), sum(1 for x in r.p if x > 0) - 1),
        "the rank of J against |supp p̂| − 1, on the computed row",
        computed=True,
    ),
    "lower-bound": _reference(lambda r: (_top(r)[0] * _top(r)[1], dense_norm(r)), "m(1 − m) against λ_max(J)"),
    "upper-bound": _reference(lambda r: (dense_norm(r), 2 * _top(r)[0] * _top(r)[1]), "λ_max(J) against 2m(1 − m)"),
    "envelope": _reference(
        lambda r: (dense_norm(r), min(_top(r)[0], 2 * _top(r)[0] * _top(r)[1])), "λ_max(J) against min(m, 2m(1 − m))"
    ),
    "lower-bound-approached": _reference(
        lambda r: (dense_norm(r), _top(r)[0] * _top(r)[1] * Fraction(len(r.p) - 1, len(r.p) - 2)),
        "λ_max(J) against m(1 − m) n/(n − 1)",
    ),
}
REFERENCES["envelope-attained"] = REFERENCES["envelope"]


# --------------------------------------------------------------------------- registration


FAMILY = Family("softmax-jacobian", rows)


def _with_factor(
    measure: Callable[..., Measurement], judge: Callable[..., Judgement], extra: Fraction
) -> dict[str, Any]:
    return {
        "measure": lambda i, b, f: measure(i, b, f * extra),
        "judge_exactly": lambda i, f: judge(i, f * extra),
    }


variance_form_claim = FAMILY.claim(
    "variance-form",
    reference=REFERENCES["variance-form"],
    source="seed 002, 'The gradient is a variance' (displayed identity)",
    title="The quadratic form of J is a variance",
    statement="uᵀ J u = Var_p(u) = Σ p_i (u_i − E_p u)²  for every u",
    domain="every probability vector p, every real u",
    relation=Relation.EQUAL,
    measure=measure_variance,
    judge_exactly=judge_variance,
    cases=rows_with_direction,
)
psd_claim = FAMILY.claim(
    "psd",
    reference=REFERENCES["psd"],
    source="seed 002, 'The gradient is a variance'",
    title="J is symmetric positive semidefinite",
    statement="uᵀ J u ≥ 0 for every u, i.e. (E_p u)² ≤ E_p[u²] (J = diag(p) − ppᵀ is symmetric by construction)",
    domain="every probability vector p, every real u",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=measure_psd,
    judge_exactly=judge_psd,
    cases=rows_with_direction,
)
kernel_claim = FAMILY.claim(
    "kernel",
    reference=REFERENCES["kernel"],
    source="seed 002, 'How tight that is' (smallest eigenvalue); 'What to keep' 3",
    title="J annihilates the constant direction",
    statement="J·1 = 0 (the logit gradients of a softmax row sum to zero)",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_kernel,
    judge_exactly=judge_kernel,
)
trace_claim = FAMILY.claim(
    "trace",
    reference=REFERENCES["trace"],
    source="seed 002, 'How tight that is' (trace line); 'What to keep' 3",
    title="The trace of J is a collision complement",
    statement="tr J = 1 − Σ p_i²",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_trace,
    judge_exactly=judge_trace,
)
rank_claim = FAMILY.claim(
    "rank",
    reference=REFERENCES["rank"],
    source="rankwall (reconstructed; seed 002 shows only the zero eigenvalue)",
    title="The rank of J is the support size minus one",
    statement="rank J = |supp p| − 1",
    domain="every probability vector p",
    relation=Relation.EQUAL,
    measure=measure_rank,
    judge_exactly=judge_rank,
)
lower_bound_claim = FAMILY.claim(
    "lower-bound",
    reference=REFERENCES["lower-bound"],
    source="seed 002, 'How tight that is' (displayed bound, lower half)",
    title="Lower bound on the spectral norm",
    statement="m(1 − m) ≤ ‖J‖₂,  m = max_i p_i",
    domain="every probability vector p (the seed states it for m ≥ 1/2)",
    relation=Relation.AT_MOST,
    direction="lower",
    measure=_measure_norm_bound("lower", norm_on_left=False),
    judge_exactly=_judge_norm_bound("lower", norm_on_left=False),
)
upper_bound_claim = FAMILY.claim(
    "upper-bound",
    reference=REFERENCES["upper-bound"],
    source="seed 002, 'How tight that is' (displayed bound, upper half)",
    title="Upper bound on the spectral norm",
    statement="‖J‖₂ ≤ 2m(1 − m),  m = max_i p_i",
    domain="every probability vector p (the seed states it for m ≥ 1/2; sharp exactly there)",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=_measure_norm_bound("upper", norm_on_left=True),
    judge_exactly=_judge_norm_bound("upper", norm_on_left=True),
)
envelope_claim = FAMILY.claim(
    "envelope",
    reference=REFERENCES["envelope"],
    source="rankwall (exact envelope; sharpens seed 002's upper bound for m < 1/2)",
    title="The exact envelope of the spectral norm",
    statement="‖J‖₂ ≤ min(m, 2m(1 − m))",
    domain="every probability vector p",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=_measure_norm_bound("envelope", norm_on_left=True),
    judge_exactly=_judge_norm_bound("envelope", norm_on_left=True),
)


envelope_attained_claim = FAMILY.claim(
    "envelope-attained",
    reference=REFERENCES["envelope-attained"],
    source="rankwall (witnesses for the envelope)",
    title="The envelope is attained",
    statement="‖J‖₂ = min(m, 2m(1 − m)) for the runner-up row (m, 1 − m) when m ≥ 1/2 "
    "and for two atoms tied at m ≤ 1/2",
    domain="the two constructed witnesses",
    relation=Relation.EQUAL,
    measure=_measure_norm_bound("envelope", norm_on_left=True),
    judge_exactly=_judge_norm_bound("envelope", norm_on_left=True),
    cases=envelope_witnesses,
)
lower_bound_approached_claim = FAMILY.claim(
    "lower-bound-approached",
    reference=REFERENCES["lower-bound-approached"],
    source="rankwall (seed 002's 64-position row, generalised)",
    title="The lower bound is approached by spreading the tail",
    statement="‖J‖₂ ≤ m(1 − m)·n/(n − 1) for (m, (1−m)/n, …, (1−m)/n) with n = V − 1 ≥ 2 tail atoms and "
    "m ≥ 1/(n + 1), so inf{‖J‖₂ : max p = m} = m(1 − m) over all V",
    domain="the spread-tail witness, V ≥ 3",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=measure_spread,
    judge_exactly=judge_spread,
    cases=spread_tails,
)

upper_bound_claim.with_mutant(
    "constant-1.9",
    statement="‖J‖₂ ≤ 1.9·m(1 − m)  (false: the runner-up row attains 2m(1 − m))",
    **_with_factor(upper_bound_claim.measure, upper_bound_claim.judge_exactly, Fraction(19, 20)),
)
lower_bound_claim.with_mutant(
    "factor-1.1",
    statement="1.1·m(1 − m) ≤ ‖J‖₂  (false: a spread tail comes within a factor n/(n−1))",
    **_with_factor(lower_bound_claim.measure, lower_bound_claim.judge_exactly, Fraction(11, 10)),
)
trace_claim.with_mutant(
    "equals-entropy",
    statement="tr J = −Σ p_i log p_i  (false: the trace is a collision complement)",
    measure=measure_trace_entropy,
    judge_exactly=judge_trace_entropy,
)
variance_form_claim.with_mutant(
    "second-moment",
    statement="uᵀ J u = E_p[u²]  (false: the mean is not removed; J = diag(p) − ppᵀ)",
    measure=lambda i, b, f: measure_variance(i, b, f, centred=False),
    judge_exactly=lambda i, f: judge_variance(i, f, centred=False),
)
psd_claim.with_mutant(
    "dominates-diag-p",
    statement="uᵀ J u ≥ E_p[u²], i.e. J ⪰ diag(p)  (false: J = diag(p) − ppᵀ ⪯ diag(p))",
    measure=lambda i, b, f: measure_psd(i, b, f, allowed=Fraction(0)),
    judge_exactly=lambda i, f: judge_psd(i, f, allowed=Fraction(0)),
)
kernel_claim.with_mutant(
    "annihilates-p",
    statement="J·p = 0  (false: (Jp)_i = p_i(p_i − Σ_j p_j²), zero only for a row uniform on its support)",
    measure=lambda i, b, f: measure_kernel(i, b, f, direction="p"),
    judge_exactly=lambda i, f: judge_kernel(i, f, direction="p"),
)
envelope_claim.with_mutant(
    "at-most-m(1-m)",
    statement="‖J‖₂ ≤ m(1 − m)  (false: the runner-up row has ‖J‖₂ = 2m(1 − m))",
    measure=_measure_norm_bound("lower", norm_on_left=True),
    judge_exactly=_judge_norm_bound("lower", norm_on_left=True),
)
envelope_attained_claim.with_mutant(
    "always-2m(1-m)",
    statement="‖J‖₂ = 2m(1 − m) on both witnesses  (false: two atoms tied at m < 1/2 give ‖J‖₂ = m)",
    measure=_measure_norm_bound("upper", norm_on_left=True),
    judge_exactly=_judge_norm_bound("upper", norm_on_left=True),
)
lower_bound_approached_claim.with_mutant(
    "attained",
    statement="‖J‖₂ ≤ m(1 − m) for the spread tail  (false: the infimum m(1 − m) is not attained for m < 1)",
    measure=_measure_norm_bound("lower", norm_on_left=True),
    judge_exactly=_judge_norm_bound("lower", norm_on_left=True),
)
rank_claim.with_mutant(
    "equals-V",
    statement="rank J = V  (false: J·1 = 0 always)",
    measure=lambda i, b, f: measure_rank(i, b, f, "V"),
    judge_exactly=lambda i, f: judge_rank(i, f, "V"),
)

#: The theorems and lemmas of ``docs/softmax_jacobian.md`` (collected by ``checks/fidelity.py``).
_TESTS = "tests/test_softmax_jacobian.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement("thm-variance", "SJ.1", "softmax_jacobian", "seed 002, \"The gradient is a variance\"", Kind.SEED,
              ("softmax-jacobian.variance-form", "softmax-jacobian.psd", "softmax-jacobian.kernel"),
              (_TESTS + "TestIdentitiesAreProvedSymbolically", _TESTS + "TestKernelIsMeasuredThroughTheProduct")),
    Statement("thm-trace", "SJ.2", "softmax_jacobian", "seed 002, \"The other two lines\" (trace and kernel)",
              Kind.SEED, ("softmax-jacobian.trace",), (_TESTS + "TestIdentitiesAreProvedSymbolically",),
              "the seed gives no proof; that neither the trace nor the entropy determines the other is proved here"),
    Statement("thm-rank", "SJ.3", "softmax_jacobian", "none (seed 002 shows one zero eigenvalue; it states no rank)",
              Kind.NEW, ("softmax-jacobian.rank",), (_TESTS + "TestRankIsMeasuredFromJ",)),
    Statement("thm-secular", "SJ.4", "softmax_jacobian", "none (Golub 1973)", Kind.NEW,
              ("softmax-jacobian.upper-bound",),
              (_TESTS + "TestSpectralNormIsAccurate", _TESTS + "TestAccuracyAgainstTheRoundingModel")),
    Statement("thm-bounds", "SJ.5", "softmax_jacobian", "seed 002, \"How tight that is\" (for m >= 1/2)",
              Kind.SEED, ("softmax-jacobian.lower-bound", "softmax-jacobian.upper-bound"),
              (_TESTS + "TestSeedFigures", _TESTS + "test_tightened_bounds_are_refuted_by_search"),
              "extended to every p, and to m = 1, with the case of equality"),
    Statement("thm-envelope", "SJ.6", "softmax_jacobian", "none", Kind.NEW,
              ("softmax-jacobian.envelope", "softmax-jacobian.envelope-attained"),
              (_TESTS + "test_each_mutant_is_refuted_with_a_certificate",)),
    Statement("thm-infimum", "SJ.7", "softmax_jacobian", "none", Kind.NEW,
              ("softmax-jacobian.lower-bound-approached",), (_TESTS + "test_tightened_bounds_are_refuted_by_search",),
              "needs m >= 1/(n + 1); m = 1 separately"),
)
