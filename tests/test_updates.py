"""Tests of theory/updates.py and the updates family: the logit update of a gradient step (Eq. 7), Prop. A.6
and the logit gradient (Theorem UP.2), declared over the family's quantities."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from reference_check import disagreements, quantity_disagreements

from rankwall.checks import exact
from rankwall.checks.claims import updates as uc
from rankwall.checks.engine import tolerance
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.quantities import Context, Measured
from rankwall.checks.engine.reals import Real
from rankwall.checks.engine.verdict import REGISTRY, Certification, Status
from rankwall.checks.run.search import search
from rankwall.checks.run.strategies import CI_SEARCH_BUDGET
from rankwall.theory import updates as up
from rankwall.theory.validation import InputError

U = 2.0**-53
NUMPY = resolve("numpy")


class TestTheGradientStep:
    """The formulas are those of the chain rule: checked against torch autograd."""

    def test_first_order_update_is_the_derivative_of_the_logits(self):
        H, W, G = up.construct_step(7, 11, 3, seed=0)
        Ht, Wt, Gt = (torch.tensor(m, requires_grad=i < 2) for i, m in enumerate((H, W, G)))
        loss = (Gt * (Ht @ Wt.T)).sum()  # a loss whose logit gradient is G
        grad_H, grad_W = torch.autograd.grad(loss, (Ht, Wt))
        np.testing.assert_allclose(grad_H.numpy(), G @ W, rtol=1e-12)
        np.testing.assert_allclose(grad_W.numpy(), G.T @ H, rtol=1e-12)
        eta = 1e-7
        step = up.exact_step(H, W, G, eta)
        np.testing.assert_allclose(step / eta, up.first_order_update(H, W, G, 1.0), rtol=1e-5, atol=1e-5)

    def test_exact_step_is_first_order_plus_the_eta_squared_term(self):
        H, W, G = up.construct_step(5, 9, 2, seed=1, integers=True)
        H, W, G = (m.astype(object) for m in (H, W, G))
        eta = Fraction(2, 3)
        difference = up.exact_step(H, W, G, eta) - up.first_order_update(H, W, G, eta)
        assert (difference == eta * eta * (G @ W @ H.T @ G)).all()


class TestRankAtMost2D:
    @pytest.mark.parametrize(("contexts", "V", "D"), [(12, 20, 1), (30, 40, 3), (40, 48, 12)])
    def test_exact_ranks_are_2D_generically(self, contexts, V, D):
        H, W, G = up.construct_step(contexts, V, D, seed=D, integers=True)
        first = up.first_order_update(H, W, G, 1)
        assert exact.exact_rank(first)[0] == min(2 * D, contexts, V)
        H, W, G = (m.astype(object) for m in (H, W, G))
        step = (3 * H - G @ W) @ (3 * W - G.T @ H).T - 9 * (H @ W.T)  # q^2 times the step for eta = 1/3
        assert exact.exact_rank(step)[0] <= 2 * D

    def test_the_gradient_itself_is_full_rank(self):
        _, _, G = up.construct_step(30, 40, 3, seed=0, integers=True)
        assert exact.exact_rank(G)[0] == 30


class TestEckartYoung:
    def test_truncated_svd_attains_the_tail(self):
        _, _, G = up.construct_step(20, 30, 4, seed=2)
        witness = up.truncated_svd(G, 8)
        assert up.best_scale(witness, G) == pytest.approx(1.0, rel=1e-12)
        assert up.residual(witness, G) == pytest.approx(up.tail_norm(G, 8), rel=1e-12)

    def test_real_updates_stay_above_the_tail(self):
        H, W, G = up.construct_step(20, 30, 4, seed=3)
        tail = up.tail_norm(G, 8)
        for delta in (up.first_order_update(H, W, G, 0.1), up.exact_step(H, W, G, 0.1)):
            assert up.residual(delta, G) > tail

    def test_best_scale_minimises_the_residual(self):
        H, W, G = up.construct_step(10, 12, 2, seed=4)
        delta = up.first_order_update(H, W, G, 1.0)
        c = up.best_scale(delta, G)
        best = np.linalg.norm(c * delta - G)
        for nudge in (0.99, 1.01):
            assert np.linalg.norm(c * nudge * delta - G) > best

    def test_zero_update_leaves_the_whole_gradient(self):
        _, _, G = up.construct_step(5, 6, 1, seed=5)
        assert up.residual(np.zeros_like(G), G) == pytest.approx(np.linalg.norm(G), rel=4 * U)


def exact_integer_rank(G_exact: np.ndarray) -> int:
    """The rank of an object array of Fractions, over the rationals (cleared to integers, python-flint)."""
    from math import lcm

    scale = lcm(*(x.denominator for x in G_exact.ravel()))
    return exact.exact_rank(np.array([[int(x * scale) for x in row] for row in G_exact], dtype=object))[0]


class TestTheLogitGradient:
    """Theorem UP.2 (1) and (3), on logit gradients diag(f)(P - Ñ) with idle contexts (f_c = 0)."""

    @pytest.mark.parametrize(("C", "V", "idle"), [(12, 8, 0), (12, 8, 3), (5, 9, 2), (9, 9, 0), (2, 2, 0), (4, 3, 4)])
    def test_the_rank_is_at_most_the_active_contexts_and_v_minus_one_and_attains_it(self, C, V, idle):
        """(1) exactly, over the rationals: every row sums to 0, the idle rows vanish, and generic
        softmax rows attain min(C_+, V - 1)."""
        P, counts, f = up.construct_logit_gradient(C, V, seed=C + V + idle, idle=idle)
        G = up.logit_gradient(P, counts, f, exact=True)
        assert all(sum(row) == 0 for row in G) and not G[f == 0].any()
        active = int((f > 0).sum())
        assert exact_integer_rank(G) == min(active, V - 1)

    def test_full_rank_v_never_happens_even_with_more_contexts_than_tokens(self):
        """Result 1's "full rank V" is false for every P and Ñ: rank <= V - 1 however many contexts."""
        P, counts, f = up.construct_logit_gradient(40, 6, seed=1)
        assert exact_integer_rank(up.logit_gradient(P, counts, f, exact=True)) == 5

    @pytest.mark.parametrize("seed", range(4))
    def test_singular_values_scale_between_the_least_and_the_largest_frequency(self, seed):
        """(3): f_min sigma_i(X_+) <= sigma_i(G) <= f_max sigma_i(X_+), each float SVD within its
        backward error gamma_{V+2} sqrt(min(C, V)) sigma_1 (Weyl)."""
        P, counts, f = up.construct_logit_gradient(30, 20, seed=seed, idle=4, scale=2.0)
        G, X = up.logit_gradient(P, counts, f), up.logit_gradient(P, counts, np.ones_like(f))[f > 0]
        s_G, s_X = np.linalg.svd(G, compute_uv=False), np.linalg.svd(X, compute_uv=False)
        slack = tolerance.svd_rank_margin(G.shape, U, 0.0, s_G[0]) + f.max() * tolerance.svd_rank_margin(
            X.shape, U, 0.0, s_X[0]
        )
        f_min, f_max = f[f > 0].min(), f.max()
        assert np.all(f_min * s_X - slack <= s_G[: len(s_X)]) and np.all(s_G[: len(s_X)] <= f_max * s_X + slack)
        low, high = up.frequency_ratios(G[f > 0], X)
        assert f_min < f_max and low < high  # frequencies spread: G is no multiple of X

    def test_constant_frequencies_are_the_equality_case_and_the_largest_frequency_is_no_lower_bound(self):
        """f constant: G = f X and sigma_i(G) = f sigma_i(X) exactly. With f spread, f_max sigma_i(X) is
        not a lower bound (the mutant of (3) that would make ER.5 stronger)."""
        P, counts, f = up.construct_logit_gradient(20, 12, seed=7, spread=1)
        G = up.logit_gradient(P, counts, 3 * f, exact=True)
        X = up.logit_gradient(P, counts, f, exact=True)
        assert (G == 3 * X).all()
        P, counts, f = up.construct_logit_gradient(20, 12, seed=7, spread=5)
        G, X = up.logit_gradient(P, counts, f), up.logit_gradient(P, counts, np.ones_like(f))
        s_G, s_X = np.linalg.svd(G, compute_uv=False), np.linalg.svd(X, compute_uv=False)
        margin = tolerance.svd_rank_margin(G.shape, U, 0.0, s_G[0]) + f.max() * tolerance.svd_rank_margin(
            X.shape, U, 0.0, s_X[0]
        )
        assert np.any(s_G[:11] < f.max() * s_X[:11] - margin)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: up.first_order_update(np.ones((3, 2)), np.ones((5, 3)), np.ones((3, 5))), "W: hidden size 3 differs"),
        (lambda: up.first_order_update(np.ones((3, 2)), np.ones((5, 2)), np.ones((3, 4))), "G: shape (3, 4) does not"),
        (
            lambda: up.first_order_update(np.ones((3, 6)), np.ones((5, 6)), np.ones((3, 5))),
            "D=6 exceeds the vocabulary",
        ),
        (lambda: up.exact_step(np.ones(3), np.ones((5, 1)), np.ones((3, 5))), "H: expected a 2-D array"),
        (lambda: up.exact_step(np.ones((3, 1)), np.ones((5, 1)), np.full((3, 5), np.nan)), "G: non-finite value"),
        (lambda: up.tail_norm(np.ones((3, 3)), 4), "rank: 4 is out of range"),
        (lambda: up.best_scale(np.ones((2, 2)), np.ones((2, 3))), "delta: shape (2, 2) differs"),
        (lambda: up.construct_step(3, 5, 6, 0), "D: 6 is out of range"),
        (lambda: up.tail_norm(np.array([["a"]]), 0), "G: expected a real dtype"),
    ],
)
def test_bad_input_is_refused_with_a_named_argument(call, message):
    with pytest.raises(InputError) as error:
        call()
    assert message in str(error.value)


def test_a_rounded_truncated_svd_is_not_a_counterexample():
    """Pinned from `rankwall search updates.eckart-young`: a float G_2D beat the tail by an ulp.
    The exact route rebuilds Delta from its definition, so this is never reported violated."""
    instance = uc.Step(contexts=3, V=3, D=1, seed=0, integers=False, eta_num=1, eta_den=1, delta="truncated-svd")
    assert REGISTRY["updates.eckart-young"].check(instance, resolve("numpy")).status is not Status.VIOLATED
    verdict = REGISTRY["updates.eckart-young-attained"].check(instance, resolve("numpy"))
    assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()


class TestIntegerInputsAreExact:
    """Integer matrices are computed exactly (python-flint), never wrapped around in a fixed width."""

    INT8 = tuple(np.array(m, dtype=np.int8) for m in ([[100]], [[100], [1]], [[100, 1]]))

    def test_int8_first_order_update_is_exact(self):
        update = up.first_order_update(*self.INT8)
        assert update.tolist() == [[-2000100, -20001]]
        assert all(type(v) is int for v in update.ravel())

    def test_int8_exact_step_is_exact(self):
        # H' = 100 - 10001 = -9901, W' = (100 - 10000, 1 - 100): H'W'^T - HW^T
        assert up.exact_step(*self.INT8).tolist() == [[-9901 * -9900 - 10000, -9901 * -99 - 100]]

    def test_unsigned_inputs_are_exact(self):
        H, W, G = (m.astype(np.uint8) for m in self.INT8)
        assert up.first_order_update(H, W, G).tolist() == [[-2000100, -20001]]

    @pytest.mark.parametrize("eta", [1, 3, np.int64(-2)])
    def test_int64_overflow_is_computed_exactly(self, eta):
        big = 2**40
        H, W, G = np.array([[big]]), np.array([[big], [3]]), np.array([[big, 5]])
        Ho, Wo, Go = (m.astype(object) for m in (H, W, G))  # Python ints: the reference
        e = int(eta)
        assert up.first_order_update(H, W, G, eta).tolist() == (-e * (Go @ Wo @ Wo.T + Ho @ (Ho.T @ Go))).tolist()
        truth = (Ho - e * (Go @ Wo)) @ (Wo - e * (Go.T @ Ho)).T - Ho @ Wo.T
        assert up.exact_step(H, W, G, eta).tolist() == truth.tolist()
        assert abs(up.first_order_update(H, W, G, eta)[0, 0]) > 2**63

    def test_a_rational_eta_on_integers_stays_exact(self):
        eta = Fraction(1, 3)
        update = up.first_order_update(*self.INT8, eta)
        assert update.tolist() == [[Fraction(-2000100, 3), Fraction(-20001, 3)]]
        H, W, G = (m.astype(object) for m in self.INT8)
        step = up.exact_step(*self.INT8, eta)
        assert step.tolist() == ((H - eta * (G @ W)) @ (W - eta * (G.T @ H)).T - H @ W.T).tolist()
        # Fraction matrices too (the reference: NumPy's object matmul on Python Fractions)
        H = np.array([[Fraction(1, 2)]], dtype=object)
        W = np.array([[Fraction(1, 3)], [2]], dtype=object)
        G = np.array([[1, Fraction(-1, 5)]], dtype=object)
        expected = -(G @ W @ W.T + H @ (H.T @ G))
        assert up.first_order_update(H, W, G).tolist() == expected.tolist()

    def test_a_float_eta_takes_the_float_path(self):
        update = up.first_order_update(*self.INT8, 0.5)
        assert update.dtype == np.float64
        assert update.tolist() == [[-1000050.0, -10000.5]]
        H, W, G = (m.astype(np.float32) for m in self.INT8)  # float matrices keep their dtype
        assert up.first_order_update(H, W, G, 1).dtype == np.float32


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: up.first_order_update(np.ones((1, 1), dtype=bool), np.ones((2, 1)), np.ones((1, 2))), "H: boolean"),
        (lambda: up.first_order_update([[1, 2], [3]], np.ones((3, 2)), np.ones((2, 3))), "H: ragged nested sequence"),
        (lambda: up.first_order_update([[1]], [[1], [True]], [[1, 1]]), "W: boolean True at index (1, 0)"),
        (lambda: up.first_order_update([[1]], [[1], [2]], [["1", 1]]), "G: string '1' at index (0, 0)"),
        (lambda: up.first_order_update([[1]], [[1], [2]], [[1, 1]], True), "eta: expected a real number, got True"),
        (lambda: up.first_order_update([[1]], [[1], [2]], [[1, 1]], "1"), "eta: expected a real number, got '1'"),
        (lambda: up.exact_step([[1]], [[1], [2]], [[1, 1]], float("nan")), "eta: non-finite step size nan"),
        (lambda: up.exact_step([[1]], [[1], [2]], [[1, 1]], np.ones(2)), "eta: expected a real number"),
        (lambda: up.tail_norm([[1.0, 2.0], [3.0]], 1), "G: ragged nested sequence"),
        (lambda: up.best_scale(np.array([[True]]), np.ones((1, 1))), "delta: boolean"),
    ],
)
def test_inputs_that_cannot_be_computed_are_refused(call, message):
    with pytest.raises(InputError) as error:
        call()
    assert message in str(error.value), str(error.value)


# --------------------------------------------------------------------------- the claims


def step_instance(
    integers: bool, delta: uc.DeltaKind = "first-order", *, contexts: int = 30, V: int = 40, D: int = 3
) -> uc.Step:
    return uc.Step(contexts, V, D, seed=3, integers=integers, eta_num=1, eta_den=3, delta=delta)


RANK_CLAIMS = [("updates.first-order-rank", "first-order"), ("updates.exact-step-rank", "exact-step")]


def plant_a_full_rank_update(monkeypatch, float_route: bool = True, exact_route: bool = True) -> None:
    """The update planted as update + G (rank min(C, V) = 30 > 2D = 6) in the float route, the exact one, or both."""
    real_float, real_exact = uc.float_update, uc.exact_update
    if float_route:
        monkeypatch.setattr(
            uc,
            "float_update",
            lambda ctx, kind: (lambda m, *rest: (m + uc.step_in(ctx).G, *rest))(*real_float(ctx, kind)),
        )
    if exact_route:
        monkeypatch.setattr(uc, "exact_update", lambda ctx, kind: real_exact(ctx, kind) + uc.exact_inputs(ctx)[2])


class TestRankClaimsAreCertified:
    """'rank ≤ 2D' holds only from an exact rank or a certified upper bound; a lower bound proves only a violation."""

    @pytest.mark.parametrize(("claim_id", "kind"), RANK_CLAIMS)
    def test_gaussian_instances_hold_by_the_factorization_through_2D_columns(self, claim_id, kind):
        """The upper end (residual of the 2D-column product within its bound) proves it; here the SVD's
        lower end meets it at 2D, so the rank is pinned by both ends: two-sided."""
        verdict = REGISTRY[claim_id].check(step_instance(False, kind), NUMPY)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.TWO_SIDED, verdict.to_json()
        assert "upper from the factorization through 6 columns" in verdict.method
        assert verdict.certificate["factorization_residual"] <= verdict.certificate["residual_bound"]

    @pytest.mark.parametrize(("claim_id", "kind"), RANK_CLAIMS)
    def test_integer_instances_hold_by_an_exact_rank(self, claim_id, kind):
        """Scaled to integers, the update's rank is computed exactly (python-flint), in both routes."""
        verdict = REGISTRY[claim_id].check(step_instance(True, kind), NUMPY)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()
        assert (
            verdict.lhs == 6 and "lower from exact rank" in verdict.method and "upper from exact rank" in verdict.method
        )

    @pytest.mark.parametrize("integers", [False, True])
    @pytest.mark.parametrize(("claim_id", "kind"), RANK_CLAIMS)
    def test_a_planted_full_rank_update_never_holds(self, monkeypatch, claim_id, kind, integers):
        """The update planted as update + G (rank 30 > 2D = 6) in both routes: the certificates refute it."""
        plant_a_full_rank_update(monkeypatch)
        verdict = REGISTRY[claim_id].check(step_instance(integers, kind), NUMPY)
        assert verdict.status is Status.VIOLATED and verdict.lhs == 30, verdict.to_json()

    @pytest.mark.parametrize(("claim_id", "kind"), RANK_CLAIMS)
    def test_a_blind_float_route_leaves_the_rank_to_the_exact_route(self, monkeypatch, claim_id, kind):
        """A full-rank planted float update seen by an SVD that finds nothing: its lower bound of 0 proves no
        'rank ≤ 2D' and its residual exceeds the factorization's bound, so the interval straddles 6 and the
        exact rank over Q of the instance's own update decides (it holds); planted there too, it is refuted."""
        plant_a_full_rank_update(monkeypatch, exact_route=False)
        monkeypatch.setattr(np.linalg, "svd", lambda a, compute_uv=True, **_: np.zeros(min(a.shape)))
        instance = step_instance(False, kind)
        measured = REGISTRY[claim_id].measure(instance, NUMPY)
        assert "the shape" in measured.method and measured.certificate["rank_lower"] == 0, measured
        verdict = REGISTRY[claim_id].check(instance, NUMPY)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()
        assert "exact rank" in verdict.method
        plant_a_full_rank_update(monkeypatch, float_route=False)
        verdict = REGISTRY[claim_id].check(instance, NUMPY)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT, verdict.to_json()

    @pytest.mark.parametrize(
        ("claim_id", "mutant"), [(RANK_CLAIMS[0][0], "at-most-2D-minus-1"), (RANK_CLAIMS[1][0], "at-most-D")]
    )
    def test_each_rank_mutant_is_refuted_by_a_certified_rank(self, claim_id, mutant):
        """rank ≤ 2D − 1 and rank ≤ D fail wherever the rank 2D is attained (2D < min(C, V)): a violation
        goes to the exact rank over Q (on Gaussians the float interval, pinned at 2D, agrees with it); at
        the edge witnesses where the shape caps the rank below 2D, rank ≤ 2D − 1 holds."""
        planted = REGISTRY[claim_id].mutants[mutant]
        attained = [i for i in planted.witnesses(16) if 2 * i.D < min(i.contexts, i.V)]
        capped = [i for i in planted.witnesses(16) if min(i.contexts, i.V) <= 2 * i.D - 1]
        assert capped and all(planted.check(i, NUMPY).status is Status.HOLDS for i in capped)
        verdicts = [planted.check(i, NUMPY) for i in attained]
        assert all(v.status is Status.VIOLATED for v in verdicts), [v.to_json() for v in verdicts]
        assert all(v.certified_by is Certification.EXACT and v.lhs > v.rhs for v in verdicts)
        gaussian = [i for i in attained if not i.integers]
        measured = [planted.measure(i, NUMPY) for i in gaussian]
        assert gaussian and all("lower from SVD + Weyl" in m.method and m.lhs > m.rhs for m in measured)

    @pytest.mark.parametrize(("factor", "asked"), [("1", 6), ("0.999", 5), ("1/2", 2)])
    @pytest.mark.parametrize("integers", [False, True])
    def test_the_integer_bound_tightens_strictly(self, factor, asked, integers):
        """rank ≤ 2D = 6 tightened by F asks rank ≤ ⌈6F⌉ − 1, which the rank 6 violates for every F < 1."""
        verdict = REGISTRY["updates.first-order-rank"].check(step_instance(integers), NUMPY, Fraction(factor))
        assert verdict.rhs == asked and verdict.lhs == 6, verdict.to_json()
        assert verdict.status is (Status.HOLDS if factor == "1" else Status.VIOLATED)

    @pytest.mark.parametrize(
        ("claim_id", "factor"), [(c, "1/2") for c, _ in RANK_CLAIMS] + [("updates.eckart-young", "2")]
    )
    def test_tightened_bounds_are_refuted_by_search(self, claim_id, factor):
        """rank ≤ D − 1 fails (the rank 2D is attained); 2·tail ≤ residual fails for the truncated SVD."""
        result = search(REGISTRY[claim_id], NUMPY, tighten=Fraction(factor), budget=CI_SEARCH_BUDGET)
        found = result.counterexample
        assert found is not None and found.status is Status.VIOLATED and found.certified_by is not None


def planted_residual(monkeypatch, delta: str) -> None:
    """The residual quantity planted as that of Δ = G (rank 30 > 2D, residual 0) or Δ = 0 (residual ‖G‖),
    in both routes, through the family's own residual functions."""

    def measured(ctx):
        b = uc.step_in(ctx)
        return uc.residual_measurement(b.G if delta == "G" else 0 * b.G, 0.0, b.G, b.u)

    def exactly(ctx):
        G = uc.exact_inputs(ctx)[2]
        return Real.of(uc.rational_residual_square(ctx, G if delta == "G" else G.times(0))).sqrt()

    monkeypatch.setattr(uc.residual, "measure_fn", measured)
    monkeypatch.setattr(uc.residual, "exact_fn", exactly)


class TestEckartYoungClaims:
    """The residual claims can fail: a planted update of full rank beats the tail, and both mutants are refuted."""

    @pytest.mark.parametrize(
        ("claim_id", "planted"),
        [("updates.eckart-young", "G"), ("updates.eckart-young-attained", "zero")],
    )
    def test_a_planted_wrong_side_is_violated(self, monkeypatch, claim_id, planted):
        """Δ planted as G itself (rank 30 > 2D: residual 0 below the tail), or as 0 (residual ‖G‖ above it)."""
        planted_residual(monkeypatch, planted)
        verdict = REGISTRY[claim_id].check(step_instance(False, "truncated-svd"), NUMPY)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.TWO_SIDED, verdict.to_json()

    @pytest.mark.parametrize(
        ("claim_id", "mutant"),
        [("updates.eckart-young", "one-more-tail-value"), ("updates.eckart-young-attained", "rank-D-truncation")],
    )
    def test_each_mutant_is_refuted_two_sided(self, claim_id, mutant):
        """One more tail value, or a rank-D truncation, is refuted by a float margin or by balls."""
        planted = REGISTRY[claim_id].mutants[mutant]
        verdicts = [planted.check(i, NUMPY) for i in planted.witnesses(16)]
        violated = [v for v in verdicts if v.status is Status.VIOLATED]
        assert violated and all(v.certified_by is Certification.TWO_SIDED for v in violated)

    def test_the_true_claims_say_what_certifies_them(self):
        """The inequality by its float margin against the tolerance (two-sided); the identity exactly: the
        residual of the ideal truncated SVD and the tail are one form in G's eigenvalues."""
        for claim_id, delta, certified_by in (
            ("updates.eckart-young", "first-order", Certification.TWO_SIDED),
            ("updates.eckart-young-attained", "truncated-svd", Certification.EXACT),
        ):
            verdict = REGISTRY[claim_id].check(step_instance(False, delta), NUMPY)
            assert verdict.status is Status.HOLDS and verdict.certified_by is certified_by, verdict.to_json()
        assert verdict.method.startswith("square roots compared exactly"), verdict.method

    def test_tied_singular_values_leave_the_identity_exact_and_the_moved_truncation_undecided(self, monkeypatch):
        """G = diag(2, 1, 1) has two equal singular values across the cut at 2D = 2: the identity is the same
        form whatever eigenvectors one picks (exact); the moved truncation (P_2 + εP_2EP_2)G names no single
        matrix there (P_2 is not unique), and no certified eigenvector isolates one: inconclusive, never
        violated."""
        G = np.diag([2, 1, 1])
        monkeypatch.setattr(up, "construct_step", lambda *a, **k: (np.ones((3, 1), int), np.ones((3, 1), int), G))
        attained = REGISTRY["updates.eckart-young-attained"].check(
            uc.Step(3, 3, 1, integers=True, delta="truncated-svd"), NUMPY
        )
        assert attained.status is Status.HOLDS and attained.certified_by is Certification.EXACT, attained.to_json()
        assert uc.spectral_projector(uc.gram(uc.ExactMatrix.of(G))[0], 2) is None
        moved = uc.Step(3, 3, 1, integers=True, delta="near-truncated-svd")
        verdict = REGISTRY["updates.eckart-young"].check(moved, NUMPY)
        assert verdict.status is Status.INCONCLUSIVE, verdict.to_json()

    def test_the_truncated_svd_is_the_ideal_one_not_the_float_svd(self):
        """The float truncated SVD, read exactly, has full rank (rounding fills in the other singular values)
        and its residual differs from the tail; the quantity's exact value is the ideal G_2D's, which equals
        the tail exactly, and its reference forms G_2D from eigenvectors at twice 256 bits."""
        import mpmath

        instance = step_instance(False, "truncated-svd", contexts=12, V=16, D=2)
        ctx = Context(instance, NUMPY)
        G = uc.step_in(ctx).G
        float_truncation = uc.ExactMatrix.of(up.truncated_svd(G, 4))
        assert uc.integer_rank(float_truncation.integers)[0] == 12
        with exact.precision(128):
            rounded = Real.of(uc.rational_residual_square(ctx, float_truncation)).sqrt()
            ideal, tail = uc.residual.exact(ctx), uc.tail.exact(ctx)
            assert not rounded.ball.overlaps(tail.ball)
        assert ideal.radicand is not None and tail.radicand is not None
        with mpmath.workprec(256):
            reference = uc.residual.reference(ctx)
        assert ideal.ball.lower() <= mpmath.mpf(reference) * (1 + 2**-200) and ideal.ball.upper() >= reference * (
            1 - mpmath.mpf(2) ** -200
        )


def test_a_truncation_reference_where_an_entry_of_the_residual_vanishes():
    """Found by the certifier (tests/test_certifier.py, --runslow): G = [[-1, 1], [-2, -2]] has a diagonal
    Gram matrix, so an entry of cG_1 − G is 0 up to the ball's radius, where python-flint's x ** 2 is NaN;
    the reference squares by a product and agrees with the exact value."""
    import mpmath

    case = uc.Step(contexts=2, V=2, D=1, seed=47666, integers=True, eta_num=1, eta_den=1, delta="first-order")
    assert not quantity_disagreements(uc.rank_D_residual, [case], NUMPY)
    with mpmath.workprec(256):
        assert abs(uc.rank_D_residual.reference(Context(case, NUMPY)) - mpmath.sqrt(2)) < mpmath.mpf(2) ** -250


@pytest.mark.parametrize(
    ("claim_id", "delta"),
    [("updates.first-order-rank", "first-order"), ("updates.eckart-young", "exact-step")],
)
def test_gaussian_steps_are_computed_in_the_backend_and_its_dtype(claim_id, delta):
    """On array-api-strict float32 the step runs there and its tolerance carries float32's unit roundoff:
    about 2^29 times float64's (the rank's Weyl margin, or the residual comparison's tolerance)."""
    strict = resolve("array-api-strict", "no_float64", "float32")
    instance = step_instance(False, delta)
    single, double = (REGISTRY[claim_id].check(instance, backend) for backend in (strict, NUMPY))
    assert single.status is double.status is Status.HOLDS, (single.to_json(), double.to_json())
    assert "array-api-strict float32" in single.method and "numpy float64" in double.method
    if claim_id.endswith("rank"):
        ratio = single.certificate["weyl_margin"] / double.certificate["weyl_margin"]
    else:
        ratio = single.tolerance / double.tolerance
    assert 0.9 * 2**29 < ratio < 1.1 * 2**29, ratio


# ----------------------------------------------------------------- checked measurements (issues 18 and 26)


def test_a_measure_of_the_wrong_quantity_is_caught_by_the_reference(monkeypatch):
    """Planted: the rank of one term, ηGWWᵀ (at most D), in place of the whole first-order update, in both
    routes. Every verdict still holds (D ≤ 2D); the reference's exact rank of the update formed in rationals
    disagrees."""
    claim = REGISTRY["updates.first-order-rank"]
    witnesses = claim.witnesses(16)
    assert not quantity_disagreements(uc.first_order_rank, witnesses, NUMPY)
    assert not disagreements(claim, witnesses, NUMPY)

    def one_term_float(ctx):
        b = uc.step_in(ctx)
        lo = exact.weyl_rank_lower_bound(b.G @ b.W @ b.W.T, b.u)[0]
        hi = min(ctx.case.D, *b.G.shape)
        return uc.RankInterval(min(lo, hi), hi, "SVD of GWWᵀ", "the D columns of W")

    def one_term_exact(ctx):
        _, W, G = uc.exact_inputs(ctx)
        rank = uc.integer_rank((G @ W @ W.T).integers)[0]
        return uc.RankInterval(rank, rank, "exact rank of GWWᵀ", "exact rank of GWWᵀ", exact=True)

    monkeypatch.setattr(uc.first_order_rank, "measure_fn", one_term_float)
    monkeypatch.setattr(uc.first_order_rank, "exact_fn", one_term_exact)
    assert all(claim.check(i, NUMPY).status is Status.HOLDS for i in witnesses)
    found = quantity_disagreements(uc.first_order_rank, witnesses, NUMPY)
    assert found and all("outside the" in why for why in found), found[:2]
    assert disagreements(claim, witnesses, NUMPY)


def test_the_equality_case_catches_a_constant_off_by_1e_15():
    """(1 + 10⁻¹⁵)·tail ≤ ‖cΔ − G‖ fails only where the residual meets the tail: on the witness moved from
    the truncated SVD by 2⁻³⁰ within its column space (residual above the tail by about 10⁻¹⁸ relatively),
    which no float bound reaches (the moved truncation has none) and the balls decide; the true claim holds."""
    claim = REGISTRY["updates.eckart-young"]
    near = [i for i in claim.witnesses(16) if i.delta == "near-truncated-svd" and 2 * i.D < min(i.contexts, i.V)]
    assert near
    factor = 1 + Fraction(1, 10**15)
    for instance in near:
        assert math.isnan(claim.measure(instance, NUMPY, factor).lhs)
        assert claim.check(instance, NUMPY, factor).status is Status.VIOLATED
        assert claim.check(instance, NUMPY).status is Status.HOLDS


def test_rank_measurements_carry_a_continuous_closeness():
    """The integer bound gets a continuous target for the search: log10 σ_{2D+1}/σ_1 of the update, far below
    0 where the rank is at most 2D (rounding level)."""
    claim = REGISTRY["updates.first-order-rank"]
    for integers in (False, True):
        closeness = claim.measure(step_instance(integers), NUMPY, Fraction(1)).certificate["closeness"]
        assert closeness < -10, closeness


def test_a_zero_tail_is_decided_exactly():
    """At 2D ≥ min(C, V) the tail is 0 and Δ rational: the exact route decides the residual claims in exact
    rationals (the attained identity exactly equal; a candidate's residual exactly positive, or exactly 0
    where Δ is a multiple of G), and the attained identity's verdict is exact."""
    for claim_id in ("updates.eckart-young", "updates.eckart-young-attained"):
        claim = REGISTRY[claim_id]
        zero = [i for i in claim.witnesses(16) if 2 * i.D >= min(i.contexts, i.V)]
        judged = [claim.judge_exactly(i, Fraction(1)) for i in zero]
        assert zero and all(j.certified_by is Certification.EXACT and j.rhs == 0 for j in judged)
        assert all(j.sign in (0, 1) for j in judged)
    attained = REGISTRY["updates.eckart-young-attained"]
    verdicts = [attained.check(i, NUMPY) for i in attained.witnesses(16) if 2 * i.D >= min(i.contexts, i.V)]
    assert all(v.status is Status.HOLDS and v.certified_by is Certification.EXACT for v in verdicts)


def test_verify_at_1024_adds_a_case_at_1024():
    """verify at V ≥ 49 adds a case at V itself (up to 1,024): the margins grow with V; the Gaussian step
    holds for the first-order rank (the other claims: the slow test below)."""
    for claim in (c for c in REGISTRY if c.id.startswith("updates.")):
        assert [i for i in claim.witnesses(1024) if i.V == 1024], claim.id
    claim = REGISTRY["updates.first-order-rank"]
    large = [i for i in claim.witnesses(1024) if i.V == 1024 and not i.integers]
    assert large and all(claim.check(i, NUMPY).status is Status.HOLDS for i in large)


@pytest.mark.slow
def test_a_large_vocabulary_witness_holds():
    """Every updates claim holds on its witnesses at V = 1,024 (about 15 s)."""
    for claim in (c for c in REGISTRY if c.id.startswith("updates.")):
        large = [i for i in claim.witnesses(1024) if i.V == 1024]
        assert large and all(claim.check(i, NUMPY).status is Status.HOLDS for i in large), claim.id


# ----------------------------------------------------------------- the logit gradient's claims (issue 30, item 3)


def gradient(**fields) -> uc.Gradient:
    return uc.Gradient(**{"contexts": 12, "V": 8, "seed": 1, **fields})


class TestTheLogitGradientClaims:
    """UP.2 (1) and (3) as claims: rank G ≤ min(C₊, V − 1), and f_min σ_i(X) ≤ σ_i(G) ≤ f_max σ_i(X)."""

    RANK = REGISTRY["updates.gradient-rank"]
    SPECTRUM = REGISTRY["updates.gradient-singular-values"]

    @pytest.mark.parametrize(("fields", "rank"), [({"idle": 0}, 7), ({"idle": 6}, 6), ({"idle": 11}, 1)])
    def test_the_rank_is_pinned_at_min_c_plus_v_minus_one(self, fields, rank):
        """The SVD's lower end meets the structural upper end (the nonzero rows, less the kernel vector 1,
        counted exactly on the instance): the rank min(C₊, V − 1) is attained, two-sided."""
        verdict = self.RANK.check(gradient(**fields), NUMPY)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.TWO_SIDED, verdict.to_json()
        assert verdict.lhs == verdict.rhs == rank and "kernel vector 1" in verdict.method

    def test_float32_rows_do_not_sum_to_one_but_the_exact_object_does(self):
        """In float32 the rows of P sum to 1 only within rounding; the exact instance normalises each row
        exactly, so 1 is in its kernel and the upper end V − 1 holds, in both routes."""
        strict = resolve("array-api-strict", "no_float64", "float32")
        case = gradient(contexts=20)
        built = uc.build_gradient(case, strict)
        assert np.abs(built.raw.sum(axis=1) - 1).max() > 0
        assert uc.exact_gradient(Context(case, strict)).kernel
        verdict = self.RANK.check(case, strict)
        assert verdict.status is Status.HOLDS and verdict.lhs == verdict.rhs == 7, verdict.to_json()

    def test_a_blind_svd_leaves_the_rank_to_the_exact_route(self, monkeypatch):
        """With an SVD that finds nothing the float interval is [0, 7]: its lower end proves no violation
        and its upper end alone no claim, so the exact rank over Q decides: rank G = 7 holds, exactly, and
        the mutant rank ≤ V − 2 = 6 is refuted, exactly."""
        monkeypatch.setattr(np.linalg, "svd", lambda a, compute_uv=True, **_: np.zeros(min(a.shape)))
        case = gradient(contexts=20)
        assert self.RANK.measure(case, NUMPY).certificate["rank_lower"] == 0
        held = self.RANK.check(case, NUMPY)
        assert held.status is Status.HOLDS and held.certified_by is Certification.EXACT, held.to_json()
        refuted = self.RANK.mutants["at-most-V-minus-2"].check(case, NUMPY)
        assert refuted.status is Status.VIOLATED and refuted.certified_by is Certification.EXACT, refuted.to_json()

    def test_constant_frequencies_are_decided_exactly(self):
        """f constant on the active contexts: G₊ = fX, so σ_i(G) = f·σ_i(X) as one form and both sides are 0
        exactly; beyond the rank both singular values are 0 exactly."""
        for case in (gradient(spread=1, index=3), gradient(contexts=12, idle=2, index=8)):
            verdict = self.SPECTRUM.check(case, NUMPY)
            assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()

    def test_spread_frequencies_are_decided_two_sided_and_the_mutant_refuted(self):
        case = gradient(spread=20, idle=3, index=2)
        verdict = self.SPECTRUM.check(case, NUMPY)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.TWO_SIDED, verdict.to_json()
        refuted = self.SPECTRUM.mutants["at-most-the-least-frequency"].check(case, NUMPY)
        assert refuted.status is Status.VIOLATED and refuted.certified_by is Certification.TWO_SIDED, refuted.to_json()

    def test_the_least_frequency_over_every_context_is_caught_by_the_reference(self, monkeypatch):
        """Planted: f_min over every context, the idle ones included (0), in place of the active ones. The
        claim then reads 0 ≤ σ_i(G) ≤ f_max σ_i(X), still true: every verdict holds; the reference (the least
        active frequency) disagrees wherever a context is idle."""
        cases = [c for c in self.SPECTRUM.witnesses(8) if c.idle > 0]
        assert not quantity_disagreements(uc.least_frequency, cases, NUMPY)
        monkeypatch.setattr(uc.least_frequency, "measure_fn", lambda ctx: Measured(0.0, 0.0))
        monkeypatch.setattr(uc.least_frequency, "exact_fn", lambda ctx: Real.of(0))
        assert all(self.SPECTRUM.check(c, NUMPY).status is Status.HOLDS for c in cases)
        found = quantity_disagreements(uc.least_frequency, cases, NUMPY)
        assert len(found) == len(cases), found

    @pytest.mark.parametrize(
        ("fields", "message"),
        [({"idle": 12}, "idle: 12 is out of range"), ({"index": 9}, "index: 9 is out of range")],
    )
    def test_a_case_outside_the_constructor_is_refused(self, fields, message):
        with pytest.raises(InputError, match=message):
            self.RANK.check(gradient(**fields), NUMPY)
