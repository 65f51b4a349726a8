"""Measure against reference (issue 18): the checks the registry-wide tests and each family's planted
wrong measure share. A module of its own, importable by name from any test module (like
``backend_specs``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import mpmath
from hypothesis import HealthCheck, Phase, given, settings

from rankwall.checks import exact
from rankwall.checks.engine.verdict import is_numerical_failure
from rankwall.theory.validation import InputError

#: The largest vocabulary the references run at (dense matrices in exact or 200-bit arithmetic).
REFERENCE_V = 64
#: The relative error of a side reported as a float64 number, beyond the measurement's own bound:
#: two roundings at float64's unit roundoff (the value, and its conversion for the report).
FLOAT64_REPORTING = 2 * 2.0**-53
#: The sizes of the witnesses compared with their references.
REFERENCE_SIZES = (2, 3, 16, 64)


def drawn(strategy: Any, n: int) -> list[Any]:
    """``n`` cases drawn from a Hypothesis strategy, derandomized (the same cases on every run)."""
    found: list[Any] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(strategy)
    def collect(case: Any) -> None:
        found.append(case)

    collect()
    return found


def reference_cases(claim: Any, drawn_examples: int = 12, sizes: tuple[int, ...] = REFERENCE_SIZES) -> list[Any]:
    """The witnesses at the reference sizes, a few random instances, and cases drawn from the claim's
    strategy, all with a vocabulary of at most :data:`REFERENCE_V`."""
    cases = []
    for V in sizes:
        cases += claim.witnesses(V) + claim.random_instances(V, 2, V)
    cases += drawn(claim.strategy(), drawn_examples)
    small = [c for c in cases if (c.vocabulary or 0) <= REFERENCE_V]
    return list(dict.fromkeys(small))


def _number(x: Any) -> mpmath.mpf:
    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpf(x)


def disagreement(claim: Any, case: Any, backend: Any) -> str | None:
    """Why the claim's measure of ``case`` on ``backend`` disagrees with its reference, or ``None``.

    A rank (a certificate with ``rank_lower``/``rank_upper``) must enclose the reference's rank, and the
    stated side must be the reference's. Real sides must each lie within the measurement's tolerance
    of the reference (the tolerance bounds the error of the margin, so of each side). A measurement
    left to the exact route (NaN sides) is compared through the judge, within its radius. A case
    outside its domain (or refused by its constructor), or a backend's numerical failure, is no comparison."""
    try:
        measured = claim.measure(case, backend, Fraction(1))
    except InputError:  # a draw the constructor refuses, or a case outside its domain: no instance
        return None
    except Exception as error:
        if is_numerical_failure(error):
            return None
        raise
    with mpmath.workprec(200):
        reference = claim.reference(case, backend)
        certificate = measured.certificate or {}
        if "rank_lower" in certificate:
            rank_side, stated_side = "lhs", "rhs"
            rank, stated = getattr(reference, rank_side), getattr(reference, stated_side)
            lo, hi = certificate["rank_lower"], certificate["rank_upper"]
            measured_stated = getattr(measured, stated_side)
            if lo <= hi and not lo <= rank <= hi:
                return f"rank {rank} ({reference.method}) outside the certified [{lo}, {hi}]"
            if not math.isnan(measured_stated) and _number(measured_stated) != _number(stated):
                return f"stated side {measured_stated} against the reference's {stated}"
            return None
        sides, slack, where = (measured.lhs, measured.rhs), measured.tolerance, "measure"
        if math.isnan(measured.lhs) or math.isnan(measured.rhs):
            judged = claim.judge_exactly(case, Fraction(1), backend)
            sides, slack, where = (judged.lhs, judged.rhs), judged.radius, "judge"
        for name, value, exact in zip(("lhs", "rhs"), sides, (reference.lhs, reference.rhs), strict=True):
            if math.isnan(value):
                continue
            error = abs(_number(value) - _number(exact))
            # the reported sides are float64 numbers: their own rounding (and underflow) besides the bound
            allowed = _number(slack) + FLOAT64_REPORTING * abs(_number(exact)) + mpmath.mpf(2) ** -1074
            if error > allowed:
                return (
                    f"{where} {name} = {value!r} is {mpmath.nstr(error, 3)} from the reference "
                    f"{mpmath.nstr(_number(exact), 17)} ({reference.method}), beyond {mpmath.nstr(allowed, 3)}"
                )
    return None


def disagreements(claim: Any, cases: Iterable[Any], backend: Any) -> list[str]:
    """Every disagreement of the claim's measure with its reference over ``cases``."""
    found = []
    for case in cases:
        why = disagreement(claim, case, backend)
        if why is not None:
            found.append(f"{case.to_json()}: {why}")
    return found


def quantity_disagreement(quantity: Any, case: Any, backend: Any) -> str | None:
    """Why a base quantity's float measure or exact value on ``case`` (built in ``backend``) does not
    enclose its reference, or ``None``: a measured value must lie within its error bound of the
    reference (an integer interval must contain it), and the exact value at 128 bits must contain it
    (a rational must equal it, a ball must hold it, beyond the reference's own 2^-200 relative error).
    A case its constructor refuses, or outside a quantity's reach (no direction), is no comparison."""
    from rankwall.checks.engine.quantities import REFERENCE_BITS, Approximately, Context, Measured
    from rankwall.checks.engine.verdict import RankInterval

    ctx = Context(case, backend)
    try:
        measured = quantity.measure(ctx)
        with mpmath.workprec(REFERENCE_BITS):
            reference = quantity.reference(ctx)
        with exact.precision(128):
            value = quantity.exact(ctx)
    except InputError:
        return None
    except Exception as error:
        if is_numerical_failure(error):
            return None
        raise
    if reference is None:
        return f"{quantity}: no reference"
    with mpmath.workprec(REFERENCE_BITS):
        approximate = isinstance(reference, Approximately)
        ref = _number(reference.value if approximate else reference)
        slack = abs(ref) * mpmath.mpf(2) ** -200 + (_number(reference.error) if approximate else 0)
        if isinstance(measured, RankInterval):
            if measured.lo <= measured.hi and not measured.lo <= ref <= measured.hi:
                return f"{quantity}: reference {ref} outside the measured [{measured.lo}, {measured.hi}]"
        elif isinstance(measured, Measured) and measured.bounded:
            error = abs(_number(measured.value) - ref)
            if error > _number(measured.error) * (1 + FLOAT64_REPORTING) + slack:
                return (
                    f"{quantity}: measured {measured.value!r} is {mpmath.nstr(error, 3)} from the reference "
                    f"{mpmath.nstr(ref, 17)}, beyond its bound {measured.error!r}"
                )
        if isinstance(value, RankInterval):
            if value.lo <= value.hi and not value.lo <= ref <= value.hi:
                return f"{quantity}: reference {ref} outside the exact [{value.lo}, {value.hi}]"
        elif value is not None:
            if value.rational:
                exact_value = Fraction(int(value.value.p), int(value.value.q))
                exactly_different = slack == 0 and not approximate and exact_value != reference
                if abs(_number(exact_value) - ref) > slack or exactly_different:
                    return f"{quantity}: exact {exact_value} against the reference {mpmath.nstr(ref, 17)}"
            else:
                ball = value.ball
                if not ball.is_finite():
                    return None  # an unbounded ball holds every reference
                with exact.precision(REFERENCE_BITS):  # read the ends without rounding them to the default 53 bits
                    ends = (ball.lower(), ball.upper())
                low, high = (mpmath.mpf(tuple(int(x) for x in end.mid().man_exp())) for end in ends)
                if not low - slack <= ref <= high + slack:
                    return f"{quantity}: reference {mpmath.nstr(ref, 17)} outside the exact ball {ball}"
    return None


def quantity_disagreements(quantity: Any, cases: Iterable[Any], backend: Any) -> list[str]:
    """Every :func:`quantity_disagreement` over ``cases``."""
    found = []
    for case in cases:
        why = quantity_disagreement(quantity, case, backend)
        if why is not None:
            found.append(f"{case.to_json()}: {why}")
    return found
