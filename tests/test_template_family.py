"""The template family of docs/design.md (examples/template_family.py) stays runnable: loaded as a
user's claims, both claims hold on every witness, the identity exactly, each mutant is refuted, the
search refutes the tightened bound, every quantity agrees with its reference, every boundary class
is reached, and a planted wrong measure is caught by the reference."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from reference_check import drawn, quantity_disagreements

import rankwall
from rankwall.checks.cli import main
from rankwall.checks.engine.quantities import Base, Measured
from rankwall.checks.engine.verdict import Certification, Status
from rankwall.checks.run import loader

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "examples" / "template_family.py"
SIZES = (2, 3, 64)
EXIT_COUNTEREXAMPLE = 1


@pytest.fixture
def family():
    """The loaded claims, by id, and the module that declared them (its quantities and cases)."""
    claims = {c.id: c for c in rankwall.load_claims(str(TEMPLATE))}
    module = sys.modules[claims["log-sum-exp.shift"].witnesses.__module__]
    yield claims, module
    loader.forget(str(TEMPLATE))


def test_the_design_page_shows_the_file_whole():
    design = (ROOT / "docs" / "design.md").read_text()
    assert "```{literalinclude} ../examples/template_family.py\n:language: python\n```" in design


def test_the_template_is_not_a_shipped_family():
    assert not any(c.id.startswith("log-sum-exp.") for c in rankwall.checks.engine.verdict.REGISTRY)


@pytest.mark.parametrize("claim_id", ["log-sum-exp.above-max", "log-sum-exp.shift"])
def test_both_claims_hold_on_every_witness(family, claim_id):
    claim = family[0][claim_id]
    for V in SIZES:
        for case in claim.witnesses(V) + claim.random_instances(V, 2, V):
            verdict = rankwall.check(claim, case)
            assert verdict.status is Status.HOLDS, (case, verdict.method)
            if claim.relation == "==":  # the identity is certified exactly: a form in the atom L
                assert verdict.certified_by is Certification.EXACT, (case, verdict.method)


def test_each_mutant_is_violated_on_a_witness(family):
    for claim in family[0].values():
        assert claim.mutants
        for mutant in claim.mutants.values():
            statuses = {rankwall.check(mutant, case).status for V in SIZES for case in mutant.witnesses(V)}
            assert Status.VIOLATED in statuses, mutant.id


def test_the_search_refutes_the_doubled_lower_bound(family, capsys):
    argv = ["search", "--claims", str(TEMPLATE), "log-sum-exp.above-max", "--tighten", "2", "--budget", "100"]
    assert main(argv) == EXIT_COUNTEREXAMPLE, capsys.readouterr().out
    assert "lse(z) >= 2 * max z" in capsys.readouterr().out  # the statement decided, not the one declared


def test_the_search_finds_no_counterexample_to_the_identity(family, capsys):
    assert main(["search", "--claims", str(TEMPLATE), "log-sum-exp.shift", "--budget", "30"]) == 0, capsys.readouterr()


def _quantities(module):
    return [q for q in vars(module).values() if isinstance(q, Base)]


def _cases(module):
    cases = [c for V in SIZES for c in module.witnesses(V) + module.random_instances(V, 2, V)]
    return cases + drawn(module.strategy(), 12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_quantity_agrees_with_its_reference(family, dtype):
    module = family[1]
    assert {q.name for q in _quantities(module)} == {"V", "max z", "c", "lse(z)", "lse(z + c)"}
    for q in _quantities(module):
        assert q.reference_fn is not None, q.name
        assert quantity_disagreements(q, _cases(module), rankwall.backend(dtype=dtype)) == [], q.name


def test_every_boundary_class_is_reached(family):
    module = family[1]
    cases = _cases(module)
    for name, predicate in module.BOUNDARY.items():
        assert any(predicate(c) for c in cases), name


def test_a_planted_wrong_measure_is_caught_by_the_reference(family, monkeypatch):
    module = family[1]
    lse = module.lse
    honest = lse.measure_fn

    def off_by_a_millionth(ctx):  # a wrong value with a small claimed error
        m = honest(ctx)
        return Measured(m.value + 1e-6, m.error)

    monkeypatch.setattr(lse, "measure_fn", off_by_a_millionth)
    found = quantity_disagreements(lse, module.witnesses(3), rankwall.backend())
    assert found and all("beyond its bound" in why for why in found)
