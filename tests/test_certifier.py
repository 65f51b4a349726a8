"""The certifier under test (issue 26): Hypothesis generates *statements* as well as instances.

For each family whose claims are declared over its public quantities, a statement is an expression over
the family's quantities (``+ − × ÷``, ``minimum``, ``maximum``, integer powers, ``abs``, ``sqrt``,
``log``, ``exp``, rational constants, some chosen within a few ulps of the other side's value, and
rewritings that leave a value unchanged), a relation, and another expression; the instance is drawn from
one of the family's ``Cases`` with every boundary class its strategy reaches (underflowed and
subnormal tails, ties, m = 1/2, V = 2, the equality witnesses), at a vocabulary small enough for the
references. Each certified verdict is compared with an independent evaluation of the same exact
instance: the quantities' references (dense matrices in Fractions, or mpmath at the row's dynamic range)
combined here in mpmath interval arithmetic at 256 bits, sharing no code with the measures and exact
routes. ``violated`` is a contradiction where that evaluation shows the statement true, ``holds`` where
it shows it false; ``inconclusive`` is allowed and counted. 500 statements per family in the default run,
10,000 under ``--runslow``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections import Counter
from fractions import Fraction
from typing import Any

import mpmath
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rankwall.checks.claims import FAMILY_MODULES
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.quantities import (
    REFERENCE_BITS,
    Approximately,
    Base,
    Combination,
    Constant,
    Context,
    UndefinedStatement,
    declare,
    exp,
    log,
    maximum,
    minimum,
    sqrt,
)
from rankwall.checks.engine.toolkit import Cases
from rankwall.checks.engine.verdict import OutsideDomain, is_numerical_failure
from rankwall.theory.validation import InputError

NUMPY = resolve("numpy")
iv = mpmath.iv
#: The largest vocabulary the statements are checked at (dense references in exact or high precision).
CERTIFIER_V = 12
#: The relative error a reference in mpmath carries (computed at 256 bits or more; see the families).
REFERENCE_RELATIVE_ERROR = mpmath.mpf(2) ** -200
#: Statements per family: in the default run, and under --runslow.
DEFAULT_STATEMENTS, SLOW_STATEMENTS = 500, 10_000


# --------------------------------------------------------------------------- the families under test


def _bundles(module: Any) -> list[tuple[str, Cases]]:
    return [(name, getattr(module, name)) for name in module.__all__ if isinstance(getattr(module, name), Cases)]


def _quantities(module: Any) -> list[Base]:
    found = [getattr(module, name) for name in module.__all__ if isinstance(getattr(module, name), Base)]
    return [q for q in found if q.reference_fn is not None]


def _applicable(quantities: list[Base], cases: Cases) -> list[Base]:
    """The quantities that read these cases: measured without an InputError on the first few witnesses."""
    probes = [c for c in cases.witnesses(6)[:3] if (c.vocabulary or 0) <= CERTIFIER_V]
    usable = []
    for q in quantities:
        try:
            for case in probes:
                q.measure(Context(case, NUMPY))
            usable.append(q)
        except OutsideDomain:
            usable.append(q)
        except InputError:
            continue
    return usable


def declared_families() -> list[tuple[str, list[tuple[str, Cases, list[Base]]]]]:
    """Each family whose quantities all have references, with its Cases bundles and their quantities."""
    families = []
    for module in FAMILY_MODULES:
        names = getattr(module, "__all__", [])
        quantities = [getattr(module, n) for n in names if isinstance(getattr(module, n), Base)]
        if not quantities or any(q.reference_fn is None for q in quantities):
            continue  # not yet declared over quantities
        name = quantities[0].family
        bundles = [(b, cases, _applicable(_quantities(module), cases)) for b, cases in _bundles(module)]
        families.append((name, [(b, c, qs) for b, c, qs in bundles if qs]))
    return families


FAMILIES = declared_families()


# --------------------------------------------------------------------------- statements

SMALL_CONSTANTS = [Fraction(n) for n in (0, 1, 2, -1, 3)] + [Fraction(1, 2), Fraction(3, 2), Fraction(11, 12)]


UNARY = (abs, sqrt, log, exp)
BINARY = (
    lambda a, b: a + b,
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: a / b,
    minimum,
    maximum,
)


def expressions(bases: list[Base]) -> st.SearchStrategy[Any]:
    """Expressions over ``bases``: trees of at most three levels over every operation of the
    quantities' algebra (a leaf is a base quantity two times in three, else a small constant)."""
    leaves = [*bases, *bases, *(Constant(c) for c in SMALL_CONSTANTS)]

    @st.composite
    def tree(draw: Any, depth: int = 0) -> Any:
        shape = draw(st.integers(0, 9)) if depth < 3 else 0
        if shape <= 3:
            return draw(st.sampled_from(leaves))
        if shape <= 6:
            return draw(st.sampled_from(BINARY))(draw(tree(depth + 1)), draw(tree(depth + 1)))
        if shape == 7:
            return draw(tree(depth + 1)) ** draw(st.sampled_from([2, 3, -1]))
        return draw(st.sampled_from(UNARY))(draw(tree(depth + 1)))

    return tree()


def rewritten(expression: Any, how: int) -> Any:
    """The expression written another way with the same value (where it has one)."""
    return [
        (expression + 1) - 1,
        2 * expression / 2,
        expression * 1,
        Combination("neg", (Combination("neg", (expression,)),)),
        minimum(expression, expression),
        sqrt(expression**2),
    ][how]


def constant_near(value: Any, shift: int, sign: int) -> Constant | None:
    """A rational within 2^-shift (relatively) of ``value`` (an mpmath interval), or None."""
    if value is None or not (math.isfinite(float(value.a)) and math.isfinite(float(value.b))):
        return None
    man, exponent = mpmath.mpf(value.mid).man_exp
    if abs(int(exponent)) > 4000:
        return None  # a constant of thousands of digits tests nothing the others do not
    mid = Fraction(int(man)) * Fraction(2) ** int(exponent)
    return Constant(mid + sign * abs(mid) * Fraction(1, 2**shift) if shift else mid)


# --------------------------------------------------------------------------- the independent evaluation


@contextlib.contextmanager
def interval_precision(bits: int = REFERENCE_BITS) -> Any:
    """mpmath's interval context at ``bits`` (its precision is its own, not mp.prec's)."""
    old = iv.prec
    iv.prec = bits
    try:
        yield
    finally:
        iv.prec = old


def interval_of(q: Any, ctx: Context) -> Any:
    """The value of an expression on the context's instance from the base quantities' references, in
    mpmath interval arithmetic (``None`` where a reference is undefined)."""
    if isinstance(q, Constant):
        return iv.mpf(q.value.numerator) / q.value.denominator
    if isinstance(q, Base):
        value = q.reference(ctx)
        if value is None:
            return None
        if isinstance(value, int | Fraction):
            value = Fraction(value)
            return iv.mpf(value.numerator) / value.denominator
        error = value.error if isinstance(value, Approximately) else 0
        value = value.value if isinstance(value, Approximately) else value
        radius = abs(value) * REFERENCE_RELATIVE_ERROR + error + mpmath.mpf(2) ** -20000
        return iv.mpf([value - radius, value + radius])
    parts = [interval_of(x, ctx) for x in q.operands]
    if any(p is None for p in parts):
        return None
    return _interval_operation(q, parts)


def _interval_operation(q: Combination, parts: list[Any]) -> Any:
    op = q.op
    if op == "min" or op == "max":
        a, b = parts
        pick = min if op == "min" else max
        return iv.mpf([pick(a.a, b.a), pick(a.b, b.b)])
    if op == "neg":
        return -parts[0]
    if op == "abs":
        x = parts[0]
        low = 0 if x.a <= 0 <= x.b else min(abs(x.a), abs(x.b))
        return iv.mpf([low, max(abs(x.a), abs(x.b))])
    if op == "sqrt":
        return None if parts[0].b < 0 else iv.sqrt(iv.mpf([max(parts[0].a, 0), parts[0].b]))
    if op == "log":
        return None if parts[0].a <= 0 else iv.log(parts[0])
    if op == "exp":
        return iv.exp(parts[0]) if parts[0].b < 10**6 else None
    a, b = parts
    if op == "^":
        n = int(q.operands[1].value)
        if n < 0:
            return None if b.a <= 0 <= b.b and False else (None if a.a <= 0 <= a.b else 1 / a ** (-n))
        return a**n
    if op == "/":
        return None if b.a <= 0 <= b.b else a / b
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def truth(lhs: Any, rhs: Any, relation: str) -> str:
    """What the references say of ``lhs relation rhs``: "true", "false" or "unknown"."""
    if lhs is None or rhs is None:
        return "unknown"
    difference = lhs - rhs
    if not (math.isfinite(float(difference.a)) and math.isfinite(float(difference.b))):
        return "unknown"
    above, below, exactly_equal = difference.a > 0, difference.b < 0, difference.a == difference.b == 0
    if relation == "==":
        return "false" if above or below else "true" if exactly_equal else "unknown"
    if relation == "<=":
        return "false" if above else "true" if below or exactly_equal or difference.b <= 0 else "unknown"
    return "false" if below else "true" if above or exactly_equal or difference.a >= 0 else "unknown"


# --------------------------------------------------------------------------- the test


@st.composite
def statements(draw: Any, cases: Any, terms: Any) -> tuple[Any, str, Any, Any, str]:
    """(case, relation, lhs, rhs, how rhs was made) from a case strategy and an expression strategy."""
    case = draw(cases)
    assume((case.vocabulary or 0) <= CERTIFIER_V)
    lhs = draw(terms)
    relation = draw(st.sampled_from(["<=", ">=", "=="]))
    kind = draw(st.sampled_from(["expression", "near", "near", "rewritten"]))
    rhs = None
    if kind == "near":
        with mpmath.workprec(REFERENCE_BITS), interval_precision():
            try:
                value = interval_of(lhs, Context(case, NUMPY))
            except (InputError, ZeroDivisionError, ValueError):
                value = None
        shift = draw(st.sampled_from([0, 0, 10, 30, 52, 60, 100, 150]))
        rhs = constant_near(value, shift, draw(st.sampled_from([1, -1])))
    elif kind == "rewritten":
        rhs = rewritten(lhs, draw(st.integers(0, 5)))
    if rhs is None:
        kind, rhs = "expression", draw(terms)
    return case, relation, lhs, rhs, kind


def certify(case: Any, relation: str, lhs: Any, rhs: Any) -> tuple[str, str]:
    """(the verdict's status, or why there is none; what the references say)."""
    claim = declare("certifier.statement", statement="generated", lhs=lhs, relation=relation, rhs=rhs,
                    cases=Cases(lambda: st.just(case), lambda V: [case]), register=False)  # fmt: skip
    try:
        verdict = claim.check(case, NUMPY)
    except OutsideDomain:
        return "outside the domain", "unknown"
    except UndefinedStatement:
        return "undefined", "unknown"
    except InputError:
        return "refused", "unknown"
    except Exception as error:
        if is_numerical_failure(error):
            return "numerical failure", "unknown"
        raise
    ctx = Context(case, NUMPY)
    with mpmath.workprec(REFERENCE_BITS), interval_precision():
        said = truth(interval_of(lhs, ctx), interval_of(rhs, ctx), relation)
    return verdict.status.value, said


CONTRADICTIONS = {("holds", "false"), ("violated", "true")}
COUNTS: dict[str, Counter] = {}


def _budget(config: pytest.Config) -> int:
    return SLOW_STATEMENTS if config.getoption("--runslow") else DEFAULT_STATEMENTS


def _run_bundle(where: str, cases: Cases, bases: list[Base], examples: int, counts: Counter, found: list) -> None:
    """``examples`` statements over one Cases bundle: their counts, and the contradictions found."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(statements(cases.strategy(), expressions(bases)))
    def check(drawn: tuple[Any, str, Any, Any, str]) -> None:
        case, relation, lhs, rhs, kind = drawn
        status, said = certify(case, relation, lhs, rhs)
        counts["statements"] += 1
        counts[status] += 1
        counts[f"{status} / references {said}"] += 1
        if (status, said) in CONTRADICTIONS:
            found.append(f"{where}: {case.to_json()}: {lhs} {relation} {rhs} ({kind}): {status}, references {said}")

    check()


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f[0])
def test_no_certified_verdict_contradicts_the_references(family, request):
    name, bundles = family
    counts = COUNTS.setdefault(name, Counter())
    found: list[str] = []
    per_bundle = max(1, _budget(request.config) // len(bundles))
    for bundle_name, cases, bases in bundles:
        _run_bundle(bundle_name, cases, bases, per_bundle, counts, found)
    _report(name, counts)
    assert counts["statements"] >= per_bundle * len(bundles) * 0.9, dict(counts)
    assert not found, found[:5]


def _report(name: str, counts: Counter) -> None:
    """The counts for the closing note: written where ``RANKWALL_CERTIFIER_REPORT`` points, if set."""
    target = os.environ.get("RANKWALL_CERTIFIER_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps({"family": name, **counts}, ensure_ascii=False) + "\n")


def test_every_family_is_under_test():
    """Every family's claims are declared over quantities with references, so every family is here."""
    names = {name for name, _ in FAMILIES}
    expected = {m.__name__.rsplit(".", 1)[-1].replace("_", "-") for m in FAMILY_MODULES}
    assert names == expected, expected - names


def test_the_comparison_can_find_a_contradiction():
    """The test can fail: a verdict of a statement the references refute, planted, is caught."""
    sj_bundles = dict((n, b) for n, b in FAMILIES).get("softmax-jacobian")
    assert sj_bundles is not None
    _, cases, bases = sj_bundles[0]
    case = cases.witnesses(4)[0]
    top = next(b for b in bases if b.name == "m")
    ctx = Context(case, NUMPY)
    with mpmath.workprec(REFERENCE_BITS), interval_precision():
        said = truth(interval_of(top, ctx), interval_of(Constant(Fraction(2)), ctx), ">=")
    assert said == "false" and ("holds", said) in CONTRADICTIONS


def test_rewritings_keep_the_value():
    """The rewritten right sides are the left side's value (so a "violated" on them is always wrong)."""
    x = Constant(Fraction(3, 7))
    with interval_precision():
        for how in range(6):
            value = interval_of(rewritten(x, how), None)
            assert value.a <= iv.mpf(3) / 7 <= value.b, (how, value)
