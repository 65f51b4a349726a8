"""The counterexample search: mutants are refuted within the CI budget, sharp bounds are
refuted once tightened, and true claims are never refuted."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import REGISTRY, Status
from rankwall.checks.run.search import search
from rankwall.checks.run.strategies import CI_SEARCH_BUDGET

NUMPY = resolve("numpy")
MUTANTS = [m for c in REGISTRY for m in c.mutants.values()]


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda c: c.id)
def test_mutants_are_refuted_within_the_ci_budget(mutant):
    result = search(mutant, NUMPY, budget=CI_SEARCH_BUDGET, seed=0)
    assert result.counterexample is not None, f"{mutant.id} not refuted in {result.examples} examples"
    assert result.counterexample.status is Status.VIOLATED


@pytest.mark.parametrize(
    ("claim_id", "factor"),
    [
        ("softmax-jacobian.upper-bound", "0.999"),
        ("softmax-jacobian.envelope", "0.999"),
        ("softmax-jacobian.lower-bound", "1.001"),
        ("softmax-jacobian.lower-bound-approached", "0.999"),
    ],
)
def test_sharp_bounds_are_refuted_when_tightened(claim_id, factor):
    result = search(REGISTRY[claim_id], NUMPY, tighten=Fraction(factor), budget=CI_SEARCH_BUDGET)
    assert result.counterexample is not None, f"{claim_id} x {factor} survived"


@pytest.mark.parametrize("claim", list(REGISTRY), ids=lambda c: c.id)
def test_true_claims_are_never_refuted(claim):
    result = search(claim, NUMPY, budget=CI_SEARCH_BUDGET, seed=1)
    assert result.counterexample is None, result.counterexample.to_json()


@pytest.mark.slow
@pytest.mark.parametrize("claim", list(REGISTRY), ids=lambda c: c.id)
def test_true_claims_survive_a_deep_search(claim):
    result = search(claim, NUMPY, budget=20_000, seed=2)
    assert result.counterexample is None, result.counterexample.to_json()


def test_the_shrunk_counterexample_is_small():
    result = search(REGISTRY["softmax-jacobian.upper-bound"], NUMPY, tighten=Fraction("0.999"))
    assert result.counterexample.instance.params["V"] == 2


def test_identities_refuse_tightening():
    with pytest.raises(ValueError, match="identity"):
        search(REGISTRY["softmax-jacobian.trace"], NUMPY, tighten=Fraction(1, 2))


@pytest.mark.parametrize("margin", [math.nan, math.inf, -math.inf])
def test_the_search_target_is_finite_where_the_float_margin_is_not(margin):
    """A true identity whose float sides both overflow has a NaN margin; Hypothesis's ``target()`` refuses
    a non-finite observation, which ended a search with an internal error (exit 4) before."""
    from types import SimpleNamespace

    from rankwall.checks.engine.verdict import Relation
    from rankwall.checks.run.search import closeness

    verdict = SimpleNamespace(certificate=None, relative_margin=margin)
    for relation in Relation:
        assert math.isfinite(closeness(verdict, relation))
