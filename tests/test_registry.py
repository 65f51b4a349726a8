"""Registry-wide meta-tests (issue 11): they enumerate the registry, not a family, so a claim
added later is held to the same standard. Every claim states a bound direction or is an
identity, has a mutant, and can fail: its bound, halved or doubled, is refuted by the search, and a
wrong measured value planted through a test hook (a bound past the measurement, an identity's stated
side moved) is never reported to hold."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest

from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.quantities import Constant, Sides
from rankwall.checks.engine.verdict import REGISTRY, Relation, Status, tightened_integer_bound
from rankwall.checks.run.search import search
from rankwall.checks.run.strategies import CI_SEARCH_BUDGET

NUMPY = resolve("numpy")
CLAIMS = list(REGISTRY)
BOUND_CLAIMS = [c for c in CLAIMS if c.direction is not None]
#: The factor that makes a bound claim false: half an upper bound, twice a lower bound.
FALSIFYING = {"upper": Fraction(1, 2), "lower": Fraction(2)}


def registry_V(claim) -> int:
    """The size of the witnesses these tests check: 64, or the claim's ``default_V`` where that is
    cut below it for cost."""
    return min(64, claim.default_V)


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_is_a_bound_or_an_identity(claim):
    if claim.relation is Relation.EQUAL:
        assert claim.direction is None, f"{claim.id}: an identity has no bound direction"
    else:
        assert claim.direction in ("upper", "lower"), f"{claim.id}: an inequality names its bound direction"


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_has_a_mutant(claim):
    assert claim.mutants, f"{claim.id} has no planted false variant"


@pytest.mark.parametrize("claim", BOUND_CLAIMS, ids=lambda c: c.id)
def test_every_bound_is_refuted_when_halved_or_doubled(claim):
    factor = FALSIFYING[claim.direction]
    result = search(claim, NUMPY, tighten=factor, budget=CI_SEARCH_BUDGET, seed=0)
    assert result.counterexample is not None, f"{claim.id} x {factor} survived {result.examples} examples"
    assert result.counterexample.status is Status.VIOLATED


@pytest.mark.parametrize(
    ("bound", "factor", "relation", "tightened"),
    [
        (8, Fraction(1), Relation.AT_MOST, 8),
        (8, Fraction(1, 2), Relation.AT_MOST, 3),
        (8, Fraction(99, 100), Relation.AT_MOST, 7),
        (7, Fraction(1, 2), Relation.AT_MOST, 3),
        (8, Fraction(1), Relation.AT_LEAST, 8),
        (8, Fraction(2), Relation.AT_LEAST, 17),
        (8, Fraction(101, 100), Relation.AT_LEAST, 9),
        (0, Fraction(2), Relation.AT_LEAST, 1),
    ],
)
def test_integer_bounds_tighten_strictly(bound, factor, relation, tightened):
    """A tightened integer bound is strictly sharper than F·b, so F = 1.01 still asks for more."""
    assert tightened_integer_bound(bound, factor, relation) == tightened


def sides_agree(verdict, relation) -> bool:
    """Whether a decided verdict agrees with the sides it reports: a judge cannot decide by fiat.
    ``tolerance`` is the float margin's bound or the exact route's radius; NaN sides never agree."""
    margin, slack = relation.slack(verdict.lhs, verdict.rhs), verdict.tolerance
    if not (math.isfinite(margin) and math.isfinite(slack)):
        return False
    if relation.is_bound:
        return margin >= -slack if verdict.status is Status.HOLDS else margin < slack
    return abs(margin) <= slack if verdict.status is Status.HOLDS else abs(margin) > 0


@pytest.mark.parametrize("claim", CLAIMS + [m for c in CLAIMS for m in c.mutants.values()], ids=lambda c: c.id)
def test_every_decided_verdict_agrees_with_the_sides_it_reports(claim):
    """A verdict is read off its two measured sides: `holds` never comes with sides that show a
    violation, and `violated` never with sides that show the claim holding."""
    verdicts = (claim.check(i, NUMPY) for i in claim.witnesses(registry_V(claim)))
    decided = [v for v in verdicts if v.status is not Status.INCONCLUSIVE]
    assert decided, f"{claim.id}: no witness at V = {registry_V(claim)} was decided"
    disagreeing = [v.to_json() for v in decided if not sides_agree(v, claim.relation)]
    assert not disagreeing, disagreeing[:2]


def planted_factor(claim, instance) -> Fraction | None:
    """A factor that makes the bound false on this instance, judged by its own measured sides. The
    margin rhs - lhs is affine in the factor F (F scales the bound side), so two measurements, at
    F = 1 and at the falsifying F of ``FALSIFYING``, locate the meeting point F*; the planted factor
    is F*/2 for an upper bound and 2F* for a lower one, well past it. ``None`` where the sides are
    not finite, the bound does not move with F, or an integer upper bound would have to go below 0."""
    at_one = claim.check(instance, NUMPY)
    far = FALSIFYING[claim.direction]
    at_far = claim.check(instance, NUMPY, far)
    margins = [claim.relation.slack(v.lhs, v.rhs) for v in (at_one, at_far)]
    if at_one.status is not Status.HOLDS or not all(math.isfinite(m) for m in margins) or margins[0] == margins[1]:
        return None
    integer = float(at_one.lhs).is_integer() and float(at_one.rhs).is_integer()
    value = at_one.lhs
    if claim.direction == "upper" and integer and value < 1:
        return None  # an integer bound (a rank, a count) has no value below a measured 0
    slope = (Fraction(margins[0]) - Fraction(margins[1])) / (1 - far)
    meeting = 1 - Fraction(margins[0]) / slope
    if meeting <= 0:
        return None
    return meeting / 2 if claim.direction == "upper" else meeting * 2


@pytest.mark.parametrize("claim", BOUND_CLAIMS, ids=lambda c: c.id)
def test_a_planted_bound_below_the_measurement_never_holds(claim):
    """(c) for every bound claim: the bound side, planted wrong through the claim's own factor (which
    every route of the measurement, float and exact, applies), is never reported to hold on an
    instance whose measured sides contradict it."""
    planted = []
    for instance in claim.witnesses(registry_V(claim)):
        factor = planted_factor(claim, instance)
        if factor is not None:
            planted.append((instance, factor, claim.check(instance, NUMPY, factor)))
    assert planted, f"{claim.id}: no witness at V = {registry_V(claim)} whose bound moves with the factor"
    held = [(i.to_json(), str(f)) for i, f, v in planted if v.status is Status.HOLDS]
    assert not held, held[:2]


IDENTITIES = [c for c in CLAIMS if c.direction is None]
#: The test hook's factor for an identity: its stated side v becomes 2v, or 2v + 1 (``planted_side``).
PLANTED = Fraction(2)


def same_sides(a, b) -> bool:
    """Whether two measurements report the same sides (NaN equal to NaN)."""
    return all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in ((a.lhs, b.lhs), (a.rhs, b.rhs)))


def planted_identity_verdicts(claim) -> list:
    """The verdicts of ``claim`` with its stated side moved through the test hook (``check_planted``,
    in the float measurement and in the exact judgement alike), on the witnesses at :func:`registry_V` where the
    move changed the measured sides."""
    planted = []
    for instance in claim.witnesses(registry_V(claim)):
        if same_sides(claim.measure(instance, NUMPY, Fraction(1)), claim.measure(instance, NUMPY, PLANTED)):
            continue  # the stated side is 0 and only scaled: nothing was planted
        planted.append(claim.check_planted(instance, NUMPY, PLANTED))
    return planted


@pytest.mark.parametrize("claim", IDENTITIES, ids=lambda c: c.id)
def test_a_planted_identity_side_never_holds(claim):
    """(c) for every identity: a wrong stated side is never reported to hold."""
    planted = planted_identity_verdicts(claim)
    assert planted, f"{claim.id}: no witness at V = {registry_V(claim)} whose stated side moves with the hook"
    held = [v.instance.to_json() for v in planted if v.status is Status.HOLDS]
    assert not held, held[:2]


def test_the_planted_identity_test_catches_a_judge_by_fiat():
    """The meta-test can fail: a judge that answers "equal" whatever the sides lets a planted side hold."""

    class EqualByFiat(Sides):
        def moved(self, right, factor):
            return right  # the planted move never reaches the judge

    claim = REGISTRY["softmax-jacobian.trace"]
    by_fiat = dataclasses.replace(claim, judged_sides=EqualByFiat(Constant(Fraction(1)), "==", Constant(Fraction(1))))
    assert any(v.status is Status.HOLDS for v in planted_identity_verdicts(by_fiat))


def test_an_identity_refuses_a_tightening_factor():
    """The hook is for tests: ``check`` (and so ``search --tighten``) still refuses a factor on an identity."""
    with pytest.raises(ValueError, match="identity"):
        IDENTITIES[0].check(IDENTITIES[0].witnesses(64)[0], NUMPY, PLANTED)
