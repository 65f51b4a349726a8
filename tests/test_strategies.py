"""Meta-tests of the strategies: they draw valid, buildable instances that cover the families,
the vocabulary range and the extremes the search relies on."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find, given, settings

from rankwall.checks.claims import softmax_jacobian as strategies
from rankwall.checks.claims.softmax_jacobian import BUILDERS, build
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import REGISTRY
from rankwall.theory.validation import InputError

NUMPY = resolve("numpy")


@settings(max_examples=60)
@given(strategies.any_row())
def test_rows_build_into_valid_probability_rows(instance):
    try:
        built = build(instance, NUMPY)
    except InputError:
        return  # a parameter combination outside a constructor's domain is rejected, not built
    p = built.rows.p
    assert p.shape == (1, instance.V)
    assert np.all(p >= 0) and abs(float(p.sum()) - 1) < 1e-9


@settings(max_examples=40)
@given(strategies.with_direction(strategies.any_row()))
def test_directions_are_attached(instance):
    assert {"direction_seed", "direction_scale", "direction_offset"} <= set(instance.params)


@pytest.mark.parametrize("case", list(BUILDERS), ids=lambda case: case.KIND)
def test_every_family_is_drawn(case):
    assert isinstance(find(strategies.any_row(), lambda i: isinstance(i, case)), case)


@pytest.mark.parametrize("V", [2, 131072])
def test_vocabulary_range_reaches_both_ends(V):
    assert find(strategies.vocabularies(), lambda v: v == V) == V


@pytest.mark.parametrize("m", [0.5, 1 - 2**-52, 1.0])
def test_top_masses_include_the_extremes(m):
    assert find(strategies.top_masses(0.5, 1.0), lambda x: x == m) == m


def test_logit_gaps_reach_underflow():
    assert find(strategies.logit_instances(), lambda i: i.gap >= 745).gap >= 745


@settings(max_examples=50)
@given(strategies.runner_up_instances(exact_witness=True))
def test_attaining_runner_ups_have_no_tail(instance):
    assert instance.tail_mass == 0.0 and instance.m >= 0.5


@pytest.mark.parametrize("claim", list(REGISTRY), ids=lambda c: c.id)
def test_every_claim_strategy_draws_checkable_instances(claim):
    """Each strategy's draws are checked end to end: a verdict, or a named InputError for a
    parameter combination outside a constructor's domain (which the search rejects)."""
    checked = []

    @settings(max_examples=12, deadline=None)
    @given(claim.strategy())
    def probe(instance):
        try:
            checked.append(claim.check(instance, NUMPY).status)
        except InputError as error:
            assert str(error).split(":")[0], error

    probe()
    assert checked, f"{claim.id}: every draw was rejected"


# --------------------------------------------------------------------------- the edges (issue 18)


def test_the_smallest_vocabularies_are_drawn_at_every_low_end():
    assert find(strategies.vocabularies(3), lambda v: v == 3) == 3
    assert find(strategies.spread_instances(low_vocabulary=3), lambda c: c.V == 3 and c.m == 1.0).m == 1.0


def test_one_hot_rows_are_drawn_at_large_V():
    found = find(strategies.sparse_instances(), lambda c: c.support == 1 and c.V >= 1024)
    assert strategies.one_hot(found) and strategies.has_zeros(found)


def test_the_smallest_top_is_drawn_and_refused_when_the_float_leaves_the_domain():
    """m = 1/V is drawn; where the float row's top atom is not its largest, building it is refused."""
    from rankwall.checks.engine.verdict import OutsideDomain

    found = find(strategies.spread_instances(), lambda c: c.V == 3 and strategies.smallest_top(c))
    with pytest.raises(OutsideDomain):
        build(found, NUMPY)


def test_expressivity_strategies_reach_their_edges():
    from rankwall.checks.claims import expressivity as ex

    top1 = find(ex.expressivity_instances(), lambda c: c.at_edges and c.contexts == 1 and c.V <= 3)
    assert top1.D >= 2
    tangent = find(ex.expressivity_instances(tangent=True), lambda c: c.V >= 1000)
    assert tangent.V <= 4096
    fit = find(ex.gibbs_instances(), lambda c: c.exact_fit and ex.all_rows_one_hot(c))
    assert fit.contexts >= 1
    head = find(ex.argmax_instances(), lambda c: c.V == c.D + 1 and c.twins > 0)
    assert len(ex.argmax_head(head)) == head.D + 1 + head.twins
