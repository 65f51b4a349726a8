"""Every claim's fast measure against a slow, obviously right reference at small size (issue 18): a
measure of the wrong quantity fails here even where the registry's planted-bound tests pass, on
every backend the claim computes in, on its witnesses and on drawn instances at V <= 64."""

from __future__ import annotations

import pytest
from backend_specs import BACKEND_SPECS
from reference_check import disagreements, reference_cases

from rankwall.checks.verdict import REGISTRY

CLAIMS = list(REGISTRY)

CLAIM_BACKENDS = [
    pytest.param(claim, spec.values[0], id=f"{claim.id}-{spec.id}", marks=spec.marks)
    for claim in CLAIMS
    for spec in BACKEND_SPECS
    if claim.array_api or spec.id == "numpy"
]


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_has_a_reference(claim):
    assert claim.reference is not None, f"{claim.id} has no reference computation"


@pytest.mark.parametrize(("claim", "backend"), CLAIM_BACKENDS, indirect=["backend"])
def test_the_measure_agrees_with_its_reference(claim, backend):
    if claim.reference is None:
        pytest.fail(f"{claim.id} has no reference computation")
    cases = reference_cases(claim)
    assert cases, f"{claim.id}: no case at V <= 64"
    found = disagreements(claim, cases, backend)
    assert not found, found[:3]
