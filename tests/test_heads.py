"""Tests of theory/heads.py and the heads.* claims: five heads, their log-probability rank, their Jacobians."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

import rankwall.checks.claims.heads as hc
from rankwall.checks import exact
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.quantities import Context
from rankwall.checks.engine.verdict import REGISTRY, Certification, RankInterval, Status
from rankwall.checks.run.search import search
from rankwall.checks.run.strategies import CI_SEARCH_BUDGET
from rankwall.theory import heads as hd
from rankwall.theory.validation import InputError


def log_probs(head, K=3, N=60, V=80, d=6, scale=3.0, seed=0):
    theta = hd.construct_head_parameters(V, d, K, seed, scale=scale)
    H = np.random.default_rng(seed + 1).standard_normal((N, d))
    return theta, H, hd.log_probabilities(head, theta, H)


@pytest.mark.parametrize("head", hd.HEADS)
def test_every_head_gives_normalised_log_probabilities(head):
    _, _, L = log_probs(head)
    np.testing.assert_allclose(np.exp(L).sum(axis=1), 1.0, rtol=1e-13)


def test_mos_mixes_in_log_space_without_a_clamp():
    """Components whose probabilities underflow still give a finite, exact log-mixture."""
    _theta, _H, L = log_probs("mos", scale=400.0)
    assert np.all(np.isfinite(L))
    np.testing.assert_allclose(np.exp(L).sum(axis=1), 1.0, rtol=1e-12)


def test_moc_is_a_softmax_of_the_mixed_state():
    theta, H, L = log_probs("moc")
    mixed = hd.effective_hidden("moc", theta, H)
    z = mixed @ theta.W.T
    np.testing.assert_allclose(
        L, z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) - z.max(1, keepdims=True), atol=1e-12
    )


@pytest.mark.parametrize(
    ("head", "bounded"),
    [("softmax", True), ("moc", True), ("mos", False), ("sigsoftmax", False), ("piecewise-linear", False)],
)
def test_rank_of_log_probabilities(head, bounded):
    _, _, L = log_probs(head, d=6)
    rank = np.linalg.matrix_rank(L, tol=1e-9 * np.linalg.norm(L, 2))
    assert (rank <= 7) if bounded else (rank > 7)


def test_sigsoftmax_is_stable_for_huge_logits():
    _, _, L = log_probs("sigsoftmax", scale=1e4)
    assert np.all(np.isfinite(L))


@pytest.mark.parametrize("head", hd.HEADS)
def test_jacobian_matches_finite_differences_and_has_rank_d(head):
    theta, H, _ = log_probs(head)
    h = torch.tensor(H[0], dtype=torch.float64)
    J = torch.autograd.functional.jacobian(lambda x: hd.log_probabilities(head, theta, x), h).numpy()
    step = 1e-6
    e = np.zeros(6)
    e[2] = step
    difference = (hd.log_probabilities(head, theta, H[0] + e) - hd.log_probabilities(head, theta, H[0] - e)) / (
        2 * step
    )
    np.testing.assert_allclose(J[:, 2], difference, atol=1e-5)
    assert J.shape == (80, 6) and np.linalg.matrix_rank(J) == 6  # d: 1 is not in col W (Gaussian W)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: hd.log_probabilities("nope", hd.construct_head_parameters(5, 2, 1, 0), np.ones((1, 2))),
            "head: unknown head",
        ),
        (
            lambda: hd.log_probabilities("softmax", hd.construct_head_parameters(5, 2, 1, 0), np.ones((1, 3))),
            "h: hidden size 3",
        ),
        (lambda: hd.construct_head_parameters(1, 2, 1, 0), "V: 1 is out of range"),
        (lambda: hd.construct_head_parameters(5, 2, 0, 0), "K: 0 is out of range"),
        (
            lambda: hd.effective_hidden("mos", hd.construct_head_parameters(5, 2, 2, 0), np.ones((1, 2))),
            "no single effective",
        ),
    ],
)
def test_bad_input_is_refused_with_a_named_argument(call, message):
    with pytest.raises(InputError) as error:
        call()
    assert message in str(error.value)


# --------------------------------------------------------------------------- the heads.* claims

NUMPY = resolve("numpy")


def head_instance(head, d=8, V=64, N=40, K=3, constant_column=False, seed=None):
    seed = d + K if seed is None else seed
    return hc.HeadCase(head=head, N=N, V=V, d=d, K=K, seed=seed, scale=3.0, constant_column=constant_column)


@pytest.mark.parametrize("q_seed", [0, 1])
def test_lemma_rank_of_a_projected_matrix_is_rank_with_ones_minus_one(q_seed):
    """rank((I - 1q^T) B) = rank[B, 1] - 1 for every q with 1^T q = 1: the d - 1 of Eq. 10's softmax case."""
    rng = np.random.default_rng(q_seed)
    for W in (rng.standard_normal((12, 4)), np.hstack([np.full((12, 1), 0.75), rng.standard_normal((12, 3))])):
        log_q = np.log(rng.dirichlet(np.ones(12)))
        expected = np.linalg.matrix_rank(np.hstack([W, np.ones((12, 1))])) - 1
        assert hc.rational_softmax_jacobian_rank(W, log_q) == expected


def test_the_exact_piecewise_jacobian_is_the_autograd_jacobian():
    """The rational Jacobian of the piecewise-linear head agrees with autograd to rounding."""
    theta, H, _ = log_probs("piecewise-linear", V=30, d=5)
    exact_rows = hc.PiecewiseJacobian.at(theta, H[0]).rows
    J = hc.autograd_jacobian("piecewise-linear", theta, H[0])
    np.testing.assert_allclose(np.array([[float(x) for x in row] for row in exact_rows]), J, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("head", "K"), [("softmax", 3), ("moc", 3), ("mos", 1)])
def test_jacobian_rank_is_d_minus_1_when_the_ones_vector_is_in_col_w(head, K):
    """A constant column of W puts 1 in col W: the gradient of a softmax of one state loses a dimension."""
    claim = REGISTRY["heads.jacobian-rank"]
    full = claim.check(head_instance(head, K=K), NUMPY)
    dropped = claim.check(head_instance(head, K=K, constant_column=True), NUMPY)
    assert (full.status, full.lhs, full.rhs) == (Status.HOLDS, 8.0, 8.0), full.to_json()
    assert (dropped.status, dropped.lhs, dropped.rhs) == (Status.HOLDS, 7.0, 7.0), dropped.to_json()
    theta, H = hc.contexts(head_instance(head, K=K, constant_column=True))
    sigma = np.linalg.svd(hc.autograd_jacobian(head, theta, H[0]), compute_uv=False)
    assert sigma[-1] < 1e-12 * sigma[0] < sigma[-2]


def test_sigsoftmax_keeps_the_dimension_that_softmax_loses():
    """sigsoftmax's Jacobian (I - 1p^T) G W keeps rank d with a constant column: G^{-1}1 is not in col W."""
    verdict = REGISTRY["heads.jacobian-rank"].check(head_instance("sigsoftmax", constant_column=True), NUMPY)
    assert (verdict.status, verdict.lhs) == (Status.HOLDS, 8.0), verdict.to_json()


@pytest.mark.parametrize(("V", "d", "expected"), [(3, 4, 2), (12, 4, 4)])
def test_sigsoftmax_jacobian_rank_is_min_of_rank_w_and_v_minus_1(V, d, expected):
    """HD.3 (3): rank J = rank W - [G^-1 1 in col W]. With rank W = V (V = 3, d = 4) col W is all of R^V,
    so G^-1 1 is in it, and still rank J = V - 1 = min(rank W, V - 1): equality fails only when
    rank W < V and G^-1 1 is in col W. The claim certifies the rank at both ends on such a head."""
    instance = head_instance("sigsoftmax", d=d, V=V, N=1)
    theta, _ = hc.contexts(instance)
    scale = max(Fraction(x).denominator for x in theta.W.ravel())
    rank_W = exact.exact_rank(np.array([[int(Fraction(x) * scale) for x in row] for row in theta.W], dtype=object))[0]
    verdict = REGISTRY["heads.jacobian-rank"].check(instance, NUMPY)
    assert rank_W == min(V, d) and verdict.status is Status.HOLDS, verdict.to_json()
    assert verdict.lhs == verdict.rhs == expected == min(rank_W, V - 1)


def test_piecewise_linear_gradient_has_the_dimension_of_its_positive_logits():
    """The piecewise-linear head's gradient spans rank W_S (S: the positive logits), here 4 < d = 8 < V - 1."""
    instance = head_instance("piecewise-linear", V=12, seed=5)
    theta, H = hc.contexts(instance)
    positive = int(np.sum(theta.W @ H[0] > 0))
    verdict = REGISTRY["heads.jacobian-rank"].check(instance, NUMPY)
    assert positive == 4 and verdict.status is Status.HOLDS and verdict.lhs == positive, verdict.to_json()


@pytest.mark.parametrize(
    ("claim_id", "instance", "certified_by"),
    [
        ("heads.softmax-moc-rank", head_instance("softmax"), Certification.TWO_SIDED),
        ("heads.nonlinear-heads-exceed", head_instance("mos"), Certification.TWO_SIDED),
        ("heads.jacobian-rank", head_instance("moc"), Certification.TWO_SIDED),
    ],
)
def test_the_certified_interval_decides_the_true_claims(claim_id, instance, certified_by):
    """On these instances both ends meet, so the rank is pinned: two-sided for the bounds and the identity."""
    verdict = REGISTRY[claim_id].check(instance, NUMPY)
    assert verdict.status is Status.HOLDS and verdict.certified_by is certified_by, verdict.to_json()
    assert "rank in [" in verdict.method and "lower from SVD" in verdict.method and "upper from" in verdict.method


def plant(monkeypatch, name, shift):
    """Shift the rank returned by one certificate of rankwall.checks.claims.heads by ``shift``."""
    real = getattr(hc, name)
    monkeypatch.setattr(hc, name, lambda *args: (real(*args)[0] + shift, *real(*args)[1:]))


@pytest.mark.parametrize(
    ("claim_id", "instance", "certificate", "shift", "expected"),
    [
        ("heads.softmax-moc-rank", head_instance("softmax"), "certified_lower_rank", 1, Status.VIOLATED),
        ("heads.softmax-moc-rank", head_instance("moc"), "log_probability_upper", 1, Status.INCONCLUSIVE),
        ("heads.softmax-moc-rank", head_instance("softmax"), "log_probability_upper", -1, Status.INCONCLUSIVE),
        ("heads.nonlinear-heads-exceed", head_instance("mos"), "certified_lower_rank", -40, Status.INCONCLUSIVE),
        ("heads.nonlinear-heads-exceed", head_instance("sigsoftmax"), "log_probability_upper", -1, Status.INCONCLUSIVE),
        ("heads.jacobian-rank", head_instance("softmax"), "certified_lower_rank", 1, Status.VIOLATED),
        ("heads.jacobian-rank", head_instance("softmax"), "certified_lower_rank", -1, Status.INCONCLUSIVE),
        ("heads.jacobian-rank", head_instance("moc", constant_column=True), "jacobian_upper", 1, Status.INCONCLUSIVE),
        ("heads.jacobian-rank", head_instance("piecewise-linear"), "jacobian_upper", -1, Status.INCONCLUSIVE),
    ],
)
def test_a_planted_wrong_certificate_never_holds(monkeypatch, claim_id, instance, certificate, shift, expected):
    """One end of the rank interval planted wrong: the verdict is never `holds` (a contradiction between
    the ends is undecided, a lower end above the claim is a violation)."""
    claim = REGISTRY[claim_id]
    assert claim.check(instance, NUMPY).status is Status.HOLDS
    plant(monkeypatch, certificate, shift)
    verdict = claim.check(instance, NUMPY)
    assert verdict.status is expected, verdict.to_json()


def test_a_failed_factorization_leaves_only_the_shape(monkeypatch):
    """When the residual of [H_eff, -z][W, 1]^T exceeds its rounding bound, no rank ≤ d + 1 is certified."""
    monkeypatch.setattr(hc, "factorization_residual", lambda *args: (1.0, 0.5))
    verdict = REGISTRY["heads.softmax-moc-rank"].check(head_instance("softmax"), NUMPY)
    assert verdict.status is Status.INCONCLUSIVE and "the shape" in verdict.method, verdict.to_json()


@pytest.mark.parametrize(
    ("claim_id", "mutant", "heads"),
    [
        ("heads.softmax-moc-rank", "moc-exceeds-d-plus-1", {"moc"}),
        ("heads.nonlinear-heads-exceed", "mos-k1-exceeds", {"mos"}),
        ("heads.jacobian-rank", "always-full", {"softmax", "moc"}),
    ],
)
def test_each_mutant_is_refuted_by_a_certified_upper_bound(claim_id, mutant, heads):
    """The mutants ask for more rank than a factorization (or an exact rank over Q) allows."""
    planted = REGISTRY[claim_id].mutants[mutant]
    verdicts = [planted.check(instance, NUMPY) for instance in planted.witnesses(64)]
    violated = [v for v in verdicts if v.status is Status.VIOLATED]
    assert {v.instance.head for v in violated} >= heads
    # The certified upper end lies below the rank the mutant asks for (the larger of the two sides).
    assert all(v.certificate["rank_upper"] < max(v.lhs, v.rhs) for v in violated), [v.to_json() for v in violated]
    assert all(v.certified_by in (Certification.ONE_SIDED, Certification.TWO_SIDED) for v in violated)


@pytest.mark.parametrize(
    ("claim_id", "factor", "refuted_by"),
    [("heads.softmax-moc-rank", "0.999", "lower >"), ("heads.nonlinear-heads-exceed", "1.5", "upper <")],
)
def test_tightened_rank_bounds_are_refuted_by_search(claim_id, factor, refuted_by):
    """rank ≤ ⌊F(d + 1)⌋ fails for F < 1 (the rank d + 1 is attained); rank ≥ ⌈F(d + 2)⌉ fails for F > 1
    where the shape caps the rank."""
    result = search(REGISTRY[claim_id], NUMPY, tighten=Fraction(factor), budget=CI_SEARCH_BUDGET)
    assert result.counterexample is not None and result.counterexample.status is Status.VIOLATED
    assert result.counterexample.method.split("; ")[-1].startswith(refuted_by), result.counterexample.to_json()


def test_the_jacobian_claim_is_an_identity_and_refuses_tightening():
    with pytest.raises(ValueError, match="identity"):
        REGISTRY["heads.jacobian-rank"].check(head_instance("softmax"), NUMPY, Fraction(1, 2))


def test_a_logit_at_the_piecewise_kink_is_refused():
    """At z_i = 0 (to rounding) the piecewise-linear head has no certain derivative: outside the claim."""
    theta = hd.construct_head_parameters(5, 2, 1, 0)
    h = np.array([theta.W[0, 1], -theta.W[0, 0]])  # z_0 = W_00 W_01 - W_01 W_00
    with pytest.raises(InputError, match="within rounding of the piecewise-linear head's kink"):
        hc.PiecewiseJacobian.at(theta, h)


@pytest.mark.parametrize(("head", "factorizes"), [("softmax", True), ("moc", True), ("sigsoftmax", False)])
def test_the_factorization_residual_separates_softmax_of_one_state_from_sigsoftmax(head, factorizes):
    """The upper bound d + 1 is certified only when L - [H_eff, -z][W, 1]^T is within its rounding bound."""
    theta, H = hc.contexts(head_instance(head))
    H_eff = hd.effective_hidden("moc" if head == "moc" else "softmax", theta, H)
    residual, bound = hc.factorization_residual(hd.log_probabilities(head, theta, H), H_eff, theta.W, 3, hc.U)
    assert (residual <= bound) is factorizes and (residual < 1e-2 * bound or residual > 1e6 * bound)


def test_witnesses_exist_wherever_the_claims_can_be_tested():
    """V = 2 and 3 carry witnesses, except rank ≥ d + 2, which no V = 2 matrix can reach."""
    counts = {
        c: [len(REGISTRY[c].witnesses(V)) for V in (2, 3, 64)]
        for c in ("heads.softmax-moc-rank", "heads.jacobian-rank")
    }
    assert all(min(n) > 0 for n in counts.values()), counts
    assert [len(REGISTRY["heads.nonlinear-heads-exceed"].witnesses(V)) > 0 for V in (2, 3, 64)] == [False, True, True]


@pytest.mark.parametrize("claim_id", ["heads.softmax-moc-rank", "heads.nonlinear-heads-exceed"])
def test_rank_of_log_probabilities_is_computed_in_the_backend_and_its_dtype(claim_id):
    """On array-api-strict float32 the head and its SVD run there, and the Weyl margin carries float32's unit
    roundoff: 2^29 times float64's, up to the slightly different log-probabilities it multiplies."""
    strict = resolve("array-api-strict", "no_float64", "float32")
    instance = REGISTRY[claim_id].witnesses(64)[-1]
    single, double = (REGISTRY[claim_id].check(instance, backend) for backend in (strict, NUMPY))
    assert single.status is double.status is Status.HOLDS, (single.to_json(), double.to_json())
    assert "(array-api-strict float32)" in single.method and "(numpy float64)" in double.method
    ratio = single.certificate["weyl_margin"] / double.certificate["weyl_margin"]
    assert 0.9 * 2**29 < ratio < 1.1 * 2**29, ratio


# ----------------------------------------------------------------- checked measurements (issue 18, 26)


def logits_rank_plus_one(ctx):
    """A wrong measure of rank(log P), planted: for a head that is a softmax of one state, the rank of its
    logits H_eff Wᵀ plus one (as if the normaliser always added a dimension, which it does not when
    1 ∈ col W); the true measurement for the other heads."""
    case = ctx.case
    if not hc.one_state(case):
        return hc.interval_of(case, hc.built_in(ctx))[0]
    theta, H = hc.contexts(case)
    logits = np.asarray(hc.effective_states(case.head, theta, H)) @ theta.W.T
    rank = exact.weyl_rank_lower_bound(logits, hc.U)[0] + 1
    return RankInterval(rank, rank, "SVD of the logits, plus one", "SVD of the logits, plus one")


class TestAWrongQuantityIsCaughtByItsReference:
    """Issue 26: a quantity measured as the wrong thing, with which every claim of the family still holds,
    is caught by its reference (the log-probabilities written out in 256-bit balls)."""

    def test_the_logit_rank_plus_one_passes_every_claim_but_not_the_reference(self, monkeypatch):
        from reference_check import disagreements, quantity_disagreements

        constant = [head_instance(h, K=K, constant_column=True) for h, K in (("softmax", 1), ("moc", 3))]
        nonlinear = REGISTRY["heads.nonlinear-heads-exceed"].witnesses(16)[:2]
        assert not quantity_disagreements(hc.log_probability_rank, constant, NUMPY)
        monkeypatch.setattr(hc.log_probability_rank, "measure_fn", logits_rank_plus_one)
        monkeypatch.setattr(hc.log_probability_rank, "exact_fn", logits_rank_plus_one)
        for claim_id, cases in (("heads.softmax-moc-rank", constant), ("heads.nonlinear-heads-exceed", nonlinear)):
            assert all(REGISTRY[claim_id].check(c, NUMPY).status is Status.HOLDS for c in cases), claim_id
        found = quantity_disagreements(hc.log_probability_rank, constant, NUMPY)
        assert len(found) == len(constant) and all("outside the measured [9, 9]" in why for why in found), found
        found = disagreements(REGISTRY["heads.softmax-moc-rank"], constant, NUMPY)
        assert len(found) == len(constant) and all("outside the certified" in why for why in found), found

    @pytest.mark.parametrize(
        "quantity",
        [hc.rank_with_ones, hc.weight_rank, hc.positive_rank, hc.stated_jacobian_rank, hc.hidden_size],
        ids=str,
    )
    def test_the_exact_ranks_agree_with_their_fraction_references(self, quantity):
        """The ranks over Q (python-flint) against Gaussian elimination in Fractions, on a full-rank W, a
        constant column, V ≤ d and every head."""
        from reference_check import quantity_disagreements

        cases = [head_instance(h, V=12, N=4, seed=5) for h in hd.HEADS]
        cases += [head_instance("softmax", V=12, N=4, constant_column=True), head_instance("sigsoftmax", V=3, N=4)]
        assert not quantity_disagreements(quantity, cases, NUMPY)

    def test_a_planted_stated_rank_is_caught_where_it_is_wrong(self, monkeypatch):
        """The old statement's parenthetical, d (or d − 1 when 1 ∈ col W), planted as the stated rank: right
        for W of full column rank, wrong at V ≤ d, where the reference (rank [W, 1] − 1) says V − 1."""
        from reference_check import quantity_disagreements

        def parenthetical(ctx):
            case = ctx.case
            return hc.pinned(case.d - int(case.constant_column), "d, or d − 1 when 1 ∈ col W")

        full, narrow = head_instance("softmax", V=12, N=4), head_instance("softmax", V=3, N=4)
        monkeypatch.setattr(hc.stated_jacobian_rank, "measure_fn", parenthetical)
        assert not quantity_disagreements(hc.stated_jacobian_rank, [full], NUMPY)
        assert quantity_disagreements(hc.stated_jacobian_rank, [narrow], NUMPY)


def test_the_jacobian_statement_needs_full_column_rank_for_its_parenthetical():
    """Issue 30 item 7: at V ≤ d, rank[W, 1] − 1 = V − 1 < d for softmax; the claim holds with that value,
    and its statement says the parenthetical d (or d − 1) is for W of full column rank."""
    claim = REGISTRY["heads.jacobian-rank"]
    assert "for W of full column rank: d, or d − 1 when 1 ∈ col W" in claim.statement
    verdict = claim.check(head_instance("softmax", V=3, N=4), NUMPY)
    assert verdict.status is Status.HOLDS and verdict.lhs == verdict.rhs == 2, verdict.to_json()


def test_every_quantity_of_a_float32_context_reads_the_parameters_it_rounded():
    """Issue 26, one exact instance: on float32 the exact route recomputes log P in float64 from the
    float32-rounded θ and H (not from the float64 draw), and rank [W, 1] is of that W."""
    strict = resolve("array-api-strict", "no_float64", "float32")
    case = head_instance("softmax", V=16, N=12)
    ctx = Context(case, strict)
    rebuilt = hc.in_float64(case, hc.built_in(ctx))
    theta, H = hc.contexts(case)
    assert np.array_equal(rebuilt.theta_np.W, theta.W.astype(np.float32).astype(np.float64))
    assert not np.array_equal(rebuilt.theta_np.W, theta.W)
    assert np.array_equal(rebuilt.H, H.astype(np.float32).astype(np.float64))
    assert np.array_equal(hc.rounded_parameters(ctx)[0], rebuilt.theta_np.W)
    exact_interval = hc.log_probability_rank.exact(ctx)
    assert exact_interval.pinned and "numpy float64" in exact_interval.lower, exact_interval
    measured = hc.log_probability_rank.measure(ctx)
    assert "array-api-strict float32" in measured.lower
    assert exact_interval.certificate["weyl_margin"] < 1e-6 * measured.certificate["weyl_margin"]


def test_the_rank_quantities_carry_a_continuous_closeness():
    """An integer quantity gets a continuous target for the search: for rank(log P), how near the d + 1
    ceiling is to being crossed (log10 s_{d+2} for a softmax of one state, at rounding level; −log10 s_{d+2}
    for the other heads, of order one); for the Jacobian, how near its rank is to leaving its upper end."""
    softmax, mos = head_instance("softmax"), head_instance("mos")
    below = hc.log_probability_rank.measure(Context(softmax, NUMPY)).certificate["closeness"]
    above = hc.log_probability_rank.measure(Context(mos, NUMPY)).certificate["closeness"]
    assert below < -10 < -3 < above < 3, (below, above)
    verdict = REGISTRY["heads.softmax-moc-rank"].check(softmax, NUMPY)
    assert verdict.certificate["closeness"] == below
    jacobian = hc.jacobian_rank.measure(Context(softmax, NUMPY)).certificate["closeness"]
    assert -16 < jacobian < 0, jacobian
