"""Claims ``softmax-jacobian.*``: the results of :mod:`rankwall.theory.softmax_jacobian`, declared over
this family's quantities.

The exact object. A case is a row built by a theory constructor (from probabilities or from logits) in
the context's backend and dtype, with an optional test direction u. Every quantity of a context
measures, evaluates exactly and references the same object:

- a row of *probabilities* (runner-up, tied atoms, spread tail, uniform, Dirichlet, sparse): the built
  float row read as rationals and normalised exactly, :math:`\\hat p = p / \\sum_i p_i` (a genuine
  probability vector: its zeros are the built zeros);
- a row of *logits*: the softmax of the built logits z, exactly,
  :math:`\\hat p_i = e^{z_i - \\max z} / \\sum_j e^{z_j - \\max z}`, which is positive everywhere whatever
  underflowed in floating point. Its exact values are balls, and rational functions of the weights
  :math:`w_j = e^{z_j - \\max z}` of the distinct logits (:class:`rankwall.checks.engine.reals.Form`), so an
  identity that holds for every probability vector is shown equal exactly, not to rounding;
- the direction u: the built float vector, read exactly.

A float measurement counts only where its error bound covers the distance to that object: every error
bound below carries an absolute term for entries below the dtype's normal range (:func:`underflow`),
and the spectral norm's float route declines (an infinite error) where its sides fall below the normal
range, so an underflowed tail goes to the exact route, never to the float row's zeros. ``rank`` of a row
from logits is enclosed from the logits (interlacing on the exact row), never from the computed row.

The spectral norm's exact comparison (:func:`_compare_norm`) reads the other side's structure where it
has one (c·m(1 − m), c·min(m, 2m(1 − m)), a constant) and takes the sign of the secular function at it,
with the tie and two-atom lemmas for the attained cases; any statement linear in ‖J‖₂ gets it.

The second eigenvalue λ₂(J) (:data:`second_eigenvalue`, counted with multiplicity). Let the positive
distinct values of p̂ be v_1 > v_2 > … > v_K with counts c_k. On the support J = D − p̂p̂ᵀ, D diagonal,
with p̂ > 0 there: a value taken c_k times has c_k − 1 eigenvectors that are orthogonal to p̂ and
supported on its copies, so v_k is an eigenvalue c_k − 1 times; the other eigenvalues are the roots of the
secular equation f(λ) = 1 − Σ_k c_k v_k²/(v_k − λ) = 0, which is decreasing from +∞ to −∞ on each
(v_{k+1}, v_k) (one root there, strictly inside: interlacing), and has the root 0 (J1 = 0, since Σp̂ = 1);
zero entries add the eigenvalue 0. Nothing lies above v_1. So the spectrum, in decreasing order, is
v_1 (c_1 − 1 times), the root r_1 ∈ (v_2, v_1), v_2 (c_2 − 1 times), r_2 ∈ (v_3, v_2), …, 0, and λ₁ = ‖J‖₂
is v_1 when c_1 ≥ 2, else r_1 (0 for a one-hot row). Hence

- c_1 ≥ 3: λ₂ = v_1 (= λ₁);
- c_1 = 2: λ₂ = r_1 if K ≥ 2, else 0 (two atoms tied at 1/2: J has eigenvalues 1/2 and 0);
- c_1 = 1: λ₂ = v_2 if c_2 ≥ 2 (v_2 > r_2), else r_2 if K ≥ 3, else 0 (two atoms, V = 2, one-hot).

The float route finds r_k by bisection on the secular sign of the computed row, with the rounding of that
sign bounded, and Weyl's inequality carries it to p̂ (:func:`rankwall.checks.engine.tolerance.eigenvalue_shift`);
the exact route takes v_k from p̂ (a rational, or from logits a ball with its form) and encloses r_k by
the signs of g(x) = Σ c_k v_k/(v_k − x) = −f(x)/x at both ends of a bracket, so a tail below the normal
range keeps its digits (:func:`rankwall.checks.exact.softmax.interior_root_enclosure`).
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
    "frobenius",
    "kernel_residual",
    "mean",
    "norm",
    "p_norm",
    "product_with_p",
    "quadratic_form",
    "rank",
    "rows",
    "rows_with_direction",
    "runner_ups",
    "second_eigenvalue",
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

from rankwall.checks import exact
from rankwall.checks.engine import tolerance, toolkit
from rankwall.checks.engine.backends import Backend, to_numpy
from rankwall.checks.engine.quantities import (
    Approximately,
    Combination,
    Compared,
    Constant,
    Context,
    Measured,
    Quantity,
    declare,
    minimum,
    quantity,
)
from rankwall.checks.engine.reals import Form, Real, difference_sign
from rankwall.checks.engine.statements import Kind, Statement
from rankwall.checks.engine.toolkit import Cases, numpy_float64, scalar
from rankwall.checks.engine.verdict import Case, OutsideDomain, RankInterval
from rankwall.checks.exact import softmax as exact_softmax
from rankwall.checks.exact import vectors as exact_vectors
from rankwall.theory import softmax_jacobian as sj
from rankwall.theory.validation import InputError

#: The family's name: the prefix of its claim ids, and what its quantities and cases belong to.
FAMILY = "softmax-jacobian"


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
    (:class:`~rankwall.checks.engine.verdict.OutsideDomain`): it is no instance of the family's statements."""
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


# --------------------------------------------------------------------------- the exact instance of a context


def built_in(ctx: Context) -> Built:
    """The case built once per context, in its backend and dtype (every quantity of the context reads it)."""
    return ctx.once("built", lambda: build(ctx.case, ctx.backend))


def rebuilt(case: SoftmaxRow) -> Built:
    """The case built in NumPy float64."""
    return build(case, numpy_float64())


def exact_row_of(ctx: Context) -> exact_softmax.ExactRow:
    """The exact object's distinct values and counts: the built row read exactly (probabilities), or
    the built logits (whose softmax is the object)."""
    return built_in(ctx).exact_row


def float64_rows(built: Built) -> sj.SoftmaxRows:
    """The built row (read into float64 exactly) as NumPy rows, for float estimates the exact routes refine."""
    row = built.raw.reshape(1, -1)
    return sj.softmax_rows(row) if built.form == "logits" else sj.probability_rows(row)


@dataclass(frozen=True)
class DyadicRow:
    """A row of probabilities read exactly: :math:`\\hat p_i = n_i / N` for the Python integers n_i of
    the built floats over one power of two, :math:`N = \\sum_i n_i`."""

    n: np.ndarray
    N: int


def dyadic_row(ctx: Context) -> DyadicRow:
    def compute() -> DyadicRow:
        integers = exact_vectors.Dyadic.of(built_in(ctx).raw).integers
        return DyadicRow(integers, int(integers.sum()))

    return ctx.once("dyadic row", compute)


#: The most distinct logits whose weights become symbols of a :class:`~rankwall.checks.engine.reals.Form`
#: (a constructed row has at most three; beyond this the exact values are balls only).
FORM_ATOMS = 16


@dataclass(frozen=True)
class LogitGroups:
    """The built logits grouped by distinct value, largest first: ``values``, ``counts``, the group of
    each entry (``group``), and the ring whose generators stand for the weights
    :math:`w_j = e^{z_j - \\max z}` of the groups after the first (``None``: too many groups for forms)."""

    values: np.ndarray
    counts: list[int]
    group: np.ndarray
    ring: Any


def logit_groups(ctx: Context) -> LogitGroups:
    def compute() -> LogitGroups:
        values, inverse, counts = np.unique(built_in(ctx).raw, return_inverse=True, return_counts=True)
        k = len(values)
        ring = None
        if 2 <= k <= FORM_ATOMS:
            ring = flint.fmpq_mpoly_ctx.get(tuple(f"w{j}" for j in range(1, k)), "lex")
        return LogitGroups(values[::-1], [int(c) for c in counts[::-1]], (k - 1 - inverse).reshape(-1), ring)

    return ctx.once("logit groups", compute)


def group_probabilities(ctx: Context) -> list[Real]:
    """:math:`\\hat p_j = w_j / W` for each group of equal logits, :math:`W = \\sum_j c_j w_j`, as balls at
    the working precision with their forms (rationals 1/V where every logit is equal)."""

    def compute() -> list[Real]:
        g = logit_groups(ctx)
        if len(g.values) == 1:
            return [Real.of(Fraction(1, g.counts[0]))]
        top = exact.ball(g.values[0])
        weights = [flint.arb(1)] + [(exact.ball(z) - top).exp() for z in g.values[1:]]
        total = sum((c * w for c, w in zip(g.counts, weights, strict=True)), flint.arb(0))
        if g.ring is None:
            return [Real(w / total) for w in weights]
        one = g.ring.from_dict({(0,) * g.ring.nvars(): 1})
        symbols = [one, *g.ring.gens()]
        denominator = sum((c * x for c, x in zip(g.counts[1:], symbols[1:], strict=True)), g.counts[0] * one)
        atoms = tuple(weights[1:])
        return [Real(w / total, Form(x, denominator, atoms)) for w, x in zip(weights, symbols, strict=True)]

    return ctx.once(("group p", flint.ctx.prec), compute)


def _sum(terms: list[Any]) -> Any:
    total = Real.of(0)
    for term in terms:
        total = total + term
    return total


def largest_magnitude(values: list[Real]) -> Real:
    """max_j |x_j| of exact values: exact where each is (zero forms give an exact 0), else the balls' hull."""
    magnitudes = [abs(x) for x in values]
    best = magnitudes[0]
    for x in magnitudes[1:]:
        found, _ = difference_sign(best, x)
        if found is None:
            best = Real(best.ball.union(x.ball))
        elif found > 0:
            best = x
    return best


def exact_direction(ctx: Context) -> exact_vectors.Dyadic:
    """The built test direction u, read exactly (integers over one power of two)."""
    built = _with_direction(ctx)
    return ctx.once("dyadic u", lambda: exact_vectors.Dyadic.of(to_numpy(built.direction)[0].astype(np.float64)))


def _with_direction(ctx: Context) -> Built:
    built = built_in(ctx)
    if built.direction is None:
        raise InputError(f"{ctx.case.KIND}: this quantity needs a test direction u (use rows_with_direction)")
    return built


def _dyadic_fmpq(integer: int, exponent: int) -> flint.fmpq:
    return flint.fmpq(integer * 2**exponent) if exponent >= 0 else flint.fmpq(integer, 2**-exponent)


def direction_group_sums(ctx: Context) -> tuple[list[flint.fmpq], list[flint.fmpq]]:
    """For each group of equal logits, :math:`\\sum_{i \\in j} u_i` and :math:`\\sum_{i \\in j} u_i^2`, exactly."""

    def compute() -> tuple[list[flint.fmpq], list[flint.fmpq]]:
        u, g = exact_direction(ctx), logit_groups(ctx)
        first, second = [], []
        for j in range(len(g.values)):
            members = u.integers[g.group == j]
            first.append(_dyadic_fmpq(int(members.sum()), u.exponent))
            second.append(_dyadic_fmpq(int((members * members).sum()), 2 * u.exponent))
        return first, second

    return ctx.once("direction group sums", compute)


# --------------------------------------------------------------------------- the float routes' error model


def underflow(built: Built, scale: float = 1.0) -> float:
    """The absolute error, beyond the relative model, of a sum of V terms built from entries of the row:
    an entry (or a product of entries) whose exact value lies below the dtype's normal range may be
    subnormal or flushed to zero, off by at most the smallest normal number η each, twice over (the
    entry, its product), times ``scale`` (the largest |u| or u² a term carries)."""
    return 2 * built.V * tolerance.smallest_normal(built.rows.p.dtype) * scale


def subnormal(built: Built, *values: float) -> bool:
    """Whether a value falls below the dtype's normal range (a complement 1 − m past a logit gap of
    ~708 in float64), where the spectral norm's rounding model no longer bounds its error."""
    tiny = tolerance.smallest_normal(built.rows.p.dtype)
    return any(abs(v) < tiny for v in values)


def entry_error(built: Built) -> float:
    """Relative error of each computed p_i against p̂_i (a division by a sum of V terms, and, from
    logits, an exponential): gamma_{V+4}."""
    return tolerance.gamma(built.V + 4, built.u)


def _bounded(value: float, relative: float, absolute: float) -> Measured:
    return Measured(value, relative * abs(value) + absolute)


def _direction_scale(built: Built, power: int) -> float:
    u = to_numpy(built.direction)[0].astype(np.float64)
    return float(np.max(np.abs(u))) ** power if u.size else 0.0


# --------------------------------------------------------------------------- quantities: measured


def _measure_norm(ctx: Context) -> Measured:
    """‖J‖₂ from the secular solve, within :func:`rankwall.checks.engine.tolerance.spectral_norm_tolerance`;
    no float bound where the norm or 1 − m is below the normal range (the exact route decides)."""
    built = built_in(ctx)
    norm = scalar(sj.spectral_norm(built.rows))
    if subnormal(built, norm, scalar(built.rows.complement)):
        return Measured(norm, math.inf)
    return Measured(norm, tolerance.spectral_norm_tolerance(built.V, built.u, norm))


def second_eigenvalue_structure(counts: list[int]) -> tuple[str, int]:
    """Where λ₂(J) lies, from the counts c_1, c_2, … of the positive distinct values v_1 > v_2 > … of a
    probability row, largest first (0-based indices): ``("zero", 0)``; ``("value", j)``: λ₂ = v_{j+1};
    ``("root", k)``: λ₂ is the secular root strictly between v_{k+1} and v_k (1-based). See
    :data:`second_eigenvalue` for the case analysis."""
    K = len(counts)
    if K == 0:
        return "zero", 0
    if counts[0] >= 3:
        return "value", 0
    if counts[0] == 2:
        return ("root", 1) if K >= 2 else ("zero", 0)
    if K == 1:
        return "zero", 0
    if counts[1] >= 2:
        return "value", 1
    return ("root", 2) if K >= 3 else ("zero", 0)


def interior_root_float(weights: np.ndarray, counts: np.ndarray, k: int) -> tuple[float, float]:
    """A bracket (lo, hi) of the root of g(x) = Σ_j c_j w_j/(w_j − x) strictly between the positive float
    weights w_k < w_{k−1} (descending, 0-based), by bisection in float64 (geometric while the ends span
    more than a factor 4), each step taken only where the computed g clears its rounding bound: three
    roundings a term (c_j w_j, w_j − x, the quotient) and a sum of K terms stay within
    γ_{2K+8}·Σ|terms| relative, and each term's underflow within the smallest normal number η. g is
    increasing between its poles, so the root stays in (lo, hi) whatever step stops it."""
    u, tiny = tolerance.unit_roundoff(np.float64), tolerance.smallest_normal(np.float64)
    w = np.asarray(weights, dtype=np.float64)
    numerators = np.asarray(counts, dtype=np.float64) * w
    n = len(w)
    lo, hi = float(w[k]), float(w[k - 1])
    with np.errstate(all="ignore"):
        for _ in range(4000):
            middle = math.sqrt(lo) * math.sqrt(hi) if hi > 4 * lo else lo + (hi - lo) / 2
            if not lo < middle < hi:
                break
            terms = numerators / (w - middle)
            g = float(np.sum(terms))
            bound = tolerance.gamma(2 * n + 8, u) * float(np.sum(np.abs(terms))) + 2 * n * tiny
            if g > bound:
                hi = middle
            elif g < -bound:
                lo = middle
            else:
                break
    return lo, hi


def _measure_second_eigenvalue(ctx: Context) -> Measured:
    """λ₂(J) of the computed row p (read into float64 exactly), normalised exactly, p̃ = p/S: from the
    structure of its distinct values (a value, or 0), or the secular root by :func:`interior_root_float`
    (O(V) a step), over the computed S. The error: the root's bracket and the rounding of S (γ_{V+4}, in
    float64), plus how far every eigenvalue moves from p̃ to the exact row p̂ (Weyl:
    :func:`rankwall.checks.engine.tolerance.eigenvalue_shift` of the entries' error, :func:`entry_error`
    relative and :func:`underflow` absolute). No float bound where 1 − m, or a nonzero λ₂, falls below
    the dtype's normal range (as the spectral norm's; the exact route decides)."""
    built = built_in(ctx)
    p = to_numpy(built.rows.p)[0].astype(np.float64)
    values, counts = np.unique(p[p > 0], return_counts=True)
    weights, counts = values[::-1], counts[::-1]
    total = float(np.sum(p))
    shift = tolerance.eigenvalue_shift(entry_error(built), underflow(built))
    kind, j = second_eigenvalue_structure([int(c) for c in counts])
    u64 = tolerance.unit_roundoff(np.float64)
    if kind == "zero":
        value, width = 0.0, 0.0
    elif kind == "value":
        value, width = float(weights[j]) / total, 0.0
    else:
        lo, hi = interior_root_float(weights, counts, j)
        value, width = (lo + (hi - lo) / 2) / total, (hi - lo) / total
    if subnormal(built, scalar(built.rows.complement)) or (value != 0 and subnormal(built, value)):
        return Measured(value, math.inf)
    return Measured(value, width + tolerance.gamma(built.V + 4, u64) * value + shift)


def _measure_top(ctx: Context) -> Measured:
    built = built_in(ctx)
    return _bounded(scalar(built.rows.top), entry_error(built), 0.0)


def _measure_complement(ctx: Context) -> Measured:
    """1 − m as the sum of the other entries: gamma_{2V+4} relative, and the underflow of its terms."""
    built = built_in(ctx)
    return _bounded(scalar(built.rows.complement), tolerance.gamma(2 * built.V + 4, built.u), underflow(built))


def _measure_trace(ctx: Context) -> Measured:
    built = built_in(ctx)
    return _bounded(scalar(sj.trace(built.rows)), tolerance.gamma(3 * built.V + 16, built.u), 2 * underflow(built))


def _measure_collision_complement(ctx: Context) -> Measured:
    """1 − Σ p² ≥ s (see :func:`rankwall.theory.softmax_jacobian.collision_complement`), so the errors of
    s(1 + m) and of Σ_{i≠k} p_i², each at most gamma·s, stay within 3·gamma of the result."""
    built = built_in(ctx)
    value = scalar(sj.collision_complement(built.rows))
    return _bounded(value, 3 * tolerance.gamma(3 * built.V + 16, built.u), 2 * underflow(built))


def _measure_entropy(ctx: Context) -> Measured:
    """H(p): each p_i off by gamma_{V+4} moves p_i log p_i by at most that times p_i(|log p_i| + 1), and
    the logarithms, products and the sum add gamma_{V+4} of H: within gamma_{3V+16}(2H + 1); an entry
    below the normal range moves its term by at most η(|log η| + 1) < 746η."""
    built = built_in(ctx)
    value = scalar(sj.entropy(built.rows))
    return Measured(value, tolerance.gamma(3 * built.V + 16, built.u) * (2 * value + 1) + 746 * underflow(built))


def _measure_product(ctx: Context, direction: str) -> Measured:
    """max_i |(J·v)_i| of the O(V) product, v = 1 or p: each entry p_i(v_i − ⟨p, v⟩) of the computed row
    carries at most gamma_{2V+8}·2m of rounding (and the underflow of its terms)."""
    built = built_in(ctx)
    xp = built.backend.xp
    v = xp.ones_like(built.rows.p) if direction == "ones" else built.rows.p
    value = scalar(xp.max(xp.abs(sj.jvp(built.rows, v))))
    return Measured(value, tolerance.gamma(2 * built.V + 8, built.u) * 2 * scalar(built.rows.top) + underflow(built))


def _measure_mean(ctx: Context) -> Measured:
    """E_p u: the entries of p (gamma_{V+4} each) and the sum (gamma_V) give gamma_{2V+6}·E_p|u|."""
    built = _with_direction(ctx)
    xp, p, u = built.backend.xp, built.rows.p, built.direction
    error = tolerance.gamma(2 * built.V + 6, built.u) * scalar(xp.sum(p * xp.abs(u)))
    return Measured(scalar(xp.sum(p * u)), error + underflow(built, _direction_scale(built, 1)))


def _second_moment_of(built: Built) -> float:
    return scalar(built.backend.xp.sum(built.rows.p * built.direction**2))


def _measure_second_moment(ctx: Context) -> Measured:
    built = _with_direction(ctx)
    value = _second_moment_of(built)
    return Measured(
        value, tolerance.gamma(2 * built.V + 8, built.u) * value + underflow(built, _direction_scale(built, 2))
    )


def _measured_form(ctx: Context, computed: Callable[[Built], Any], own: float) -> Measured:
    """A quadratic form in u computed two ways: its rounding (gamma_{V+5} of 2E_p[u²], as in
    :func:`rankwall.checks.engine.tolerance.quadratic_form_tolerance`) and the error of the entries of p
    (at most 3·gamma_{V+4}·E_p[u²]) stay within 6·gamma_{V+5}·E_p[u²], plus ``own`` of the value."""
    built = _with_direction(ctx)
    value = scalar(computed(built))
    error = 6 * tolerance.gamma(built.V + 5, built.u) * _second_moment_of(built)
    return Measured(value, error + own * abs(value) + 2 * underflow(built, _direction_scale(built, 2)))


def _measure_quadratic_form(ctx: Context) -> Measured:
    return _measured_form(ctx, lambda b: sj.quadratic_form(b.rows, b.direction), 0.0)


def _measure_variance(ctx: Context) -> Measured:
    built = _with_direction(ctx)
    return _measured_form(ctx, lambda b: sj.variance(b.rows, b.direction), tolerance.gamma(built.V + 6, built.u))


def _frobenius_squared_float(built: Built) -> float:
    """‖J‖_F² = Σ_i p_i²(1 − p_i)² + Σ_{i≠j} p_i² p_j² without cancellation: 1 − p_i as the sum of the
    other entries (the complement for the top atom) and Σ_{j≠i} p_j² as the tail's squares for the top."""
    xp, rows = built.backend.xp, built.rows
    p = rows.p[0, :]
    squares = p * p
    total = xp.sum(squares)
    others = xp.where(p == rows.top[0], rows.complement[0], 1 - p)
    tail_squares = xp.sum(rows.tail[0, :] ** 2)
    rest = xp.where(p == rows.top[0], tail_squares, total - squares)
    return scalar(xp.sum(squares * others * others) + xp.sum(squares * rest))


def _measure_frobenius(ctx: Context) -> Measured:
    """‖J‖_F: its square from 2V products and two sums of nonnegative terms (gamma_{2V+12} relative,
    and the underflow of its terms), then a square root (within half that, plus its rounding)."""
    built = built_in(ctx)
    squared = _frobenius_squared_float(built)
    relative = tolerance.gamma(2 * built.V + 12, built.u)
    value = math.sqrt(squared)
    bound = relative * squared + underflow(built)
    error = bound / (math.sqrt(max(squared - bound, 0.0)) + value) if squared > bound else math.sqrt(squared + bound)
    return Measured(value, error + tolerance.gamma(1, 2.0**-53) * value)


def _measure_p_norm(ctx: Context) -> Measured:
    """‖p‖₂ = (Σ p_i²)^{1/2}: the sum of squares within gamma_{2V+8} relative, then a square root."""
    built = built_in(ctx)
    xp = built.backend.xp
    squared = scalar(xp.sum(built.rows.p * built.rows.p))
    value = math.sqrt(squared)
    relative = tolerance.gamma(2 * built.V + 8, built.u)
    return Measured(value, relative * value + math.sqrt(underflow(built)) + tolerance.gamma(1, 2.0**-53) * value)


def _support_interval(ctx: Context) -> RankInterval:
    """|supp p̂|: the nonzero entries of the built row (every entry of a softmax of finite logits is
    positive, whatever underflowed in floating point)."""
    built = built_in(ctx)
    n = built.V if built.form == "logits" else int(np.count_nonzero(built.raw > 0))
    return RankInterval(n, n, "the positive entries", "the positive entries", exact=True)


def _vocabulary(ctx: Context) -> RankInterval:
    return RankInterval(ctx.case.V, ctx.case.V, "the case", "the case", exact=True)


def _measure_rank(ctx: Context) -> RankInterval:
    """rank J(p̂): from the logits by interlacing (exact) for a row of logits; for a row of
    probabilities, :func:`rank_enclosure` of the computed row (whose zeros are p̂'s)."""
    built = built_in(ctx)
    if built.form == "logits":
        lo, hi, certificate = interlacing_rank(exact_row_of(ctx))
        certificate = {**certificate, "closeness": rank_closeness(to_numpy(built.rows.p)[0].astype(np.float64))}
        how = "interlacing on the exact row (the distinct logits)"
        return RankInterval(lo, hi, how, "zero rows of J and the kernel vector 1", True, certificate)
    return rank_enclosure(built, ctx.backend)


# --------------------------------------------------------------------------- quantities: exact


def _exact_top(ctx: Context) -> Real:
    if built_in(ctx).form == "logits":
        return group_probabilities(ctx)[0]
    row = dyadic_row(ctx)
    return Real(flint.fmpq(int(row.n.max()), row.N))


def _exact_complement(ctx: Context) -> Real:
    """1 − m as the sum of the other entries (a tied top's other copies included)."""
    if built_in(ctx).form == "logits":
        p, counts = group_probabilities(ctx), logit_groups(ctx).counts
        return _sum([c * q for c, q in zip(counts[1:], p[1:], strict=True)]) + (counts[0] - 1) * p[0]
    row = dyadic_row(ctx)
    return Real(flint.fmpq(row.N - int(row.n.max()), row.N))


def _exact_trace(ctx: Context) -> Real:
    """Σ_i p̂_i(1 − p̂_i), from the diagonal."""
    if built_in(ctx).form == "logits":
        p, counts = group_probabilities(ctx), logit_groups(ctx).counts
        return _sum([c * q * (1 - q) for c, q in zip(counts, p, strict=True)])
    row = dyadic_row(ctx)
    return Real(flint.fmpq(int((row.n * (row.N - row.n)).sum()), row.N**2))


def _exact_collision_complement(ctx: Context) -> Real:
    if built_in(ctx).form == "logits":
        p, counts = group_probabilities(ctx), logit_groups(ctx).counts
        return 1 - _sum([c * q * q for c, q in zip(counts, p, strict=True)])
    row = dyadic_row(ctx)
    return Real(flint.fmpq(row.N**2 - int((row.n * row.n).sum()), row.N**2))


def _exact_frobenius(ctx: Context) -> Real:
    """‖J(p̂)‖_F = (Σ p̂² − 2Σ p̂³ + (Σ p̂²)²)^{1/2}: the square root of a rational (or of a form in the
    logits' weights), kept as such, so that ‖J‖_F² is its radicand exactly."""
    if built_in(ctx).form == "logits":
        p, counts = group_probabilities(ctx), logit_groups(ctx).counts
        s2 = _sum([c * q**2 for c, q in zip(counts, p, strict=True)])
        s3 = _sum([c * q**3 for c, q in zip(counts, p, strict=True)])
        return (s2 - 2 * s3 + s2 * s2).sqrt()
    row = dyadic_row(ctx)
    n, N = row.n, row.N
    s2, s3 = int((n * n).sum()), int((n * n * n).sum())
    return Real(flint.fmpq(s2 * N**2 - 2 * s3 * N + s2 * s2, N**4)).sqrt()


def _exact_p_norm(ctx: Context) -> Real:
    """‖p̂‖₂ = (Σ p̂_i²)^{1/2}, a square root kept as such."""
    if built_in(ctx).form == "logits":
        p, counts = group_probabilities(ctx), logit_groups(ctx).counts
        return _sum([c * q * q for c, q in zip(counts, p, strict=True)]).sqrt()
    row = dyadic_row(ctx)
    return Real(flint.fmpq(int((row.n * row.n).sum()), row.N**2)).sqrt()


def _exact_entropy(ctx: Context) -> Real:
    """−Σ p̂ log p̂ in balls, one term per distinct value."""
    if built_in(ctx).form == "logits":
        p, counts = group_probabilities(ctx), logit_groups(ctx).counts
        return Real(-sum((c * q.ball * q.ball.log() for c, q in zip(counts, p, strict=True)), flint.arb(0)))
    row = dyadic_row(ctx)
    values, counts = np.unique(row.n[row.n > 0], return_counts=True)
    terms = (
        int(c) * flint.arb(flint.fmpq(int(v), row.N)) * flint.arb(flint.fmpq(int(v), row.N)).log()
        for v, c in zip(values, counts, strict=True)
    )
    return Real(-sum(terms, flint.arb(0)))


def _exact_kernel_residual(ctx: Context) -> Real:
    """max_i |(J·1)_i| = max_i |p̂_i (1 − Σ_j p̂_j)|, from the product on the exact row."""
    if built_in(ctx).form == "logits":
        p, counts = group_probabilities(ctx), logit_groups(ctx).counts
        deficit = 1 - _sum([c * q for c, q in zip(counts, p, strict=True)])
        return largest_magnitude([q * deficit for q in p])
    row = dyadic_row(ctx)
    numerators = row.n * (row.N - int(row.n.sum()))
    return Real(flint.fmpq(int(np.abs(numerators).max()), row.N**2))


def _exact_product_with_p(ctx: Context) -> Real:
    """max_i |(J·p̂)_i| = max_i |p̂_i (p̂_i − Σ_j p̂_j²)|."""
    if built_in(ctx).form == "logits":
        p, counts = group_probabilities(ctx), logit_groups(ctx).counts
        collision = _sum([c * q * q for c, q in zip(counts, p, strict=True)])
        return largest_magnitude([q * (q - collision) for q in p])
    row = dyadic_row(ctx)
    squares = int((row.n * row.n).sum())
    numerators = row.n * (row.n * row.N - squares)
    return Real(flint.fmpq(int(np.abs(numerators).max()), row.N**3))


def _exact_moments(ctx: Context) -> tuple[Real, Real, Real, Real]:
    """(E_p̂ u, E_p̂[u²], uᵀJu in the matrix form Σ_i u_i (Ju)_i, Var_p̂(u) two-pass), each by its own
    expression: on a row of probabilities in exact rationals (:mod:`rankwall.checks.exact.vectors`), on
    a row of logits group by group (Σ u_i and Σ u_i² over each group of equal logits), with forms."""

    def compute() -> tuple[Real, Real, Real, Real]:
        built = _with_direction(ctx)
        if built.form == "logits":
            p = group_probabilities(ctx)
            counts = logit_groups(ctx).counts
            first, second = direction_group_sums(ctx)
            mean = _sum([q * s for q, s in zip(p, first, strict=True)])
            moment = _sum([q * s for q, s in zip(p, second, strict=True)])
            form = _sum([q * (s2 - mean * s1) for q, s1, s2 in zip(p, first, second, strict=True)])
            variance = _sum(
                [
                    q * (s2 - 2 * mean * s1 + c * mean * mean)
                    for q, s1, s2, c in zip(p, first, second, counts, strict=True)
                ]
            )
            return mean, moment, form, variance
        row, u = dyadic_row(ctx), exact_direction(ctx)
        mean = Real(_dyadic_fmpq(int((row.n * u.integers).sum()), u.exponent) / row.N)
        form, variance, moment = exact_vectors.quadratic_moments(built.raw, to_numpy(built.direction)[0])
        return mean, Real(moment), Real(form), Real(variance)

    return ctx.once(("moments", flint.ctx.prec), compute)


def _exact_rank(ctx: Context) -> RankInterval:
    """rank J(p̂): over the rationals with python-flint for V ≤ 48 (rows of probabilities), else
    :func:`interlacing_rank` on the exact row (the softmax of logits is positive)."""
    built = built_in(ctx)
    if built.form == "probabilities" and built.V <= EXACT_RANK_LIMIT:
        row = dyadic_row(ctx)
        n = len(row.n)
        p = [flint.fmpq(int(x), row.N) for x in row.n]
        entries = [(pi if i == j else 0) - pi * pj for i, pi in enumerate(p) for j, pj in enumerate(p)]
        value = flint.fmpq_mat(n, n, entries).rank()
        how = "exact-rational rank (python-flint)"
        return RankInterval(value, value, how, how, True)
    lo, hi, certificate = interlacing_rank(exact_row_of(ctx))
    return RankInterval(lo, hi, "interlacing on the exact row", "zero rows and the kernel vector 1", True, certificate)


def _exact_norm(ctx: Context) -> Real:
    """‖J(p̂)‖₂ exactly where the structure gives it (one atom: 0; a tied top: m; two atoms: 2m(1 − m),
    with m and 1 − m as :func:`_exact_top` and :func:`_exact_complement` give them), else a ball from the
    secular equation's largest root at the working precision (:func:`rankwall.checks.exact.softmax.norm_enclosure`)."""
    row = exact_row_of(ctx)
    positive = [(v, c) for v, c in zip(row.values[::-1], row.counts[::-1], strict=True) if row.logits or v > 0]
    if len(positive) == 1 and positive[0][1] == 1:
        return Real.of(0)
    if positive[0][1] >= 2:
        return _exact_top(ctx)
    if len(positive) == 2 and positive[1][1] == 1:
        return 2 * _exact_top(ctx) * _exact_complement(ctx)
    estimate = scalar(sj.spectral_norm(float64_rows(built_in(ctx))))
    ball, _ = exact_softmax.norm_enclosure(row, estimate)
    return Real(ball)


def _exact_second_eigenvalue(ctx: Context) -> Real:
    """λ₂(J(p̂)) exactly where the structure gives it (0; a value of p̂, as :func:`_exact_top` gives the
    top: a rational, or from logits a ball with its form), else a ball around the secular root between the
    two values that bracket it (:func:`rankwall.checks.exact.softmax.interior_root_enclosure`), from a
    float bracket of the exact row's own values where one is certified, else by bisection in balls."""
    row = exact_row_of(ctx)
    values, counts = exact_softmax.positive_groups(row)
    kind, j = second_eigenvalue_structure(counts)
    if kind == "zero":
        return Real.of(0)
    if kind == "value":
        if row.logits:
            return group_probabilities(ctx)[j]
        dyadic = dyadic_row(ctx)
        numerators = sorted({int(n) for n in dyadic.n if n > 0}, reverse=True)
        return Real(flint.fmpq(numerators[j], dyadic.N))
    estimate = None
    with np.errstate(all="ignore"):
        weights = np.exp(np.asarray(values) - values[0]) if row.logits else np.asarray(values, dtype=np.float64)
    if np.all(weights[: j + 1] >= tolerance.smallest_normal(np.float64)):
        estimate = interior_root_float(weights, np.asarray(counts), j)
    ball, _ = exact_softmax.interior_root_enclosure(row, j, estimate)
    return Real(ball)


# --------------------------------------------------------------------------- the spectral norm's exact comparison


def norm_certification_is_exact(method: str, bound: exact_softmax.Bound) -> bool:
    """Whether a decision of :func:`rankwall.checks.exact.softmax.decide_norm_at_most` is exact:
    exact rationals, or the two-atom lemma and the tie lemma against an envelope (coefficients compared as
    rationals); balls, and the tie lemma against t = c m(1 - m) (the sign of c s - 1 in balls), are
    two-sided."""
    if bound.kind == "value":
        return method == "exact-rational" and bound.real.rational
    return (
        method == "exact-rational"
        or (method.startswith("two-atom") and bound.kind != "value")
        or (method.startswith("tie") and bound.kind == "envelope")
    )


def _rational_value(expression: Quantity, ctx: Context) -> Fraction | None:
    """The exact value of an expression free of m, 1 − m and ‖J‖₂ on this instance, where it is rational."""
    if any(expression.contains(q) for q in (top, complement, norm)):
        return None
    value = expression.exact(ctx)
    if isinstance(value, RankInterval):
        return Fraction(value.lo) if value.pinned else None
    if value is None or not value.rational:
        return None
    return Fraction(int(value.value.p), int(value.value.q))


def _product_of(expression: Quantity, ctx: Context) -> tuple[Fraction | None, list[Quantity]]:
    """``(c, factors)`` with expression = c · Π factors on this instance, c rational, for a product (or
    quotient by rational values) of constants and quantities; ``(None, [])`` where it is not one."""
    if isinstance(expression, Constant):
        return expression.value, []
    if isinstance(expression, Combination) and expression.op in ("*", "/", "neg"):
        if expression.op == "neg":
            c, f = _product_of(expression.operands[0], ctx)
            return (None, []) if c is None else (-c, f)
        (c1, f1), (c2, f2) = (_product_of(x, ctx) for x in expression.operands)
        if expression.op == "*":
            return (None, []) if c1 is None or c2 is None else (c1 * c2, f1 + f2)
        if c1 is None or c2 is None or f2 or c2 == 0:
            return None, []
        return c1 / c2, f1
    rational = _rational_value(expression, ctx)
    return (rational, []) if rational is not None else (Fraction(1), [expression])


def norm_bound_of(expression: Quantity, ctx: Context) -> exact_softmax.Bound | None:
    """The structure of a bound t on ‖J‖₂ written with this family's quantities, where it has one:
    c·m·(1 − m) (``"ms"``), c·min(m, 2m(1 − m)) (``"envelope"``) or a rational c, for c rational on this
    instance (a constant, or integer quantities such as (V − 1)/(V − 2)). Known structure lets the exact
    comparison use the tie and two-atom lemmas, which decide equalities no ball can."""
    constant, factors = _product_of(expression, ctx)
    if constant is None:
        return None
    if not factors:
        return exact_softmax.Bound("constant", constant)
    if sorted(map(id, factors)) == sorted((id(top), id(complement))):
        return exact_softmax.Bound("ms", constant)
    if len(factors) == 1 and isinstance(factors[0], Combination) and factors[0].op == "min":
        operands = factors[0].operands
        if len(operands) == 2 and any(x is top for x in operands):
            other = next(x for x in operands if x is not top)
            inner = norm_bound_of(other, ctx)
            if inner is not None and (inner.kind, inner.coefficient) == ("ms", Fraction(2)):
                return exact_softmax.Bound("envelope", constant)
    return None


def _compare_norm(ctx: Context, t: Real, expression: Quantity) -> Compared | None:
    """sign(‖J(p̂)‖₂ − t), from the sign of the secular function at t: against a bound of known structure
    (:func:`norm_bound_of`) through :func:`rankwall.checks.exact.softmax.decide_norm_at_most` and its
    lemmas, else against the exact value t itself (a rational, or a ball)."""
    bound = norm_bound_of(expression, ctx) or exact_softmax.Bound("value", real=t)
    outcome, method = exact_softmax.decide_norm_at_most(exact_row_of(ctx), bound)
    if outcome is None:
        return None
    return Compared(-outcome, f"{method} (secular function at the bound)", norm_certification_is_exact(method, bound))


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
rows = Cases(any_row, witness_rows, random_rows, ROW_BOUNDARY, family=FAMILY)
rows_with_direction = Cases(
    lambda: with_direction(any_row()),
    lambda V: _add_direction(witness_rows(V)),
    lambda V, n, seed: _add_direction(random_rows(V, n, seed), seed),
    {**ROW_BOUNDARY, "a direction offset by >= 10^4": large_offset},
    family=FAMILY,
)
runner_ups = Cases(
    lambda: runner_up_instances(exact_witness=True),
    lambda V: [RunnerUp(V, m) for m in (0.5, 0.75, 0.99, 1 - 1e-9, 1.0)],
    boundary={
        k: ENVELOPE_BOUNDARY[k] for k in ("V = 2 or 3", "V >= 1024", "m = 1/2 (the envelope's corner)", "one-hot")
    },
    family=FAMILY,
)
tied_atoms = Cases(
    tied_instances,
    lambda V: [TiedAtoms(V, m) for m in (0.5, 0.3, 0.25) if V > 2 and m >= 1 / V],
    boundary={
        k: ENVELOPE_BOUNDARY[k] for k in ("V = 2 or 3", "V >= 1024", "m = 1/2 (the envelope's corner)", "m = 1/V")
    },
    family=FAMILY,
)
envelope_witnesses = Cases(
    lambda: st.one_of(runner_ups.strategy(), tied_atoms.strategy()),
    lambda V: runner_ups.witnesses(V) + tied_atoms.witnesses(V),
    boundary=ENVELOPE_BOUNDARY,
    family=FAMILY,
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
    family=FAMILY,
)


# --------------------------------------------------------------------------- references
#
# Every quantity the slow, obviously right way, sharing nothing with the float and exact routes but the
# built instance: p̂ as Python Fractions (probabilities) or, from logits, as mpmath numbers at a
# precision that spans the row's dynamic range (REFERENCE_BITS beyond the ratio of its largest to its
# smallest entry, so an entry of e^-800 keeps its digits); the dense V x V matrix J = diag(p̂) − p̂p̂ᵀ;
# its eigenvalues from Arb's eigensolver (mpmath's Jacobi eigsy where Arb cannot isolate them); its
# rank exactly over the rationals, or, from logits, as the eigenvalues beyond the row's dynamic range.
# Small V only (the tests run them at V <= 64).


@dataclass(frozen=True)
class DenseRow:
    """The exact row, its dense J, the test direction (if any), and the precision (bits) it was built at."""

    p: list[Any]
    J: Any
    u: list[Any] | None
    exact: bool
    others: list[Any]
    bits: int


def dense_row(ctx: Context) -> DenseRow:
    """The context's instance as dense data (see above)."""
    return ctx.once("dense row", lambda: _dense(built_in(ctx)))


def _dense(built: Built) -> DenseRow:
    if built.form == "logits":
        span = float(built.raw.max() - built.raw.min()) / math.log(2)
        bits = mpmath.mp.prec + 2 * math.ceil(span) + 2 * built.V.bit_length() + 64
        with mpmath.workprec(bits):
            z = [mpmath.mpf(float(x)) for x in built.raw]
            weights = [mpmath.exp(x - max(z)) for x in z]
            total = mpmath.fsum(weights)
            p: list[Any] = [w / total for w in weights]
    else:
        bits = mpmath.mp.prec
        values = [Fraction(float(x)) for x in built.raw]
        total_q = sum(values, Fraction(0))
        p = [x / total_q for x in values]
    n = len(p)
    with mpmath.workprec(bits):
        # J_ii = p_i (1 − p_i) as p_i Σ_{j≠i} p_j: 1 − p_i cancels for a near-one-hot row from logits.
        others = [sum((p[j] for j in range(n) if j != i), 0 * p[0]) for i in range(n)]
        J = [[p[i] * others[i] if i == j else -p[i] * p[j] for j in range(n)] for i in range(n)]
    u = None
    if built.direction is not None:
        exact_row = built.form != "logits"
        u = [Fraction(float(x)) if exact_row else mpmath.mpf(float(x)) for x in to_numpy(built.direction)[0]]
    return DenseRow(p, J, u, built.form != "logits", others, bits)


def _at(row: DenseRow, compute: Callable[[], Any]) -> Any:
    """``compute()`` at the row's precision (an exact result is returned as it is)."""
    with mpmath.workprec(row.bits):
        return compute()


def _mp(x: Any) -> Any:
    return mpmath.mpf(x.numerator) / x.denominator if isinstance(x, Fraction) else mpmath.mpf(x)


def _arb(x: Any) -> flint.arb:
    """A Fraction or an mpf as an arb ball, exactly (an mpf is ±man·2^exp: ``man_exp`` drops the sign)."""
    if isinstance(x, Fraction):
        return flint.arb(exact.fmpq_of(x))
    man, exp = x.man_exp
    magnitude = flint.arb(int(man)) * flint.arb(2) ** int(exp)
    return -magnitude if x < 0 else magnitude


@functools.lru_cache(maxsize=256)
def _dense_eigenvalues(p: tuple[Any, ...], bits: int) -> tuple[tuple[Any, Any], ...] | None:
    """The eigenvalues of the dense J = diag(p) − ppᵀ as (midpoint, radius) pairs from Arb's eigensolver
    (clusters allowed), or ``None`` where Arb cannot isolate them or a radius exceeds 2^(−bits/2) (a
    cluster's midpoint can sit far from the eigenvalue: 0.1596 for 0.16). Cached on p."""
    n = len(p)
    with mpmath.workprec(bits):
        others = [sum((p[j] for j in range(n) if j != i), 0 * p[0]) for i in range(n)]
        J = [[p[i] * others[i] if i == j else -p[i] * p[j] for j in range(n)] for i in range(n)]
    try:
        with exact.precision(bits):
            matrix = flint.acb_mat([[flint.acb(_arb(x)) for x in r] for r in J])
            balls = [
                (e.real.mid().man_exp(), e.real.rad().man_exp(), e.imag.abs_upper()) for e in matrix.eig(multiple=True)
            ]
    except ValueError:  # Arb failed to isolate a near-cluster
        return None
    with mpmath.workprec(bits):
        pairs = tuple(
            (mpmath.mpf((int(m), int(e))), mpmath.mpf((int(rm), int(re))) + mpmath.mpf(float(imag)))
            for (m, e), (rm, re), imag in balls
        )
        if any(radius > mpmath.mpf(2) ** (-bits // 2) for _, radius in pairs):
            return None
        return pairs


def reference_norm(ctx: Context) -> Any:
    """λ_max(J) from a dense eigensolver: Arb's enclosures (the largest midpoint, within the largest
    radius), or mpmath's Jacobi solver where Arb's balls are wide, within its error (as for λ₂)."""
    row = dense_row(ctx)
    pairs = _dense_eigenvalues(tuple(row.p), row.bits)
    with mpmath.workprec(row.bits):
        if pairs is not None:
            return Approximately(max(m for m, _ in pairs), max(r for _, r in pairs))
        eigenvalues = _jacobi_eigenvalues(tuple(row.p), row.bits)
        return Approximately(eigenvalues[-1], mpmath.mpf(len(row.p)) ** 2 * mpmath.mpf(2) ** (16 - row.bits))


@functools.lru_cache(maxsize=64)
def _jacobi_eigenvalues(p: tuple[Any, ...], bits: int) -> tuple[Any, ...]:
    """The eigenvalues of the dense J = diag(p) − ppᵀ by mpmath's Jacobi ``eigsy`` at ``bits`` bits, sorted
    (Arb's cluster midpoints, which :func:`_dense_eigenvalues` reads, can sit far from a multiple
    eigenvalue's neighbours: 0.1596 for the 0.16 of two atoms tied at 0.3 beside six at 1/15). Cached on p."""
    n = len(p)
    with mpmath.workprec(bits):
        q = [_mp(x) for x in p]
        others = [mpmath.fsum(q[j] for j in range(n) if j != i) for i in range(n)]
        J = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                J[i, j] = q[i] * others[i] if i == j else -q[i] * q[j]
        return tuple(sorted(mpmath.eigsy(J, eigvals_only=True)))


def reference_second_eigenvalue(ctx: Context) -> Approximately:
    """λ₂(J): the second largest of the dense J's eigenvalues (mpmath's Jacobi solver), sorted with
    multiplicity, within the solver's error at the row's precision (absolute: V²·2^(16 − bits), since a
    zero eigenvalue comes out as a tiny number)."""
    row = dense_row(ctx)
    eigenvalues = _jacobi_eigenvalues(tuple(row.p), row.bits)
    with mpmath.workprec(row.bits):
        return Approximately(eigenvalues[-2], mpmath.mpf(len(row.p)) ** 2 * mpmath.mpf(2) ** (16 - row.bits))


def reference_rank(ctx: Context) -> int:
    """rank J: exactly over the rationals; from logits (p > 0), the rank of the congruent
    D^{-1/2} J D^{-1/2} = I − √p √pᵀ (D = diag p, a nonsingular scaling, which keeps the rank), whose
    eigenvalues are well separated from 0 or are 0: those above 2^-100 at the row's precision."""
    row = dense_row(ctx)
    n = len(row.p)
    if row.exact:
        entries = [flint.fmpq(x.numerator, x.denominator) for r in row.J for x in r]
        return int(flint.fmpq_mat(n, n, entries).rank())
    with mpmath.workprec(row.bits):
        scaled = mpmath.matrix([[row.J[i][j] / mpmath.sqrt(row.p[i] * row.p[j]) for j in range(n)] for i in range(n)])
        eigenvalues = mpmath.eigsy(scaled, eigvals_only=True)
        return sum(1 for e in eigenvalues if abs(e) > mpmath.mpf(2) ** -100)


def _top_index(row: DenseRow) -> int:
    return max(range(len(row.p)), key=lambda i: row.p[i])


def _reference_moments(ctx: Context) -> tuple[Any, Any, Any, Any]:
    """(E_p u, E_p[u²], uᵀJu as a double sum, Var_p(u) two-pass)."""
    row = dense_row(ctx)
    if row.u is None:
        raise InputError(f"{ctx.case.KIND}: this quantity needs a test direction u (use rows_with_direction)")
    u, p, n = row.u, row.p, len(row.p)

    def compute() -> tuple[Any, Any, Any, Any]:
        mean = sum((pi * ui for pi, ui in zip(p, u, strict=True)), 0 * p[0])
        second = sum((pi * ui * ui for pi, ui in zip(p, u, strict=True)), 0 * p[0])
        form = sum((u[i] * row.J[i][j] * u[j] for i in range(n) for j in range(n)), 0 * p[0])
        variance = sum((pi * (ui - mean) ** 2 for pi, ui in zip(p, u, strict=True)), 0 * p[0])
        return mean, second, form, variance

    values = ctx.once("reference moments", lambda: _at(row, compute))
    if row.exact:
        return values
    scale = max(abs(_mp(x)) for x in u) ** 2 + 1
    error = mpmath.mpf(n) ** 2 * scale * mpmath.mpf(2) ** (16 - row.bits)
    return tuple(Approximately(v, error) for v in values)


def _reference(compute: Callable[[DenseRow], Any]) -> Callable[[Context], Any]:
    """A reference from the dense row: exact on a row of probabilities; from logits, within the rounding
    of sums of at most V² terms of size at most 1 at the row's precision (an :class:`Approximately`)."""

    def reference(ctx: Context) -> Any:
        row = dense_row(ctx)
        value = _at(row, lambda: compute(row))
        if row.exact or isinstance(value, int):
            return value
        return Approximately(value, mpmath.mpf(len(row.p)) ** 2 * mpmath.mpf(2) ** (16 - row.bits))

    return reference


def _row_sums(row: DenseRow, v: list[Any]) -> Any:
    """max_i |Σ_j J_ij v_j|."""
    n = len(row.p)
    return max(abs(sum((row.J[i][j] * v[j] for j in range(n)), 0 * row.p[0])) for i in range(n))


# --------------------------------------------------------------------------- the quantities


def _quantity(name: str, measure: Callable[[Context], Any], exact_fn: Callable[[Context], Any], **options: Any) -> Any:
    return quantity(name, measure, exact_fn, family=FAMILY, **options)


norm = _quantity(
    "‖J‖₂",
    _measure_norm,
    _exact_norm,
    compare=_compare_norm,
    reference=reference_norm,
    doc="the spectral norm of J = diag(p) − ppᵀ",
    exact_doc="the secular equation's largest root, compared with a bound by the sign of the secular function "
    "at it (the tie and two-atom lemmas where the bound is attained)",
)
second_eigenvalue = _quantity(
    "λ₂(J)",
    _measure_second_eigenvalue,
    _exact_second_eigenvalue,
    reference=reference_second_eigenvalue,
    doc="the second largest eigenvalue of J, counted with multiplicity",
    exact_doc="a value of p̂ or 0 where the counts of the top values give it, else the secular root "
    "between the values that bracket it, certified by the signs of the secular function at both ends",
)
top = _quantity(
    "m",
    _measure_top,
    _exact_top,
    reference=_reference(lambda r: r.p[_top_index(r)]),
    doc="m = max_i p_i",
    exact_doc="the largest entry of p̂",
)
complement = _quantity(
    "(1 − m)",
    _measure_complement,
    _exact_complement,
    reference=_reference(lambda r: r.others[_top_index(r)]),
    doc="1 − m, as the sum of the other entries",
    exact_doc="the sum of the other entries of p̂",
)
trace = _quantity(
    "tr J",
    _measure_trace,
    _exact_trace,
    reference=_reference(lambda r: sum((r.J[i][i] for i in range(len(r.p))), 0 * r.p[0])),
    doc="tr J = Σ_i p_i(1 − p_i), from the diagonal",
    exact_doc="Σ_i p̂_i(1 − p̂_i) in rationals, or in the weights of the logits",
)
collision_complement = _quantity(
    "(1 − Σ p_i²)",
    _measure_collision_complement,
    _exact_collision_complement,
    reference=_reference(lambda r: 1 - sum((x * x for x in r.p), 0 * r.p[0])),
    doc="1 − Σ p_i², the probability that two draws from p differ",
    exact_doc="1 − Σ_i p̂_i² in rationals, or in the weights of the logits",
)
entropy = _quantity(
    "H(p)",
    _measure_entropy,
    _exact_entropy,
    reference=_reference(lambda r: -sum((_mp(x) * mpmath.log(_mp(x)) for x in r.p if x > 0), mpmath.mpf(0))),
    doc="the Shannon entropy −Σ p_i log p_i, in nats",
    exact_doc="balls, one term per distinct entry",
)
kernel_residual = _quantity(
    "max_i |(J·1)_i|",
    functools.partial(_measure_product, direction="ones"),
    _exact_kernel_residual,
    reference=_reference(lambda r: _row_sums(r, [1] * len(r.p))),
    doc="the largest entry of the product J·1 (the logit gradients of a row summed)",
    exact_doc="the product J·1 on p̂: p̂_i (1 − Σ_j p̂_j), exactly",
)
product_with_p = _quantity(
    "max_i |(J·p)_i|",
    functools.partial(_measure_product, direction="p"),
    _exact_product_with_p,
    reference=_reference(lambda r: _row_sums(r, r.p)),
    doc="the largest entry of the product J·p",
    exact_doc="p̂_i (p̂_i − Σ_j p̂_j²), exactly",
)
mean = _quantity(
    "(E_p u)",
    _measure_mean,
    lambda ctx: _exact_moments(ctx)[0],
    reference=lambda ctx: _reference_moments(ctx)[0],
    doc="the mean of the test direction u under p",
    exact_doc="Σ_i p̂_i u_i, exactly (rationals, or group sums of u in the weights of the logits)",
)
second_moment = _quantity(
    "E_p[u²]",
    _measure_second_moment,
    lambda ctx: _exact_moments(ctx)[1],
    reference=lambda ctx: _reference_moments(ctx)[1],
    doc="E_p[u²] of the test direction u",
    exact_doc="Σ_i p̂_i u_i², exactly",
)
quadratic_form = _quantity(
    "uᵀJu",
    _measure_quadratic_form,
    lambda ctx: _exact_moments(ctx)[2],
    reference=lambda ctx: _reference_moments(ctx)[2],
    doc="uᵀJu in the matrix form Σ_i u_i (Ju)_i",
    exact_doc="Σ_i u_i p̂_i (u_i − E u), exactly",
)
variance = _quantity(
    "Var_p(u)",
    _measure_variance,
    lambda ctx: _exact_moments(ctx)[3],
    reference=lambda ctx: _reference_moments(ctx)[3],
    doc="Var_p(u), two-pass",
    exact_doc="Σ_i p̂_i (u_i − E u)², exactly",
)
frobenius = _quantity(
    "‖J‖_F",
    _measure_frobenius,
    _exact_frobenius,
    reference=_reference(lambda r: mpmath.sqrt(_mp(sum((x * x for row in r.J for x in row), 0 * r.p[0])))),
    doc="the Frobenius norm of J, (Σ_ij J_ij²)^{1/2}",
    exact_doc="the square root of Σ p̂² − 2Σ p̂³ + (Σ p̂²)², kept as a root (its square is exact)",
)
p_norm = _quantity(
    "‖p‖₂",
    _measure_p_norm,
    _exact_p_norm,
    reference=_reference(lambda r: mpmath.sqrt(_mp(sum((x * x for x in r.p), 0 * r.p[0])))),
    doc="the Euclidean norm of the row p",
    exact_doc="the square root of Σ p̂², kept as a root",
)
support = _quantity(
    "|supp p|",
    _support_interval,
    _support_interval,
    reference=_reference(lambda r: sum(1 for x in r.p if x > 0)),
    integer=True,
    doc="the number of positive entries",
    exact_doc="the nonzero entries of the built row (all V for a softmax of logits)",
)
vocabulary = _quantity(
    "V",
    _vocabulary,
    _vocabulary,
    reference=lambda ctx: ctx.case.V,
    integer=True,
    doc="the vocabulary size V",
    exact_doc="the case's V",
)
rank = _quantity(
    "rank J",
    _measure_rank,
    _exact_rank,
    reference=reference_rank,
    integer=True,
    doc="rank J, enclosed from J itself (eigenvalues above a Weyl threshold, interlacing), never from |supp p|",
    exact_doc="python-flint's rank over the rationals (V ≤ 48), else interlacing on the exact row",
)


# --------------------------------------------------------------------------- the claims
#
# Seed 002 is "Gradients 2: A Confident Attention Head Passes Almost No Gradient"; each claim names the
# section of it that states the result, or "rankwall" where we reconstructed it.

variance_form_claim = declare(
    "softmax-jacobian.variance-form",
    source="seed 002, 'The gradient is a variance' (displayed identity)",
    title="The quadratic form of J is a variance",
    statement="uᵀ J u = Var_p(u) = Σ p_i (u_i − E_p u)²  for every u",
    domain="every probability vector p, every real u",
    lhs=quadratic_form,
    relation="==",
    rhs=variance,
    cases=rows_with_direction,
)
psd_claim = declare(
    "softmax-jacobian.psd",
    source="seed 002, 'The gradient is a variance'",
    title="J is symmetric positive semidefinite",
    statement="uᵀ J u ≥ 0 for every u, i.e. (E_p u)² ≤ E_p[u²] (J = diag(p) − ppᵀ is symmetric by construction)",
    domain="every probability vector p, every real u",
    lhs=mean**2,
    relation="<=",
    rhs=second_moment,
    cases=rows_with_direction,
)
kernel_claim = declare(
    "softmax-jacobian.kernel",
    source="seed 002, 'How tight that is' (smallest eigenvalue); 'What to keep' 3",
    title="J annihilates the constant direction",
    statement="J·1 = 0 (the logit gradients of a softmax row sum to zero)",
    domain="every probability vector p",
    lhs=kernel_residual,
    relation="==",
    rhs=0,
    cases=rows,
)
trace_claim = declare(
    "softmax-jacobian.trace",
    source="seed 002, 'How tight that is' (trace line); 'What to keep' 3",
    title="The trace of J is a collision complement",
    statement="tr J = 1 − Σ p_i²",
    domain="every probability vector p",
    lhs=trace,
    relation="==",
    rhs=collision_complement,
    cases=rows,
)
rank_claim = declare(
    "softmax-jacobian.rank",
    source="rankwall (reconstructed; seed 002 shows only the zero eigenvalue)",
    title="The rank of J is the support size minus one",
    statement="rank J = |supp p| − 1",
    domain="every probability vector p",
    lhs=rank,
    relation="==",
    rhs=support - 1,
    cases=rows,
)
lower_bound_claim = declare(
    "softmax-jacobian.lower-bound",
    source="seed 002, 'How tight that is' (displayed bound, lower half)",
    title="Lower bound on the spectral norm",
    statement="m(1 − m) ≤ ‖J‖₂,  m = max_i p_i",
    domain="every probability vector p (the seed states it for m ≥ 1/2)",
    lhs=norm,
    relation=">=",
    rhs=top * complement,
    cases=rows,
)
upper_bound_claim = declare(
    "softmax-jacobian.upper-bound",
    source="seed 002, 'How tight that is' (displayed bound, upper half)",
    title="Upper bound on the spectral norm",
    statement="‖J‖₂ ≤ 2m(1 − m),  m = max_i p_i",
    domain="every probability vector p (the seed states it for m ≥ 1/2; sharp exactly there)",
    lhs=norm,
    relation="<=",
    rhs=2 * top * complement,
    cases=rows,
)
envelope_claim = declare(
    "softmax-jacobian.envelope",
    source="rankwall (exact envelope; sharpens seed 002's upper bound for m < 1/2)",
    title="The exact envelope of the spectral norm",
    statement="‖J‖₂ ≤ min(m, 2m(1 − m))",
    domain="every probability vector p",
    lhs=norm,
    relation="<=",
    rhs=minimum(top, 2 * top * complement),
    cases=rows,
)
envelope_attained_claim = declare(
    "softmax-jacobian.envelope-attained",
    source="rankwall (witnesses for the envelope)",
    title="The envelope is attained",
    statement="‖J‖₂ = min(m, 2m(1 − m)) for the runner-up row (m, 1 − m) when m ≥ 1/2 "
    "and for two atoms tied at m ≤ 1/2",
    domain="the two constructed witnesses",
    lhs=norm,
    relation="==",
    rhs=minimum(top, 2 * top * complement),
    cases=envelope_witnesses,
)
lower_bound_approached_claim = declare(
    "softmax-jacobian.lower-bound-approached",
    source="rankwall (seed 002's 64-position row, generalised)",
    title="The lower bound is approached by spreading the tail",
    statement="‖J‖₂ ≤ m(1 − m)·n/(n − 1) for (m, (1−m)/n, …, (1−m)/n) with n = V − 1 ≥ 2 tail atoms and "
    "m ≥ 1/(n + 1), so inf{‖J‖₂ : max p = m} = m(1 − m) over all V",
    domain="the spread-tail witness, V ≥ 3",
    lhs=norm,
    relation="<=",
    rhs=top * complement * (vocabulary - 1) / (vocabulary - 2),
    cases=spread_tails,
)

upper_bound_claim.with_mutant(
    "constant-1.9",
    statement="‖J‖₂ ≤ 1.9·m(1 − m)  (false: the runner-up row attains 2m(1 − m))",
    rhs=1.9 * top * complement,
)
lower_bound_claim.with_mutant(
    "factor-1.1",
    statement="1.1·m(1 − m) ≤ ‖J‖₂  (false: a spread tail comes within a factor n/(n−1))",
    rhs=1.1 * top * complement,
)
trace_claim.with_mutant(
    "equals-entropy",
    statement="tr J = −Σ p_i log p_i  (false: the trace is a collision complement)",
    rhs=entropy,
)
variance_form_claim.with_mutant(
    "second-moment",
    statement="uᵀ J u = E_p[u²]  (false: the mean is not removed; J = diag(p) − ppᵀ)",
    rhs=second_moment,
)
psd_claim.with_mutant(
    "dominates-diag-p",
    statement="uᵀ J u ≥ E_p[u²], i.e. J ⪰ diag(p)  (false: J = diag(p) − ppᵀ ⪯ diag(p))",
    lhs=quadratic_form,
    relation=">=",
    rhs=second_moment,
)
kernel_claim.with_mutant(
    "annihilates-p",
    statement="J·p = 0  (false: (Jp)_i = p_i(p_i − Σ_j p_j²), zero only for a row uniform on its support)",
    lhs=product_with_p,
)
envelope_claim.with_mutant(
    "at-most-m(1-m)",
    statement="‖J‖₂ ≤ m(1 − m)  (false: the runner-up row has ‖J‖₂ = 2m(1 − m))",
    rhs=top * complement,
)
envelope_attained_claim.with_mutant(
    "always-2m(1-m)",
    statement="‖J‖₂ = 2m(1 − m) on both witnesses  (false: two atoms tied at m < 1/2 give ‖J‖₂ = m)",
    rhs=2 * top * complement,
)
lower_bound_approached_claim.with_mutant(
    "attained",
    statement="‖J‖₂ ≤ m(1 − m) for the spread tail  (false: the infimum m(1 − m) is not attained for m < 1)",
    rhs=top * complement,
)
rank_claim.with_mutant(
    "equals-V",
    statement="rank J = V  (false: J·1 = 0 always)",
    rhs=vocabulary,
)


#: The theorems and lemmas of ``docs/softmax_jacobian.md`` (collected by ``checks/companion/fidelity.py``).
_TESTS = "tests/test_softmax_jacobian.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement(
        "thm-variance",
        "SJ.1",
        "softmax_jacobian",
        'seed 002, "The gradient is a variance"',
        Kind.SEED,
        ("softmax-jacobian.variance-form", "softmax-jacobian.psd", "softmax-jacobian.kernel"),
        (_TESTS + "TestIdentitiesAreProvedSymbolically", _TESTS + "TestKernelIsMeasuredThroughTheProduct"),
    ),
    Statement(
        "thm-trace",
        "SJ.2",
        "softmax_jacobian",
        'seed 002, "The other two lines" (trace and kernel)',
        Kind.SEED,
        ("softmax-jacobian.trace",),
        (_TESTS + "TestIdentitiesAreProvedSymbolically",),
        "the seed gives no proof; that neither the trace nor the entropy determines the other is proved here",
    ),
    Statement(
        "thm-rank",
        "SJ.3",
        "softmax_jacobian",
        "none (seed 002 shows one zero eigenvalue; it states no rank)",
        Kind.NEW,
        ("softmax-jacobian.rank",),
        (_TESTS + "TestRankIsMeasuredFromJ",),
    ),
    Statement(
        "thm-secular",
        "SJ.4",
        "softmax_jacobian",
        "none (Golub 1973)",
        Kind.NEW,
        ("softmax-jacobian.upper-bound",),
        (_TESTS + "TestSpectralNormIsAccurate", _TESTS + "TestAccuracyAgainstTheRoundingModel"),
    ),
    Statement(
        "thm-bounds",
        "SJ.5",
        "softmax_jacobian",
        'seed 002, "How tight that is" (for m >= 1/2)',
        Kind.SEED,
        ("softmax-jacobian.lower-bound", "softmax-jacobian.upper-bound"),
        (_TESTS + "TestSeedFigures", _TESTS + "test_tightened_bounds_are_refuted_by_search"),
        "extended to every p, and to m = 1, with the case of equality",
    ),
    Statement(
        "thm-envelope",
        "SJ.6",
        "softmax_jacobian",
        "none",
        Kind.NEW,
        ("softmax-jacobian.envelope", "softmax-jacobian.envelope-attained"),
        (_TESTS + "test_each_mutant_is_refuted_with_a_certificate",),
    ),
    Statement(
        "thm-infimum",
        "SJ.7",
        "softmax_jacobian",
        "none",
        Kind.NEW,
        ("softmax-jacobian.lower-bound-approached",),
        (_TESTS + "test_tightened_bounds_are_refuted_by_search",),
        "needs m >= 1/(n + 1); m = 1 separately",
    ),
)
