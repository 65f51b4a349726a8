"""The strategies reach the edges of their statements (issue 18): every claim names the boundary
classes of its cases (the smallest sizes, ties, zeros, equality cases, large V, ...), and a test
measures the share of drawn cases in each, which must not be negligible."""

from __future__ import annotations

import pytest
from reference_check import drawn

from rankwall.checks.engine.verdict import REGISTRY

CLAIMS = list(REGISTRY)
#: Cases drawn per claim, and the least share of them each boundary class must get.
DRAWN, LEAST_SHARE = 300, 0.02


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_names_its_boundary_classes(claim):
    assert claim.boundary_classes, f"{claim.id} names no boundary class of its cases"


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_each_boundary_class_is_drawn_with_real_probability(claim):
    cases = drawn(claim.strategy(), DRAWN)
    shares = {name: sum(map(bool, map(test, cases))) / len(cases) for name, test in claim.boundary_classes.items()}
    rare = {name: share for name, share in shares.items() if share < LEAST_SHARE}
    assert not rare, f"{claim.id}: classes under {LEAST_SHARE:.0%} of {len(cases)} drawn cases: {rare} (all: {shares})"
