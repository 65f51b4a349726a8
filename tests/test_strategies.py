"""Meta-tests of the strategies: they draw valid, buildable instances that cover the families,
the vocabulary range and the extremes the search relies on."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from checks import strategies
from checks.backends import resolve
from checks.claims.softmax_jacobian import BUILDERS, build
from theory._validation import InputError

NUMPY = resolve("numpy")


@settings(max_examples=60)
@given(strategies.any_row())
def test_rows_build_into_valid_probability_rows(instance):
    try:
        built = build(instance, NUMPY)
    except InputError:
        return  # a parameter combination outside a constructor's domain is rejected, not built
    p = built.rows.p
    assert p.shape == (1, instance.params["V"])
    assert np.all(p >= 0) and abs(float(p.sum()) - 1) < 1e-9


@settings(max_examples=40)
@given(strategies.with_direction(strategies.any_row()))
def test_directions_are_attached(instance):
    assert {"direction_seed", "direction_scale", "direction_offset"} <= set(instance.params)


def test_every_family_is_drawn():
    families = {strategies.any_row().example().family for _ in range(400)}
    assert families == set(BUILDERS)


def test_vocabulary_range_reaches_both_ends():
    drawn = {strategies.vocabularies().example() for _ in range(400)}
    assert min(drawn) == 2 and max(drawn) == 131072


def test_top_masses_include_values_ulps_from_one():
    drawn = {strategies.top_masses(0.5, 1.0).example() for _ in range(300)}
    assert 1 - 2**-52 in drawn and 0.5 in drawn


def test_logit_gaps_reach_underflow():
    gaps = {strategies.logit_instances().example().params["gap"] for _ in range(300)}
    assert max(gaps) >= 745


def test_attaining_runner_ups_have_no_tail():
    drawn = st.lists(strategies.runner_up_instances(exact_witness=True), min_size=20, max_size=20).example()
    assert all(i.params["tail_mass"] == 0.0 for i in drawn)
