"""What every family of claims shares: registration, the NumPy float64 backend the exact routes
read, the built-instance type, the ball loop at rising precision, planting, and the verdicts of
certified intervals and of two-sided enclosures.

A family module (``checks/claims/<family>.py``) defines its cases, strategies, quantities and
claims with these, and nothing in it repeats another family's machinery. What a new family must
provide, and what the registry-wide tests then hold it to, is listed in ``docs/design.md``
("Adding a family").
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from rankwall.checks import exact
from rankwall.checks.engine.backends import Backend, resolve, to_numpy
from rankwall.checks.engine.verdict import (
    Case,
    Certification,
    Judgement,
    Measurement,
    Relation,
)
from rankwall.theory._rounding import unit_roundoff

# --------------------------------------------------------------------------- registration


@dataclass(frozen=True)
class Cases:
    """Where a claim is checked: ``strategy()`` (Hypothesis, for ``search``), ``witnesses(V)``
    (constructed cases at vocabulary size V, for ``verify`` and the tests) and
    ``random_instances(V, n, seed)`` (drawn cases). ``boundary`` names the boundary classes the
    strategy must reach with real probability (the smallest sizes, ties, zeros, equality cases, large
    V), each a predicate on a case; a test measures the share of drawn cases in each. A family exports
    one per kind of case its claims range over, and a declared claim takes one
    (:func:`rankwall.checks.engine.quantities.declare`)."""

    strategy: Callable[[], Any]
    witnesses: Callable[[int], list[Case]]
    random_instances: Callable[[int, int, int], list[Case]] = lambda V, n, seed: []
    boundary: Mapping[str, Callable[[Case], bool]] = field(default_factory=dict)
    #: The family whose cases these are (a declared claim's quantities must be that family's).
    family: str | None = None
    #: The peak resident bytes per vocabulary entry of one instance at large V, beyond the process's
    #: base (measured by ``python benchmarks/sweep.py PATTERN --V 131072 --serial --each``, rounded up by
    #: a quarter), for ``verify``'s memory admission; None: the runner's default.
    bytes_per_entry: int | None = None

    def fields(self) -> dict[str, Any]:
        """The bundle as :class:`~rankwall.checks.engine.verdict.Claim` fields."""
        return {
            "strategy": self.strategy,
            "witnesses": self.witnesses,
            "random_instances": self.random_instances,
            "boundary_classes": dict(self.boundary),
            "bytes_per_entry": self.bytes_per_entry,
        }


@dataclass(frozen=True)
class Reference:
    """Both sides of a claim on one case computed the slow, obviously right way, sharing no code with
    its fast measure beyond the instance (dense matrices in exact rationals or 200-bit arithmetic, an
    exact rank, an exhaustive enumeration), in the orientation of the measurement (``lhs <= rhs`` or
    ``lhs == rhs``): numbers (int, Fraction, mpmath.mpf). For a rank claim one side is the rank."""

    lhs: Any
    rhs: Any
    method: str


# --------------------------------------------------------------------------- backends and built cases


@functools.cache
def numpy_float64() -> Backend:
    """NumPy float64: the default backend, and the one the exact routes read the instance from."""
    return resolve("numpy")


@dataclass(frozen=True)
class Built:
    """A case computed in a backend (a family subclasses this with its arrays): the backend, and
    from it the unit roundoff of its dtype and a label naming where the measurement ran."""

    backend: Backend

    @property
    def u(self) -> float:
        return unit_roundoff(self.backend.dtype)

    @property
    def label(self) -> str:
        return f"{self.backend.name} {self.backend.dtype_name}"


def scalar(x: Any) -> float:
    """The first entry of a backend array (or a number) as a Python float."""
    return float(to_numpy(x).reshape(-1)[0]) if not isinstance(x, int | float) else float(x)


# --------------------------------------------------------------------------- planting (the meta-tests' hook)


def planted_side(value: Any, factor: Fraction) -> Any:
    """The stated side v of an identity moved by F (the meta-tests' hook; F = 1 leaves it):
    F·(v + 1) − 1, which differs from v for every F ≠ 1 and v ≠ −1, so that a side that is zero by
    its form moves too. Exact for integers and Fractions (an integer stays one for an integer F);
    a float is moved in floating point."""
    if factor == 1:
        return value
    if isinstance(value, float):
        return float(factor) * (value + 1) - 1
    moved = factor * (value + 1) - 1
    return int(moved) if isinstance(value, int) and moved.denominator == 1 else moved


def planted_exactly(value: Any, factor: Fraction) -> Any:
    """:func:`planted_side` for an exact rational or a ball: F·(v + 1) − 1."""
    return value if factor == 1 else exact.fmpq_of(factor) * (value + 1) - 1


# --------------------------------------------------------------------------- judgements


def judge_sides(sides: Callable[[], tuple[Any, Any, bool]]) -> Judgement:
    """Evaluate ``sides() = (lhs, rhs, is_exact)`` exactly, or in balls at rising precision
    (:data:`rankwall.checks.exact.BALL_PRECISIONS`) until the sign of ``rhs - lhs`` is decided; a
    ball can never show two sides equal, so an undecided sign stays ``None``."""
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


def two_sided(m: Measurement, relation: Relation | str) -> Judgement:
    """The judgement of a measurement whose sides are two-sided enclosures: the sign of rhs - lhs
    where the margin is beyond the tolerance in either direction (the exact sides then lie in
    disjoint intervals; for an identity, a violation), else undecided."""
    margin = m.rhs - m.lhs
    if not math.isfinite(margin) or abs(margin) <= m.tolerance:
        return Judgement(m.lhs, m.rhs, None, f"{m.method} (inside its bound: undecided)", m.tolerance, m.certificate)
    sign = 1 if margin > 0 and Relation(relation) is Relation.AT_MOST else -1
    method = f"{m.method}; two-sided rounding-model margin"
    return Judgement(m.lhs, m.rhs, sign, method, m.tolerance, m.certificate, Certification.TWO_SIDED)


def left_to_the_exact_route(method: str, why: str, certificate: dict[str, Any] | None = None) -> Measurement:
    """A float measurement that decides nothing (NaN sides never clear a tolerance), so that the
    exact judge decides instead, with the reason: a side below the normal range, a count beyond the
    dtype's integers."""
    nan = math.nan
    return Measurement(nan, nan, nan, f"{method}: {why}, left to the exact route", certificate)
