"""Registry-wide meta-tests (issue 11): they enumerate the registry, not a family, so a claim
added later is held to the same standard. Every claim states a bound direction or is an
identity, has a mutant, and can fail: its bound, halved or doubled, is refuted by the search."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from rankwall.checks.backends import resolve
from rankwall.checks.search import search
from rankwall.checks.strategies import CI_SEARCH_BUDGET
from rankwall.checks.verdict import REGISTRY, Relation, Status, tightened_integer_bound

NUMPY = resolve("numpy")
CLAIMS = list(REGISTRY)
BOUND_CLAIMS = [c for c in CLAIMS if c.bound is not None]
#: The factor that makes a bound claim false: half an upper bound, twice a lower bound.
FALSIFYING = {"upper": Fraction(1, 2), "lower": Fraction(2)}


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_is_a_bound_or_an_identity(claim):
    if claim.relation is Relation.EQUAL:
        assert claim.bound is None, f"{claim.id}: an identity has no bound direction"
    else:
        assert claim.bound in ("upper", "lower"), f"{claim.id}: an inequality names its bound direction"


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_has_a_mutant(claim):
    assert claim.mutants, f"{claim.id} has no planted false variant"


@pytest.mark.parametrize("claim", BOUND_CLAIMS, ids=lambda c: c.id)
def test_every_bound_is_refuted_when_halved_or_doubled(claim):
    factor = FALSIFYING[claim.bound]
    result = search(claim, NUMPY, tighten=factor, budget=CI_SEARCH_BUDGET, seed=0)
    assert result.counterexample is not None, f"{claim.id} x {factor} survived {result.examples} examples"
    assert result.counterexample.status is Status.VIOLATED


@pytest.mark.parametrize(
    ("bound", "factor", "direction", "tightened"),
    [
        (8, Fraction(1), "upper", 8),
        (8, Fraction(1, 2), "upper", 3),
        (8, Fraction(99, 100), "upper", 7),
        (7, Fraction(1, 2), "upper", 3),
        (8, Fraction(1), "lower", 8),
        (8, Fraction(2), "lower", 17),
        (8, Fraction(101, 100), "lower", 9),
        (0, Fraction(2), "lower", 1),
    ],
)
def test_integer_bounds_tighten_strictly(bound, factor, direction, tightened):
    """A tightened integer bound is strictly sharper than F·b, so F = 1.01 still asks for more."""
    assert tightened_integer_bound(bound, factor, direction) == tightened


def sides_agree(verdict, relation) -> bool:
    """Whether a decided verdict agrees with the sides it reports: a judge cannot decide by fiat.
    ``tolerance`` is the float margin's bound or the exact route's radius; NaN sides never agree."""
    margin, slack = verdict.rhs - verdict.lhs, verdict.tolerance
    if not (math.isfinite(margin) and math.isfinite(slack)):
        return False
    if relation is Relation.AT_MOST:
        return margin >= -slack if verdict.status is Status.HOLDS else margin < slack
    return abs(margin) <= slack if verdict.status is Status.HOLDS else abs(margin) > 0


@pytest.mark.parametrize("claim", CLAIMS + [m for c in CLAIMS for m in c.mutants.values()], ids=lambda c: c.id)
def test_every_decided_verdict_agrees_with_the_sides_it_reports(claim):
    """A verdict is read off its two measured sides: `holds` never comes with sides that show a
    violation, and `violated` never with sides that show the claim holding."""
    decided = [v for v in (claim.check(i, NUMPY) for i in claim.witnesses(64)) if v.status is not Status.INCONCLUSIVE]
    assert decided, f"{claim.id}: no witness at V = 64 was decided"
    disagreeing = [v.to_json() for v in decided if not sides_agree(v, claim.relation)]
    assert not disagreeing, disagreeing[:2]
