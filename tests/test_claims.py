"""Every registered claim holds on its witnesses and on random rows, on every backend; every
planted mutant is refuted on some witness."""

from __future__ import annotations

import pytest
from backend_specs import BACKEND_SPECS

from rankwall.checks.engine.verdict import DEFAULT_V, NUMERICAL_FAILURE, REGISTRY, Status

CLAIMS = list(REGISTRY)
MUTANTS = [m for c in CLAIMS for m in c.mutants.values()]

#: Each claim with each backend it computes in: every backend for a claim ported to the array API,
#: NumPy alone for one that computes in NumPy whatever backend is asked for (filtered here, at
#: collection, rather than skipped at run time).
CLAIM_BACKENDS = [
    pytest.param(claim, spec.values[0], id=f"{claim.id}-{spec.id}", marks=spec.marks)
    for claim in CLAIMS
    for spec in BACKEND_SPECS
    if claim.array_api or spec.id == "numpy"
]


@pytest.mark.parametrize(("claim", "backend"), CLAIM_BACKENDS, indirect=["backend"])
@pytest.mark.parametrize("V", [2, 3, 64])
def test_claim_holds_on_witnesses_and_random_rows(claim, V, backend):
    instances = claim.witnesses(V) + claim.random_instances(V, 3, seed=V)
    for instance in instances:
        verdict = claim.check(instance, backend)
        if verdict.status is Status.INCONCLUSIVE and verdict.method.startswith(NUMERICAL_FAILURE):
            continue  # the backend's own routine failed (MKL's float32 eigh on some AVX-512 CPUs): undecided
        assert verdict.status is Status.HOLDS, verdict.to_json()


#: A claim whose default size is cut for cost (its exact routes are O(V^3)) runs at V = 131,072
#: under --runslow only; its default-size run is in the test above.
FULL_VOCABULARY = [
    pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.default_V < DEFAULT_V else []) for c in CLAIMS
]


@pytest.mark.parametrize("claim", FULL_VOCABULARY)
def test_claim_holds_at_full_vocabulary(claim, numpy_backend):
    """V = 131,072 on NumPy float64: the scale the users run."""
    for instance in claim.witnesses(131072)[:6]:
        assert claim.check(instance, numpy_backend).status is Status.HOLDS


def _at_V(claim, V):
    """The claim's witnesses at V itself (``largest_V`` is V where there is one)."""
    return [case for case in claim.witnesses(V) if case.vocabulary == V]


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_a_claim_has_a_witness_at_the_size_asked(claim):
    """``rankwall verify --V 131072`` checks every claim at V = 131,072 itself (its ``largest_V``), not at
    a cap below it; building the cases is cheap, deciding them is the slow test below."""
    assert _at_V(claim, 131072), f"{claim.id}: no witness at V = 131,072"


@pytest.mark.slow
@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_a_claim_holds_on_its_witnesses_at_the_size_asked(claim, numpy_backend):
    for instance in _at_V(claim, 131072):
        assert claim.check(instance, numpy_backend).status is Status.HOLDS, instance


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda c: c.id)
def test_mutant_is_refuted_on_a_witness(mutant, numpy_backend):
    verdicts = [mutant.check(i, numpy_backend) for i in mutant.witnesses(16)]
    violated = [v for v in verdicts if v.status is Status.VIOLATED]
    assert violated, f"{mutant.id} survived every witness"
    assert all(v.method != "float64 secular solve" for v in violated), "violations must be certified"


def test_claims_name_their_source_and_statement():
    for claim in CLAIMS:
        assert claim.source.startswith(("seed 00", "rankwall ("))
        assert claim.statement and claim.domain and claim.title
