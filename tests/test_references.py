"""Every claim's fast measure against a slow, obviously right reference at small size (issue 18): a
measure of the wrong quantity fails here even where the registry's planted-bound tests pass, on
every backend the claim computes in: on NumPy float64 its witnesses at V = 2, 3, 16, 64, random
instances and 12 drawn cases at V <= 64; on the other backends, by default, the witnesses at
V <= 16 and four drawn cases (all of it under ``--runslow``)."""

from __future__ import annotations

import pytest
from backend_specs import BACKEND_SPECS
from reference_check import disagreements, reference_cases

from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import REGISTRY
from rankwall.theory.validation import InputError

CLAIMS = list(REGISTRY)

#: Each claim on each backend it computes in (the file runs on one xdist worker, where the references
#: it caches, softmax-jacobian's dense eigenvalues on p, serve all the family's claims).
CLAIM_BACKENDS = [
    pytest.param(claim, spec.values[0], id=f"{claim.id}-{spec.id}", marks=spec.marks)
    for claim in CLAIMS
    for spec in BACKEND_SPECS
    if claim.array_api or spec.id == "numpy"
]


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_has_a_reference(claim):
    assert claim.reference is not None, f"{claim.id} has no reference computation"


#: The default run's share on the backends other than NumPy float64 (the dense references cost
#: O(V^3) in balls): witnesses at V <= 16 and four drawn cases; ``--runslow`` runs them all.
SMALL_SIZES, SMALL_DRAWN = (2, 3, 16), 4


@pytest.mark.parametrize(("claim", "backend"), CLAIM_BACKENDS, indirect=["backend"])
def test_the_measure_agrees_with_its_reference(claim, backend, request):
    if claim.reference is None:
        pytest.fail(f"{claim.id} has no reference computation")
    complete = request.config.getoption("--runslow") or (backend.name == "numpy" and backend.dtype_name == "float64")
    cases = reference_cases(claim) if complete else reference_cases(claim, SMALL_DRAWN, SMALL_SIZES)
    assert cases, f"{claim.id}: no case at V <= 64"
    found = disagreements(claim, cases, backend)
    assert not found, found[:3]


def _declared_quantities() -> list:
    """(quantity, Cases) for every base quantity a family exports with a reference, paired with each
    Cases bundle of its family whose witnesses it reads (issue 26: each quantity checked on its own)."""
    from rankwall.checks.claims import FAMILY_MODULES
    from rankwall.checks.engine.quantities import Base, Context
    from rankwall.checks.engine.toolkit import Cases

    pairs = []
    for module in FAMILY_MODULES:
        names = getattr(module, "__all__", [])
        quantities = [getattr(module, n) for n in names if isinstance(getattr(module, n), Base)]
        bundles = [(n, getattr(module, n)) for n in names if isinstance(getattr(module, n), Cases)]
        for q in quantities:
            if q.reference_fn is None:
                continue
            for bundle_name, cases in bundles:
                probe = cases.witnesses(4)[:1]
                try:
                    for case in probe:
                        q.measure(Context(case, resolve("numpy")))
                except InputError:
                    continue
                pairs.append(pytest.param(q, cases, id=f"{q.family}:{q.name}:{bundle_name}"))
    return pairs


@pytest.mark.parametrize(("quantity", "cases"), _declared_quantities())
def test_every_quantity_agrees_with_its_reference(quantity, cases):
    """Each quantity's float measure lies within its error bound of its reference, and its exact value
    encloses it, on the witnesses at V = 2, 3, 8 and four drawn cases (NumPy float64); the claims' own
    reference test above covers the other backends."""
    from reference_check import drawn, quantity_disagreements

    instances = [c for V in (2, 3, 8) for c in cases.witnesses(V)] + drawn(cases.strategy(), 4)
    instances = list(dict.fromkeys(c for c in instances if (c.vocabulary or 0) <= 16))
    assert instances
    found = quantity_disagreements(quantity, instances, resolve("numpy"))
    assert not found, found[:3]
