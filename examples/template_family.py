"""A template family, log-sum-exp: the smallest complete family, shown whole in docs/design.md.

A case ``Logits(V, gap, seed, shift)`` is the row z = gap·r of V logits, r uniform in [0, 1) from
``seed``, with a shift c. Its exact object is the row as the backend holds it, read as exact rationals,
and c read as the rational its float64 names. lse(z) = log Σ exp z_i. Two claims:

- ``log-sum-exp.above-max`` (a lower bound): lse(z) ≥ max z, strict for V ≥ 2;
- ``log-sum-exp.shift`` (an identity): lse(z + c) = lse(z) + c, the log-sum-exp trick.

Exactly, lse(z) = max z + L with one atom L = log Σ exp(z_i − max z) (a ball from log1p, so it
stays positive where exp(z_i − max z) underflows in floats); lse(z + c) is (max z + c) + L, so the
identity holds as a form in L. A shipped family also has a docs page, STATEMENTS and its tests.

    rankwall verify --claims examples/template_family.py log-sum-exp.shift
    rankwall search --claims examples/template_family.py log-sum-exp.above-max --tighten 2   # exit 1
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import flint
import mpmath
import numpy as np
from hypothesis import strategies as st

from rankwall import Case, Cases, InputError, Measured, declare, log, quantity
from rankwall.checks.engine.backends import float64_copy
from rankwall.checks.engine.reals import Real, atoms
from rankwall.checks.engine.toolkit import scalar
from rankwall.theory._rounding import gamma, smallest_normal, unit_roundoff

FAMILY = "log-sum-exp"
U64 = unit_roundoff("float64")


@dataclass(frozen=True)
class Logits(Case):
    KIND: ClassVar[str] = "template-logits"
    V: int
    gap: float
    seed: int = 0
    shift: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.V, bool) or not isinstance(self.V, int) or self.V < 2:
            raise InputError(f"V: {self.V!r} is out of range (need an integer >= 2)")
        if not (math.isfinite(self.gap) and self.gap >= 0 and math.isfinite(self.shift)):
            raise InputError(f"gap, shift: need a finite gap >= 0 and a finite shift, got {self.gap}, {self.shift}")

    def row(self) -> np.ndarray:
        return self.gap * np.random.default_rng(self.seed).random(self.V)


def _row(ctx: Any) -> Any:
    return ctx.once("row", lambda: ctx.backend.asarray(ctx.case.row()))


def _exact_row(ctx: Any) -> list[Fraction]:
    return ctx.once("exact row", lambda: [Fraction(float(x)) for x in float64_copy(_row(ctx))])


# --------------------------------------------------------------------------- float routes
def _measured_lse(z: Any, backend: Any, moved: float = 0.0) -> Measured:
    """max z + log Σ exp(z − max z) in the backend. The sum is within η = γ_{2V+8}(u) + V·tiny of the
    exact one, relatively (tolerance.softmax_relative_error's argument; tiny: an underflowed term), so
    its log within −log(1 − η); log and + round once each (log to one ulp); ``moved``: an entrywise
    perturbation of z, which lse, 1-Lipschitz in the max norm, passes on."""
    xp, u, V = backend.xp, unit_roundoff(backend.dtype), z.shape[0]
    top = xp.max(z)
    log_total = xp.log(xp.sum(xp.exp(z - top)))
    value = scalar(top + log_total)
    eta = gamma(2 * V + 8, u) + V * smallest_normal(backend.dtype)
    if not math.isfinite(value) or eta >= 1:
        return Measured(math.nan, math.inf)  # no bound: the exact route decides
    error = moved - math.log1p(-eta) + 2 * u * (abs(scalar(log_total)) + abs(value))
    return Measured(value, error * (1 + gamma(4, U64)))  # the bound's own float64 roundings, outward


def _measured_shifted(ctx: Any) -> Measured:
    z, c, u = _row(ctx), ctx.case.shift, unit_roundoff(ctx.backend.dtype)
    moved = u * (scalar(ctx.backend.xp.max(ctx.backend.xp.abs(z))) + 3 * abs(c))  # c read in the dtype, z + c rounded
    return _measured_lse(z + c, ctx.backend, moved)


# --------------------------------------------------------------------------- exact routes: one atom L
def _atom(ctx: Any) -> Real:
    """L = log Σ exp(z_i − max z) as a ball at the working precision, and as the symbol L."""

    def compute() -> Real:
        z = _exact_row(ctx)
        rest = [x - max(z) for x in z]
        rest.remove(0)  # one top entry: exp(0) = 1, the 1 of log1p
        ball = sum((flint.arb(flint.fmpq(d.numerator, d.denominator)).exp() for d in rest), flint.arb(0)).log1p()
        (L,) = atoms([ball], names=("L",))  # the symbol L at this ball: sums and differences in L cancel exactly
        return L

    return ctx.once(("L", flint.ctx.prec), compute)


# --------------------------------------------------------------------------- references: mpmath, no shared code
def _reference_lse(ctx: Any, c: Any = 0) -> Any:
    return mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(x)) + c) for x in float64_copy(_row(ctx))))


# --------------------------------------------------------------------------- quantities
size = quantity(
    "V",
    lambda ctx: Measured(float(ctx.case.V), 0.0),
    lambda ctx: ctx.case.V,
    reference=lambda ctx: len(float64_copy(_row(ctx))),
    family=FAMILY,
    doc="the number of logits",
)
top = quantity(
    "max z",
    lambda ctx: Measured(scalar(ctx.backend.xp.max(_row(ctx))), 0.0),  # a max does not round
    lambda ctx: max(_exact_row(ctx)),
    reference=lambda ctx: Fraction(max(float(x) for x in float64_copy(_row(ctx)))),
    family=FAMILY,
    doc="the largest logit",
    exact_doc="a rational",
)
shift = quantity(
    "c",
    lambda ctx: Measured(ctx.case.shift, 0.0),
    lambda ctx: Fraction(ctx.case.shift),
    reference=lambda ctx: Fraction(ctx.case.shift),
    family=FAMILY,
    doc="the case's shift c",
    exact_doc="a rational",
)
lse = quantity(
    "lse(z)",
    lambda ctx: _measured_lse(_row(ctx), ctx.backend),
    lambda ctx: Real.of(max(_exact_row(ctx))) + _atom(ctx),
    reference=_reference_lse,
    family=FAMILY,
    doc="log Σ exp z_i",
    exact_doc="max z + L, a form in the atom L",
)
shifted_lse = quantity(
    "lse(z + c)",
    _measured_shifted,
    lambda ctx: Real.of(max(_exact_row(ctx)) + Fraction(ctx.case.shift)) + _atom(ctx),
    reference=lambda ctx: _reference_lse(ctx, mpmath.mpf(ctx.case.shift)),
    family=FAMILY,
    doc="log Σ exp(z_i + c), the shift added in the backend's floats",
    exact_doc="(max z + c) + L, a form in the atom L",
)


# --------------------------------------------------------------------------- cases
def witnesses(V: int) -> list[Logits]:
    return [Logits(V, 0.0, 0, 0.5), Logits(V, 3.0, 1, -2.25), Logits(V, 2000.0, 2, 1e3), Logits(V, 30.0, 3, 0.0)]


def random_instances(V: int, n: int, seed: int) -> list[Logits]:
    rng = np.random.default_rng(seed)
    return [
        Logits(V, float(10 ** rng.uniform(-1, 3)), int(rng.integers(2**16)), float(rng.normal(0, 10))) for _ in range(n)
    ]


def strategy() -> Any:
    return st.builds(
        Logits,
        V=st.one_of(st.integers(2, 64), st.just(2), st.just(1024)),
        gap=st.one_of(st.just(0.0), st.floats(0, 10), st.floats(0, 1e4)),
        seed=st.integers(0, 2**16),
        shift=st.one_of(st.just(0.0), st.floats(-1e3, 1e3)),
    )


BOUNDARY = {
    "V = 2": lambda c: c.V == 2,
    "ties (gap = 0)": lambda c: c.gap == 0,
    "exp underflows in float64": lambda c: np.ptp(c.row()) > 746,
    "no shift (c = 0)": lambda c: c.shift == 0,
    "V >= 1024": lambda c: c.V >= 1024,
}
rows = Cases(strategy, witnesses, random_instances, BOUNDARY, family=FAMILY)

# --------------------------------------------------------------------------- claims and their mutants
SOURCE = "rankwall (the template family of docs/design.md)"
above_max = declare(
    "log-sum-exp.above-max",
    statement="lse(z) ≥ max z",
    lhs=lse,
    relation=">=",
    rhs=top,
    cases=rows,
    source=SOURCE,
    default_V=64,
)
above_max.with_mutant("log-v-below", "lse(z) ≥ max z + log V (false unless every logit ties)", rhs=top + log(size))
shift_identity = declare(
    "log-sum-exp.shift",
    statement="lse(z + c) = lse(z) + c",
    lhs=shifted_lse,
    relation="==",
    rhs=lse + shift,
    cases=rows,
    source=SOURCE,
    default_V=64,
)
shift_identity.with_mutant("shift-invariant", "lse(z + c) = lse(z) (softmax is shift-invariant; lse is not)", rhs=lse)
