"""The decision procedure, the registry, the exact routes and the tolerance model."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import ClassVar

import flint
import numpy as np
import pytest
from hypothesis import strategies as st

from rankwall.checks import exact
from rankwall.checks.engine import tolerance
from rankwall.checks.engine.verdict import (
    REGISTRY,
    Case,
    Certification,
    Claim,
    Judgement,
    Measurement,
    RankInterval,
    Registry,
    Relation,
    Status,
    Verdict,
    decide,
    worst,
)
from rankwall.checks.exact import softmax as exact_softmax
from rankwall.theory import softmax_jacobian as sj
from rankwall.theory.validation import InputError


@dataclass(frozen=True)
class Toy(Case):
    KIND: ClassVar[str] = "toy"
    V: int


INSTANCE = Toy(2)


@dataclass(frozen=True)
class ToyClaim(Claim):
    """A claim whose measurement and exact judgement are given: the decision procedure alone."""

    measured: Measurement | None = None
    judged: Judgement | None = None

    def check_planted(self, instance, backend, factor, *, exact=None):
        def judge():
            if self.judged is None:
                raise AssertionError("the exact route must not be consulted")
            return self.judged

        return decide(self, instance, self.measured, judge, exact)


def toy_claim(relation: Relation, measured: Measurement, judged: Judgement | None) -> Claim:
    return ToyClaim(
        id="toy.claim",
        title="toy",
        source="test",
        statement="lhs <= rhs",
        domain="toy",
        relation=relation,
        sides="lhs <= rhs",
        witnesses=lambda V: [INSTANCE],
        random_instances=lambda V, n, seed: [],
        strategy=lambda: st.just(INSTANCE),
        measured=measured,
        judged=judged,
    )


class TestDecisionProcedure:
    """A float verdict only when the margin clears the tolerance; violations only from exact."""

    def test_clear_margin_holds_without_escalation(self):
        claim = toy_claim(Relation.AT_MOST, Measurement(1.0, 2.0, 0.1, "float64"), None)
        verdict = claim.check(INSTANCE, backend=None)
        assert verdict.status is Status.HOLDS and verdict.method == "float64" and verdict.margin == 1.0

    def test_margin_inside_tolerance_escalates(self):
        judged = Judgement(1.0, 1.0, 0, "exact-rational")
        claim = toy_claim(Relation.AT_MOST, Measurement(1.0, 1.0 + 1e-17, 1e-15, "float64"), judged)
        verdict = claim.check(INSTANCE, backend=None)
        assert verdict.status is Status.HOLDS and verdict.method == "exact-rational"

    def test_float_violation_is_confirmed_exactly(self):
        judged = Judgement(2.0, 1.0, -1, "exact-rational")
        claim = toy_claim(Relation.AT_MOST, Measurement(2.0, 1.0, 1e-15, "float64"), judged)
        assert claim.check(INSTANCE, backend=None).status is Status.VIOLATED

    def test_float_violation_refuted_exactly_holds(self):
        judged = Judgement(1.0, 1.0, 1, "interval-128")
        claim = toy_claim(Relation.AT_MOST, Measurement(2.0, 1.0, 1e-15, "float64"), judged)
        assert claim.check(INSTANCE, backend=None).status is Status.HOLDS

    def test_undecided_exact_route_is_inconclusive(self):
        judged = Judgement(1.0, 1.0, None, "interval")
        claim = toy_claim(Relation.AT_MOST, Measurement(1.0, 1.0, 1e-15, "float64"), judged)
        assert claim.check(INSTANCE, backend=None).status is Status.INCONCLUSIVE

    def test_identity_equal_to_rounding_is_inconclusive_and_fails_only_exactly(self):
        """Issue 26: sides equal within rounding are consistent with equality, not a proof of it: the
        verdict is inconclusive (exit 3), labelled within rounding, never holds."""
        close_sides = Measurement(1.0, 1.0 + 1e-16, 1e-15, "float64")
        unjudged = toy_claim(Relation.EQUAL, close_sides, None).check(INSTANCE, backend=None, exact=False)
        assert unjudged.status is Status.INCONCLUSIVE and unjudged.certified_by is Certification.WITHIN_ROUNDING
        assert "equal within rounding" in unjudged.method
        equal = toy_claim(Relation.EQUAL, close_sides, Judgement(1, 1, 0, "exact")).check(INSTANCE, backend=None)
        assert equal.status is Status.HOLDS and equal.method == "exact"
        near = toy_claim(Relation.EQUAL, close_sides, Judgement(1.0, 1.0, None, "interval", radius=1e-30))
        near_verdict = near.check(INSTANCE, backend=None)
        assert near_verdict.status is Status.INCONCLUSIVE
        assert near_verdict.certified_by is Certification.WITHIN_ROUNDING
        different = toy_claim(Relation.EQUAL, close_sides, Judgement(1, 2, 1, "exact"))
        assert different.check(INSTANCE, backend=None).status is Status.VIOLATED
        far = toy_claim(Relation.EQUAL, Measurement(1.0, 2.0, 1e-15, "float64"), Judgement(1, 2, 1, "exact"))
        assert far.check(INSTANCE, backend=None).status is Status.VIOLATED

    def test_identities_cannot_be_tightened(self):
        claim = toy_claim(Relation.EQUAL, Measurement(1.0, 1.0, 0.0, "f"), None)
        with pytest.raises(ValueError, match="no bound to tighten"):
            claim.check(INSTANCE, backend=None, factor=Fraction(1, 2))

    def test_worst_prefers_violations_then_small_margins(self):
        make = lambda status, margin: Verdict("c", status, 1.0, 1.0 + margin, margin, 0.0, "m", INSTANCE)  # noqa: E731
        picked = worst([make(Status.HOLDS, 0.5), make(Status.HOLDS, 0.01), make(Status.INCONCLUSIVE, 0.0)])
        assert picked.status is Status.INCONCLUSIVE
        assert worst([make(Status.HOLDS, 0.5), make(Status.HOLDS, 0.01)]).margin == 0.01


class TestRegistry:
    def test_ids_are_unique_and_dotted(self):
        ids = [c.id for c in REGISTRY]
        assert len(ids) == len(set(ids)) and all("." in i for i in ids)

    def test_double_registration_is_refused(self):
        registry = Registry()
        claim = next(iter(REGISTRY))
        registry.register(claim)
        with pytest.raises(InputError, match="declared twice"):
            registry.register(claim)

    @pytest.mark.parametrize("bad", ["softmax-temperature.top-at-least-1/V", "nodot", "a b.c", "x.[m]", "x."])
    def test_an_id_outside_the_rule_is_refused_when_it_registers(self, bad):
        """A shipped family's id meets the rule that the README table, patterns and mutant lookups
        rely on at registration, not in a test of the README."""
        with pytest.raises(InputError, match="id: a claim id is dotted"):
            Registry().register(replace(next(iter(REGISTRY)), id=bad))

    def test_patterns_and_unknown_ids(self):
        assert {c.id for c in REGISTRY.match(["softmax-jacobian.*-bound"])} == {
            "softmax-jacobian.lower-bound",
            "softmax-jacobian.upper-bound",
        }
        with pytest.raises(KeyError, match="unknown claim 'nope'"):
            REGISTRY["nope"]


class TestExactRoutes:
    def test_floats_enter_exactly(self):
        assert exact.rational(0.1) == flint.fmpq(3602879701896397, 36028797018963968)
        with exact.precision(64):
            assert exact.ball(0.1).rad() == 0

    def test_runner_up_attains_its_bound_exactly(self):
        row = exact_softmax.ExactRow.from_probabilities(sj.construct_runner_up(5, 0.7))
        assert exact_softmax.decide_norm_at_most(row, exact_softmax.Bound("ms", Fraction(2))) == (0, "exact-rational")
        assert exact_softmax.decide_norm_at_most(row, exact_softmax.Bound("ms", Fraction("1.998")))[0] == -1

    def test_spread_tail_is_strictly_inside_the_bounds(self):
        row = exact_softmax.ExactRow.from_probabilities(sj.construct_spread_tail(50, 0.8))
        assert exact_softmax.decide_norm_at_most(row, exact_softmax.Bound("ms", Fraction(2)))[0] == 1
        assert exact_softmax.decide_norm_at_most(row, exact_softmax.Bound("ms", Fraction(1)))[0] == -1

    def test_ties_and_one_hot(self):
        tied = exact_softmax.ExactRow.from_probabilities(sj.construct_tied_atoms(6, 0.3))
        assert exact_softmax.decide_norm_at_most(tied, exact_softmax.Bound("envelope", Fraction(1)))[0] == 0
        one_hot = exact_softmax.ExactRow.from_probabilities(np.array([0.0, 1.0, 0.0]))
        assert exact_softmax.decide_norm_at_most(one_hot, exact_softmax.Bound("constant", Fraction(0)))[0] == 0

    @pytest.mark.parametrize("top", [0.3, 0.7])
    def test_the_envelope_is_decided_in_balls_past_the_exact_routes_reach(self, top):
        """On either branch of min(m, 2m(1 − m)), for a row with more distinct values than the
        rationals take: t − m came from subtracting two balls of m, never an exact 0, so the
        envelope at m (its m < 1/2 branch) stayed undecided (float32 at V = 131,072 left 5 of 24
        Dirichlet rows inconclusive)."""
        rng = np.random.default_rng(0)
        tail = rng.dirichlet(np.full(exact.EXACT_DISTINCT_LIMIT + 50, 50.0)) * (1 - top) / 2
        p = np.concatenate([[top], tail, tail[::-1]])
        p[1:] *= (1 - top) / p[1:].sum()
        row = exact_softmax.ExactRow.from_probabilities(p)
        assert row.distinct > exact.EXACT_DISTINCT_LIMIT
        ratio = Fraction(float(sj.spectral_norm(p))) / Fraction(min(top, 2 * top * (1 - top)))
        envelope = exact_softmax.Bound("envelope", Fraction(1))
        assert exact_softmax.decide_norm_at_most(row, envelope) == (1, "interval-128")
        below = exact_softmax.Bound("envelope", ratio * (1 - Fraction(1, 10**6)))
        assert exact_softmax.decide_norm_at_most(row, below)[0] == -1

    def test_logit_rows_are_decided_in_balls(self):
        row = exact_softmax.ExactRow.from_logits(sj.construct_logits(8, 700.0, tail_gap=3.0))
        outcome, method = exact_softmax.decide_norm_at_most(row, exact_softmax.Bound("ms", Fraction(2)))
        assert outcome == 1 and method.startswith("interval")

    def test_two_atom_logit_rows_attain_the_bound_by_the_lemma(self):
        """exp of a float is transcendental: no ball shows equality, the two-atom lemma does."""
        row = exact_softmax.ExactRow.from_logits(sj.construct_logits(2, 700.0))
        assert exact_softmax.decide_norm_at_most(row, exact_softmax.Bound("ms", Fraction(2))) == (
            0,
            "two-atom lemma (norm = 2m(1-m))",
        )
        assert exact_softmax.decide_norm_at_most(row, exact_softmax.Bound("ms", Fraction("1.999")))[0] == -1

    def test_tied_logit_rows_attain_the_envelope_by_the_lemma(self):
        row = exact_softmax.ExactRow.from_logits(np.array([1.0, 1.0, -3.0]))
        assert exact_softmax.decide_norm_at_most(row, exact_softmax.Bound("envelope", Fraction(1)))[0] == 0

    def test_certified_enclosure_contains_the_float_norm(self):
        p = sj.construct_dirichlet(40, 0.5, 2)
        estimate = float(sj.spectral_norm(p))
        lo, hi, _ = exact_softmax.certified_norm(exact_softmax.ExactRow.from_probabilities(p), estimate)
        assert lo <= estimate <= hi and hi - lo < 1e-12 * estimate


class TestToleranceModel:
    def test_gamma(self):
        u = 2.0**-53
        assert tolerance.gamma(0, u) == 0
        assert tolerance.gamma(10, u) == pytest.approx(10 * u)
        assert tolerance.gamma(2**53, u) == float("inf")

    def test_unit_roundoff_of_every_dtype_spelling(self):
        import torch

        assert tolerance.unit_roundoff(np.float64) == 2.0**-53
        assert tolerance.unit_roundoff(torch.float32) == 2.0**-24
        assert tolerance.dtype_name(torch.float64) == "float64"

    def test_dense_error_has_an_absolute_floor(self):
        """Forming J costs about u even when ||J|| is tiny (the one-hot cancellation)."""
        u = 2.0**-53
        assert tolerance.dense_eigenvalue_error(4, u, 0.0, 1.0) >= 3 * u


def test_integers_beyond_float64s_exact_range_are_compared_exactly():
    """25¹⁸ and the float64 next to it round to the same double: the float sides cannot tell them
    apart, so the measurement decides nothing and the judgement compares the integers (found by the
    certifier's 10,000-statement run on a power of the sign-flip count)."""
    exact = 25**18
    near = int(float(exact))  # 14551915228366852423942144, a double, above 25¹⁸
    assert near > exact and float(near) == float(exact)
    pinned = RankInterval(exact, exact, "t", "t", True)
    measured, judged = pinned.sides(near, Relation.AT_LEAST)  # near <= 25¹⁸: false
    assert math.isnan(measured.lhs) and judged.sign == -1
    assert pinned.sides(exact, Relation.AT_LEAST)[1].sign == 0
    assert pinned.sides(exact - 1, Relation.EQUAL)[1].sign != 0
    from rankwall.checks.engine.quantities import as_measured

    enclosure = as_measured(pinned)
    assert abs(Fraction(enclosure.value) - exact) <= Fraction(enclosure.error)
