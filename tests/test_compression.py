"""Tests of theory/compression.py (Eq. 1 through a QR factor of the head, streamed) and of the
claims compression.*: every side enclosed, every claim able to fail."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import replace
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import scipy.linalg
import scipy.special
from reference_check import disagreements

from rankwall.checks import verdict as verdict_module
from rankwall.checks.backends import float64_copy, resolve
from rankwall.checks.claims import compression as claims
from rankwall.checks.cli import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, main
from rankwall.checks.quantities import declare
from rankwall.checks.search import search
from rankwall.checks.verdict import REGISTRY, Certification, OutsideDomain, Relation, Status, case_from_json
from rankwall.theory import compression as cp
from rankwall.theory._rounding import gamma
from rankwall.theory.validation import InputError

U = 2.0**-53


def qr_error(V: int, D: int) -> float:
    """Householder QR's bound on the distance of the computed Q from an orthonormal basis of the
    computed factorization (Higham, Thm 19.4: ||Q^ - Q||_F <= sqrt(D) gamma~_{VD}, gamma~ taken as
    gamma_{VD}): the tolerance of Q^T Q = I, of W = Q Q^T W and of two libraries' projectors."""
    return math.sqrt(D) * gamma(V * D, U)


def batch(V=300, D=20, tokens=64, rank=None, seed=0):
    W = cp.construct_head(V, D, seed, rank=rank)
    H, targets = cp.construct_batch(tokens, W.shape[1], V, seed + 1)
    return W, np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))


class TestProjection:
    def test_qr_projection_matches_the_pseudo_inverse(self):
        W, G = batch()
        Q, rank = cp.column_basis(W)
        assert rank == 20
        np.testing.assert_allclose(G @ Q @ Q.T, G @ (W @ np.linalg.pinv(W)), atol=1e-13)

    def test_rank_deficient_heads_are_answered_on_their_column_space(self):
        W, G = batch(D=40, rank=5)
        Q, rank = cp.column_basis(W)
        assert rank == 5 == np.linalg.matrix_rank(W)
        result = cp.compression([G], Q)
        assert result.rank == 5 and result.destroyed > 0.9

    def test_the_backpropagated_gradient_only_sees_the_projection(self):
        """G W = (G Pi) W: what ker W^T holds never reaches the hidden states."""
        W, G = batch()
        Q, _ = cp.column_basis(W)
        np.testing.assert_allclose(G @ W, (G @ Q @ Q.T) @ W, atol=1e-14)

    @pytest.mark.parametrize("library", ["scipy", "torch"])
    def test_the_two_step_pivoted_qr_reads_the_rank_of_a_pivoted_qr_of_W(self, library, monkeypatch):
        """Householder QR of W, then a pivoted QR of its D x D factor: the rank and the pivoted
        diagonal of a direct pivoted QR of W (LAPACK geqp3), on full-rank and low-rank heads, by
        either library that factors W."""
        if library == "torch":
            pytest.importorskip("torch")
        monkeypatch.setattr(cp, "TORCH_QR_MIN_ENTRIES", 0 if library == "torch" else math.inf)
        for rank in (None, 1, 7):
            W = cp.construct_head(400, 24, 3, rank=rank)
            Q, found = cp.column_basis(W)
            _, R, _ = scipy.linalg.qr(W, mode="economic", pivoting=True)
            diagonal = np.abs(np.diag(R))
            direct = int(np.sum(diagonal > 400 * np.finfo(np.float64).eps * diagonal[0]))
            assert found == direct == np.linalg.matrix_rank(W) == (24 if rank is None else rank)
            assert Q.shape == (400, found)
            # Q is orthonormal and spans col W: W - Q Q^T W is W's rounding, not a missing direction
            np.testing.assert_allclose(Q.T @ Q, np.eye(found), rtol=0, atol=2 * qr_error(400, 24))
            assert np.linalg.norm(W - Q @ (Q.T @ W)) <= 2 * qr_error(400, 24) * np.linalg.norm(W)

    def test_both_qr_libraries_give_the_same_shares(self, monkeypatch):
        """The projector, and so Eq. 1, does not depend on which library factored W."""
        pytest.importorskip("torch")
        W, G = batch(V=600, D=30)
        shares = {}
        for library, threshold in (("scipy", math.inf), ("torch", 0)):
            monkeypatch.setattr(cp, "TORCH_QR_MIN_ENTRIES", threshold)
            shares[library] = cp.compression([G], cp.column_basis(W)[0])
        # ||Pi_1 - Pi_2||_2 <= 2 (qr_error + qr_error): each share moves by at most that much
        for name in ("destroyed", "cosine"):
            assert getattr(shares["torch"], name) == pytest.approx(
                getattr(shares["scipy"], name), rel=0, abs=4 * qr_error(600, 30)
            )

    def test_the_gradient_is_the_softmax_minus_the_targets(self):
        """The in-place blocks against scipy.special.softmax of the same blocks of logits, entry by entry
        (the same IEEE operations), each block a new array."""
        W = cp.construct_head(300, 12, 5)
        H, targets = cp.construct_batch(50, 12, 300, 6)
        blocks = list(cp.logit_gradient_blocks(H, W, targets, block=7))
        assert len({id(b) for b in blocks}) == len(blocks)
        expected = np.concatenate([scipy.special.softmax(H[i : i + 7] @ W.T, axis=1) for i in range(0, 50, 7)])
        expected[np.arange(50), targets] -= 1
        np.testing.assert_array_equal(np.concatenate(blocks), expected / 50)

    def test_the_in_place_stream_equals_the_public_one(self):
        """random_head_compression (one buffer, the residual written over it) gives what compression
        gives on the same blocks (copied, the input left as it was), but for the order of the sums."""
        V, D, tokens = 700, 16, 600
        own = cp.random_head_compression(V, D, tokens, 9)
        W = cp.construct_head(V, D, 9)
        H, targets = cp.construct_batch(tokens, D, V, 10)
        G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
        kept = G.copy()
        public = cp.compression([G], cp.column_basis(W)[0])
        np.testing.assert_array_equal(G, kept)
        for name in ("destroyed", "cosine", "destroyed_per_token", "cosine_per_token"):
            assert getattr(own, name) == pytest.approx(getattr(public, name), rel=gamma(tokens, U))

    @pytest.mark.parametrize("layout", ["columns of a larger basis", "Fortran order"])
    def test_any_layout_of_Q_gives_the_same_shares(self, layout):
        W, G = batch(V=200, D=9)
        Q = cp.column_basis(W)[0]
        other = np.hstack([Q, np.zeros((200, 3))])[:, :9] if layout.startswith("columns") else np.asfortranarray(Q)
        got, expected = cp.compression([G], other), cp.compression([G], Q)
        for name in ("destroyed", "cosine", "destroyed_per_token", "cosine_per_token"):
            # the products C = GQ and G - CQ^T in another order: each entry within gamma_V of its value
            assert getattr(got, name) == pytest.approx(getattr(expected, name), rel=4 * gamma(200, U))

    def test_a_zero_head_keeps_nothing(self):
        Q, rank = cp.column_basis(np.zeros((30, 4)))
        result = cp.compression([batch(V=30, D=4)[1]], Q)
        assert rank == 0 and Q.shape == (30, 0) and result.destroyed == 1.0 and result.cosine == 0.0

    def test_streaming_in_blocks_changes_nothing(self):
        W = cp.construct_head(200, 10, 3)
        H, targets = cp.construct_batch(100, 10, 200, 4)
        Q, _ = cp.column_basis(W)
        whole = cp.compression([np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))], Q)
        pieces = cp.compression(cp.logit_gradient_blocks(H, W, targets, block=7), Q)
        assert pieces.destroyed == pytest.approx(whole.destroyed, rel=1e-13)
        assert pieces.cosine_per_token == pytest.approx(whole.cosine_per_token, rel=1e-13)


class TestEquationOne:
    def test_destroyed_and_surviving_shares_add_in_squares(self):
        W, G = batch()
        result = cp.compression([G], cp.column_basis(W)[0])
        assert result.destroyed**2 + result.cosine**2 == pytest.approx(1.0, abs=64 * U)
        assert result.destroyed_squared == pytest.approx(result.destroyed**2, rel=1e-14)

    def test_a_full_head_destroys_nothing(self):
        W, G = batch(V=30, D=30)
        result = cp.compression([G], cp.column_basis(W)[0])
        assert result.destroyed < 1e-7 and result.cosine == pytest.approx(1.0)

    def test_larger_heads_destroy_less(self):
        shares = [cp.compression([batch(D=D)[1]], cp.column_basis(batch(D=D)[0])[0]).destroyed for D in (4, 32, 128)]
        assert shares == sorted(shares, reverse=True)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: cp.column_basis(np.ones((3, 4))), "W: hidden size D=4 exceeds the vocabulary V=3"),
        (lambda: cp.column_basis(np.full((5, 2), np.nan)), "W: non-finite value"),
        (lambda: cp.column_basis(np.ones(5)), "W: expected a 2-D"),
        (lambda: cp.compression([np.ones((2, 4))], np.eye(5)[:, :2]), "G: rows of length 4 do not match V=5"),
        (lambda: cp.compression([np.full((2, 5), np.inf)], np.eye(5)[:, :2]), "G: non-finite gradient"),
        (lambda: cp.compression([np.zeros((2, 5))], np.eye(5)[:, :2]), "G: the gradient is zero"),
        (lambda: cp.construct_head(10, 11, 0), "D: 11 is out of range"),
        (lambda: cp.construct_head(10, 5, 0, rank=6), "rank: 6 is out of range"),
    ],
)
def test_bad_input_is_refused_with_a_named_argument(call, message):
    with pytest.raises(InputError) as error:
        call()
    assert message in str(error.value)


def test_rankwall_compress(capsys):
    code = main(
        ["compress", "--V", "2048", "--D", "64", "--tokens", "300", "--head", "lowrank", "--rank", "8", "--json"]
    )
    record = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and record["rank_W"] == 8
    assert abs(record["pythagoras_residual"]) < 1e-13 and record["destroyed_frequency_weighted"] > 0.95


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compress", "--V", "10", "--D", "11"], "exceeds the vocabulary"),
        (["compress", "--D", "8", "--head", "lowrank", "--rank", "9"], "--rank: 9 exceeds --D 8"),
    ],
)
def test_rankwall_compress_refuses_bad_sizes(capsys, argv, message):
    assert main(argv) == EXIT_USAGE and message in capsys.readouterr().err


def test_the_logit_gradient_descends_faster_than_the_hidden_state_update():
    W = cp.construct_head(1024, 16, 0)
    H, targets = cp.construct_batch(64, 16, 1024, 1)
    change = cp.loss_change_along(H, W, targets, (1e-3, 1e-2))
    for along_gradient, along_update in zip(change["logit gradient"], change["hidden-state update"], strict=True):
        assert along_gradient < along_update < 0


# ----------------------------------------------------------------- the claims compression.*

NUMPY = resolve("numpy")
MUTANTS = [m for c in REGISTRY if c.id.startswith("compression.") for m in c.mutants.values()]
#: The witness the review quoted (V = 64, D = 32: c² = 0.523 against a top-32 share of 0.995).
REVIEWED = claims.ky_fan.witnesses(64)[0]
SMALL = [
    claims.BatchGradient(V=16, D=5, rank=None, tokens=8, seed=3, aligned=False),
    claims.BatchGradient(V=12, D=9, rank=3, tokens=10, seed=4, scale=10.0),
    claims.BatchGradient(V=16, D=4, rank=None, tokens=8, seed=5, aligned=True),
]


def test_a_case_has_the_json_form_of_its_family():
    """A typed case writes the JSON of the untyped form: its family, then every parameter."""
    case = claims.BatchGradient(V=64, D=32, rank=None, tokens=96, seed=32, scale=1.0, aligned=False)
    expected = {"V": 64, "D": 32, "rank": None, "tokens": 96, "seed": 32, "scale": 1.0, "aligned": False}
    assert case.to_json() == {"case": "batch-gradient", **expected}
    assert list(case.to_json()) == ["case", *expected]
    assert case.vocabulary == 64 and claims.ky_fan.witnesses(64)[0] == case


def exact_sides(instance, backend=None):
    """c², the top rank-W share, the rate ⟨G, GWWᵀ⟩/‖GWWᵀ‖_F and ‖G‖_F at 50 digits (mpmath), from
    the stored G, W and Q (of the backend's dtype, read exactly into float64), with Π = Q(QᵀQ)⁻¹Qᵀ
    (exactly the projector on span Q)."""
    G, W, Q = (float64_copy(M) for M in claims.gradient(instance, backend))
    with mpmath.workdps(50):
        Gm, Wm, Qm = (mpmath.matrix(M.tolist()) for M in (G, W, Q))
        total = sum(x**2 for x in Gm)
        X = Gm * Qm
        kept = X * mpmath.inverse(Qm.T * Qm) * X.T
        sigma = sorted(mpmath.svd_r(Gm, compute_uv=False), reverse=True)
        K = Gm * Wm
        rate = sum(x**2 for x in K) / mpmath.sqrt(sum(x**2 for x in K * Wm.T))
        c2 = sum(kept[i, i] for i in range(kept.rows)) / total
        return c2, sum(s**2 for s in sigma[: Q.shape[1]]) / total, rate, mpmath.sqrt(total)


def inside(value, enclosure):
    return mpmath.mpf(enclosure.lo) <= value <= mpmath.mpf(enclosure.hi)


class TestEnclosuresHoldTheExactQuantities:
    """The tolerance of every verdict is the width of these enclosures: each must hold the exact value."""

    @pytest.mark.parametrize("instance", SMALL, ids=lambda i: f"V{i.V}-D{i.D}")
    def test_against_fifty_digits(self, instance):
        """c², r², the share and both descent rates lie in their enclosures, which are narrow."""
        G, W, Q = claims.gradient(instance)
        c2, share, rate, norm = exact_sides(instance)
        c, r = claims.eq1_shares(G, Q)
        with mpmath.workdps(50):
            assert inside(c2, c.squared()) and inside(1 - c2, r.squared())
            assert inside(share, claims.top_share(G, Q.shape[1]))
            along_update, along_gradient = claims.descent_rates(G, W)
            assert inside(rate, along_update) and inside(norm, along_gradient)
        assert 0 < c.squared().radius < 1e-12 and 0 < along_update.radius < 1e-12

    def test_an_aligned_head_keeps_the_top_share_to_within_the_slack(self):
        """The head is aligned only to the SVD's backward error: the slack must cover that, exactly."""
        instance = SMALL[2]
        G, W, Q = claims.gradient(instance)
        c2, share, _, _ = exact_sides(instance)
        with mpmath.workdps(50):
            assert share - mpmath.mpf(claims.alignment_slack(G, W, Q)) <= c2 <= share


def planted(monkeypatch, name, index, factor):
    """Replace the measurement ``name`` by one whose output (entry ``index`` of a pair) is scaled. The
    identity's ball re-decision reads the instance itself, so the same share is planted there too."""
    original = getattr(claims, name)

    def wrong(*args):
        out = original(*args)
        if index is None:
            return out.scaled(factor)
        return tuple(e.scaled(factor) if i == index else e for i, e in enumerate(out))

    monkeypatch.setattr(claims, name, wrong)
    if name == "eq1_shares":
        balls = claims.ball_shares.__wrapped__

        def wrong_balls(case, bits):
            shares = list(balls(case, bits))
            shares[index] = shares[index] * factor**2
            return tuple(shares)

        monkeypatch.setattr(claims, "ball_shares", wrong_balls)


@pytest.mark.parametrize(
    ("claim_id", "name", "index", "factor"),
    [
        ("compression.pythagoras", "eq1_shares", 0, math.sqrt(3)),  # c² three times too large
        ("compression.pythagoras", "eq1_shares", 1, 0.5),
        ("compression.ky-fan", "eq1_shares", 0, math.sqrt(3)),
        ("compression.ky-fan", "top_share", None, 1 / 3),
        ("compression.ky-fan-attained", "eq1_shares", 0, math.sqrt(3)),
        ("compression.ky-fan-attained", "top_share", None, 1 / 3),
        ("compression.update-efficiency", "descent_rates", 0, 3.0),
        ("compression.update-efficiency", "descent_rates", 1, 1 / 3),
    ],
)
def test_a_side_measured_wrong_is_a_violation(monkeypatch, claim_id, name, index, factor):
    """The verdict follows the measurement: plant one wrong side and the claim fails, certified."""
    claim = REGISTRY[claim_id]
    instance = claim.witnesses(64)[0]
    assert claim.check(instance, NUMPY).status is Status.HOLDS
    planted(monkeypatch, name, index, factor)
    verdict = claim.check(instance, NUMPY)
    assert verdict.status is Status.VIOLATED, verdict.to_json()
    assert abs(verdict.margin) > verdict.tolerance > 0 and verdict.certified_by is Certification.TWO_SIDED


@pytest.mark.parametrize("claim_id", ["compression.ky-fan", "compression.update-efficiency"])
class TestEveryVerdictIsReachable:
    """holds, violated and inconclusive each follow from the measured margin against its bound."""

    def test_holds(self, claim_id):
        verdict = REGISTRY[claim_id].check(REVIEWED, NUMPY)
        assert verdict.status is Status.HOLDS and verdict.margin > verdict.tolerance

    def test_violated_when_tightened_to_a_hundredth(self, claim_id):
        verdict = REGISTRY[claim_id].check(REVIEWED, NUMPY, Fraction(1, 100))
        assert verdict.status is Status.VIOLATED and verdict.margin < -verdict.tolerance < 0

    def test_inconclusive_beyond_the_exact_size(self, monkeypatch, claim_id):
        """The contract of the slow test below at V = 64, with the exact routes' size lowered to 32: only
        the float margin decides, undecided where F times the bound meets the measured side."""
        monkeypatch.setattr(verdict_module, "EXACT_IDENTITY_V", 32)
        monkeypatch.setattr(claims, "EXACT_IDENTITY_V", 32)
        claim = REGISTRY[claim_id]
        m = claim.measure(REVIEWED, NUMPY, Fraction(1))
        verdict = claim.check(REVIEWED, NUMPY, Fraction(m.lhs) / Fraction(m.rhs))
        assert verdict.status is Status.INCONCLUSIVE and abs(verdict.margin) <= verdict.tolerance, verdict.to_json()

    @pytest.mark.slow
    def test_inconclusive_when_the_tightened_bound_meets_the_measured_side(self, claim_id):
        """Beyond the exact routes' size (V = 8,192 > 4,096) only the float margin decides: undecided where
        F times the bound meets the measured side. Within it, the balls or the integers decide."""
        claim = REGISTRY[claim_id]
        for V, status in ((8192, Status.INCONCLUSIVE), (64, None)):
            instance = replace(REVIEWED, V=V)
            m = claim.measure(instance, NUMPY, Fraction(1))
            verdict = claim.check(instance, NUMPY, Fraction(m.lhs) / Fraction(m.rhs))
            if status is Status.INCONCLUSIVE:
                assert verdict.status is status and abs(verdict.margin) <= verdict.tolerance, verdict.to_json()
            else:
                assert verdict.status is not Status.INCONCLUSIVE and verdict.certified_by is not None


def test_a_full_head_keeps_everything_exactly():
    """rank W = V: Π = I, so c² = 1 = the share and the sign of the margin is that of F - 1."""
    full = claims.BatchGradient(V=8, D=8, rank=None, tokens=5, seed=0)
    assert claims.ky_fan.check(full, NUMPY).status is Status.HOLDS
    verdict = claims.ky_fan.check(full, NUMPY, Fraction(1, 2))
    assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_every_mutant_is_refuted_on_a_witness_by_its_measured_margin(mutant):
    """A refutation is a margin beyond a finite, small tolerance, never a verdict by fiat."""
    verdicts = [mutant.check(i, NUMPY) for i in mutant.witnesses(16)]
    refuted = [v for v in verdicts if v.status is Status.VIOLATED]
    assert refuted, f"{mutant.id} survived every witness"
    for v in refuted:
        beyond = v.margin < -v.tolerance if mutant.relation is Relation.AT_MOST else abs(v.margin) > v.tolerance
        assert beyond and 0 < v.tolerance < 1e-9 and v.certified_by is Certification.TWO_SIDED, v.to_json()


@pytest.mark.parametrize("claim_id", ["compression.ky-fan", "compression.update-efficiency"])
def test_halving_the_bound_is_refuted_by_the_search(claim_id):
    """Both bounds are within a factor 2 of sharp on the strategy's instances."""
    result = search(REGISTRY[claim_id], NUMPY, tighten=Fraction(1, 2), budget=300, seed=0)
    assert result.counterexample is not None and result.counterexample.status is Status.VIOLATED
    assert result.counterexample.margin < -result.counterexample.tolerance


@pytest.mark.parametrize("claim_id", ["compression.ky-fan", "compression.update-efficiency"])
def test_rankwall_search_tighten(capsys, claim_id):
    """--tighten 0.5 exits 1 with a counterexample; the bound itself (--tighten 1) exits 0."""
    assert main(["search", claim_id, "--tighten", "0.5", "--budget", "300"]) == EXIT_VIOLATED
    assert "counterexample" in capsys.readouterr().out
    assert main(["search", claim_id, "--tighten", "1", "--budget", "60"]) == EXIT_OK


@pytest.mark.parametrize("claim_id", [c.id for c in REGISTRY if c.id.startswith("compression.")])
def test_beyond_the_exact_size_an_identity_holds_within_rounding(monkeypatch, claim_id):
    """The contract of the slow test below at V = 64, with the exact routes' size lowered to 32: an
    inequality holds by its two-sided margin; an identity holds within rounding."""
    monkeypatch.setattr(verdict_module, "EXACT_IDENTITY_V", 32)
    monkeypatch.setattr(claims, "EXACT_IDENTITY_V", 32)
    claim = REGISTRY[claim_id]
    verdict = claim.check(claim.witnesses(64)[0], NUMPY)
    expected = Certification.WITHIN_ROUNDING if claim.relation is Relation.EQUAL else Certification.TWO_SIDED
    assert verdict.status is Status.HOLDS and verdict.certified_by is expected, verdict.to_json()


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", [c.id for c in REGISTRY if c.id.startswith("compression.")])
def test_claims_hold_at_the_full_vocabulary(claim_id):
    """V = 131,072 itself (the witnesses stop at 4,096): one head of D = 32 and 96 tokens per claim. An
    inequality holds by its two-sided margin; an identity, beyond the size of its ball re-decision, holds
    within rounding (its float sides agree to their bound)."""
    claim = REGISTRY[claim_id]
    verdict = claim.check(replace(claim.witnesses(64)[0], V=131072), NUMPY)
    expected = Certification.WITHIN_ROUNDING if claim.relation is Relation.EQUAL else Certification.TWO_SIDED
    assert verdict.status is Status.HOLDS and verdict.certified_by is expected, verdict.to_json()


# ----------------------------------------------------------------- the array-API route (float32 included)

STRICT32 = resolve("array-api-strict", "no_float64", "float32")
PORTED = [STRICT32, resolve("array-api-strict", "CPU_DEVICE", "float64"), resolve("torch", "cpu", "float32")]


class TestSvdColumnBasis:
    """The array API's QR has no pivoting: col W gets the SVD's left singular vectors above a Weyl margin."""

    @pytest.mark.parametrize("backend", PORTED, ids=lambda b: f"{b.name}-{b.dtype_name}")
    def test_the_rank_of_a_low_rank_head_is_found_and_the_projector_is_the_pivoted_qr_one(self, backend):
        W = cp.construct_head(300, 40, 0, rank=5)
        Q, rank, margin = cp.svd_column_basis(backend.asarray(W))
        assert rank == 5 == cp.column_basis(W)[1] and margin > 0
        u = 2.0**-24 if backend.dtype_name == "float32" else U
        Qr = cp.column_basis(W)[0]
        Qs = float64_copy(Q)
        assert np.linalg.norm(Qs @ Qs.T - Qr @ Qr.T, 2) < 1e4 * u

    def test_rank_is_never_overstated(self):
        """A head of exact rank 1 (rounded to float32) keeps one vector: the rest lie below the margin."""
        W = np.outer(np.arange(1.0, 21.0), np.ones(6))
        assert cp.svd_column_basis(STRICT32.asarray(W))[1] == 1

    @pytest.mark.parametrize(
        ("W", "message"),
        [(np.ones((3, 4)), "out of range"), (np.full((5, 2), np.nan), "non-finite"), (np.ones(5), "2-D")],
    )
    def test_bad_heads_are_refused(self, W, message):
        with pytest.raises(InputError, match=message):
            cp.svd_column_basis(STRICT32.xp.asarray(np.asarray(W, dtype=np.float32)))


@pytest.mark.parametrize("backend", PORTED, ids=lambda b: f"{b.name}-{b.dtype_name}")
@pytest.mark.parametrize("instance", SMALL, ids=lambda i: f"V{i.V}-D{i.D}")
def test_enclosures_at_the_backend_dtype_hold_fifty_digits(instance, backend):
    """Computed in the backend at its own u: the enclosures still hold the exact sides of the stored arrays."""
    G, W, Q = claims.gradient(instance, backend)
    c2, share, rate, norm = exact_sides(instance, backend)
    c, r = claims.eq1_shares(G, Q)
    along_update, along_gradient = claims.descent_rates(G, W)
    with mpmath.workdps(50):
        assert inside(c2, c.squared()) and inside(1 - c2, r.squared())
        assert inside(share, claims.top_share(G, Q.shape[1]))
        assert inside(rate, along_update) and inside(norm, along_gradient)
    if instance.aligned:
        with mpmath.workdps(50):
            assert share - mpmath.mpf(claims.alignment_slack(G, W, Q)) <= c2 <= share
    u = claims.unit(G)
    assert u == (2.0**-24 if backend.dtype_name == "float32" else U)
    assert 0 < c.squared().radius < 1e4 * u


def test_a_float32_tolerance_is_float32_sized():
    """The tolerance follows the dtype: float32's is about 2^29 times float64's on the same instance."""
    m64 = claims.pythagoras.measure(REVIEWED, NUMPY, Fraction(1))
    m32 = claims.pythagoras.measure(REVIEWED, STRICT32, Fraction(1))
    assert 1e7 < m32.tolerance / m64.tolerance < 1e10
    assert m32.method.startswith("array-api-strict float32 SVD-basis")


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_every_mutant_is_refuted_in_float32_by_its_measured_margin(mutant):
    """On the ported route each mutant is refuted, and the float32 measurement itself is beyond its
    float32 tolerance on the violating side (the verdict's certificate is the float64 re-decision, as
    for every two-sided violation: a float margin is decisive only for "holds")."""
    witnesses = mutant.witnesses(16)
    refuted = [v for v in (mutant.check(i, STRICT32) for i in witnesses) if v.status is Status.VIOLATED]
    assert refuted, f"{mutant.id} survived every witness"
    for v in refuted:
        beyond = v.margin < -v.tolerance if mutant.relation is Relation.AT_MOST else abs(v.margin) > v.tolerance
        assert beyond and 0 < v.tolerance < 1e-9 and v.certified_by is Certification.TWO_SIDED, v.to_json()
    measured = [mutant.measure(v.instance, STRICT32, Fraction(1)) for v in refuted]
    assert all(m.method.startswith("array-api-strict float32") and m.tolerance > 1e-9 for m in measured)
    margins = [m.rhs - m.lhs for m in measured]
    if mutant.relation is Relation.AT_MOST:
        assert any(d < -m.tolerance for d, m in zip(margins, measured, strict=True))
    else:
        assert any(abs(d) > m.tolerance for d, m in zip(margins, measured, strict=True))


@pytest.mark.parametrize(
    ("claim_id", "name", "index", "factor"),
    [
        ("compression.pythagoras", "eq1_shares", 0, math.sqrt(3)),
        ("compression.ky-fan", "top_share", None, 1 / 3),
        ("compression.update-efficiency", "descent_rates", 1, 1 / 3),
    ],
)
def test_a_side_measured_wrong_in_float32_is_a_violation(monkeypatch, claim_id, name, index, factor):
    claim = REGISTRY[claim_id]
    instance = claim.witnesses(64)[0]
    assert claim.check(instance, STRICT32).status is Status.HOLDS
    planted(monkeypatch, name, index, factor)
    verdict = claim.check(instance, STRICT32)
    assert verdict.status is Status.VIOLATED and abs(verdict.margin) > verdict.tolerance > 0, verdict.to_json()


def test_rankwall_verify_in_float32_names_backend_and_dtype(capsys):
    """Every record names the backend and dtype it measured in; its worst verdict's method is the
    float32 measurement's, or, where that margin left the case to the float64 re-decision, the judge's."""
    argv = ["verify", "compression.*", "--backend", "array-api-strict", "--device", "no_float64"]
    code = main([*argv, "--dtype", "float32", "--V", "64", "--json"])
    records = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and len(records) == 4
    for record in records:
        assert record["status"] == "holds" and record["array_api"] is True, record
        assert (record["backend"], record["dtype"]) == ("array-api-strict", "float32")
        claim, instance = REGISTRY[record["claim"]], case_from_json(record["instance"])
        measured = claim.measure(instance, STRICT32, Fraction(1))
        assert measured.method.startswith("array-api-strict float32")
        assert record["method"].startswith((measured.method, claim.judge_exactly(instance, Fraction(1)).method))


def test_a_norm_below_float32s_normal_range_is_still_enclosed():
    """Squares of 1e-25 underflow in float32 (1e-50 < 2^-126): the relative model alone would enclose 0 and
    miss the exact norm; the underflow term keeps it inside."""
    X = np.full((4, 3), 1e-25)
    stored = float64_copy(STRICT32.asarray(X))
    exact = mpmath.sqrt(sum(mpmath.mpf(x) ** 2 for x in stored.ravel()))
    assert inside(exact, claims.frobenius(STRICT32.asarray(X)))
    assert inside(exact, claims.frobenius(stored)) and claims.frobenius(stored).radius < 1e-38


# ----------------------------------------------------------------- checked measurements (issue 18)


def test_a_measure_of_the_wrong_quantity_is_caught_by_the_reference():
    """Planted: the Ky Fan ceiling at rank W + 1, a true bound, so every verdict still holds; the
    reference's share of rank W (a certified eigensolver on the dense Gram matrix) disagrees."""
    wrong = dataclasses.replace(
        claims.ky_fan,
        measure=lambda i, b, f: claims.measure_ky_fan(i, b, f, ceiling=lambda G, k: claims.top_share(G, k + 1)),
    )
    witnesses = [i for i in wrong.witnesses(16) if i.D < i.V]
    assert all(wrong.check(i, NUMPY).status is Status.HOLDS for i in witnesses)
    assert not disagreements(claims.ky_fan, witnesses, NUMPY)
    found = disagreements(wrong, witnesses, NUMPY)
    assert found and all("rhs" in why for why in found), found[:2]


def test_the_reference_refuses_a_basis_of_another_space(monkeypatch):
    """The reference reads span Q from the instance, but only as the head's column space: a basis of
    another space of the same dimension is refused, not compared."""
    instance = claims.ky_fan.witnesses(16)[0]
    G, W, Q = claims.gradient(instance)
    other = np.linalg.qr(np.random.default_rng(0).standard_normal(Q.shape))[0]
    monkeypatch.setattr(claims, "gradient", lambda case, backend=None: (G, W, other))
    with pytest.raises(ValueError, match="not the column space of the head"):
        claims.REFERENCES["ky-fan"](instance, NUMPY)


@pytest.mark.parametrize(
    ("instance", "message"),
    [
        (claims.BatchGradient(V=2, D=1, tokens=1, seed=1, scale=1e4), "the logit gradient is zero"),
        (claims.BatchGradient(V=40, D=5, rank=3, tokens=8, seed=0), None),
    ],
)
def test_built_values_outside_the_domain_are_refused(monkeypatch, instance, message):
    """A zero gradient (every row saturated at its target) has no shares; a head whose built values show
    another rank than the constructor's is no instance of its case. Both are OutsideDomain, which search
    rejects and verify counts apart."""
    if message is None:  # a basis of the wrong dimension, as a rounding could leave it
        monkeypatch.setattr(cp, "column_basis", lambda W: (np.linalg.qr(W)[0], W.shape[1]))
        message = "numerical rank 5, not the 3 its constructor guarantees"
    with pytest.raises(OutsideDomain, match=message):
        claims.gradient(instance)


def test_the_ball_judge_decides_what_the_float_tolerance_cannot():
    """r² + c² = 1 − 10⁻¹² lies inside the float64 tolerance at V = 1024 (it "held" on every witness), but
    the 128-bit balls separate it; r² + c² = 1 holds within the balls' radius, not the float bound."""
    off = declare(
        "user.pythagoras-off",
        statement="r² + c² = 1 − 10⁻¹²",
        lhs=claims.destroyed**2 + claims.surviving**2,
        relation="==",
        rhs=Fraction(1) - Fraction(1, 10**12),
        cases=claims.batch_gradients,
        register=False,
    )
    instance = claims.pythagoras.witnesses(1024)[0]
    assert off.measure(instance, NUMPY, Fraction(1)).tolerance > 1e-12
    verdict = off.check(instance, NUMPY)
    assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.TWO_SIDED, verdict.to_json()
    shipped = claims.pythagoras.check(instance, NUMPY)
    assert shipped.status is Status.HOLDS and shipped.certified_by is Certification.WITHIN_ROUNDING
    assert shipped.tolerance < 1e-30


@pytest.mark.parametrize("V", [64, pytest.param(1024, marks=pytest.mark.slow)])
def test_an_aligned_head_refutes_a_ky_fan_ceiling_short_by_a_millionth(V):
    """c² ≤ (1 − 10⁻⁶)(Ky Fan share) fails only where the head attains the share: the witnesses now
    include an aligned head of rank below V (and, where V ≤ 64, a full head, Π = I), and the search draws
    aligned heads."""
    short = declare(
        "user.ky-fan-short",
        statement="c² ≤ (1 − 10⁻⁶) Σ_{i ≤ rank W} σ_i(G)²/‖G‖_F²",
        lhs=claims.surviving**2,
        relation="<=",
        rhs=(1 - Fraction(1, 10**6)) * claims.best_share,
        cases=claims.batch_gradients,
        register=False,
    )
    refuted = [v for v in (short.check(i, NUMPY) for i in short.witnesses(V)) if v.status is Status.VIOLATED]
    attaining = [v for v in refuted if v.instance.aligned and v.instance.D < v.instance.V]
    assert attaining and all(v in attaining or v.instance.D == v.instance.V for v in refuted)
    assert search(short, NUMPY, budget=300, seed=0).counterexample is not None


def test_an_update_that_follows_the_gradient_is_decided_exactly():
    """An aligned head spanning G's rows makes GWWᵀ = G up to the alignment: the efficiency is 1 to
    rounding, no float margin decides, and the exact integers do (Cauchy-Schwarz is strict)."""
    instance = claims.BatchGradient(V=64, D=8, tokens=3, seed=4, aligned=True)
    measured = claims.efficiency.measure(instance, NUMPY, Fraction(1))
    assert abs(measured.rhs - measured.lhs) <= measured.tolerance
    verdict = claims.efficiency.check(instance, NUMPY)
    assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT
    beaten = claims.efficiency.check(instance, NUMPY, Fraction(1) - Fraction(1, 10**15))
    assert beaten.status is Status.VIOLATED and beaten.certified_by is Certification.EXACT


def test_every_boundary_witness_holds_on_the_backends():
    """The edge witnesses (aligned heads, ties, saturated rows, one token, a full head) hold at V = 2, 3, 64."""
    for claim in (c for c in REGISTRY if c.id.startswith("compression.")):
        for V in (2, 3, 64):
            for instance in claim.witnesses(V)[6:]:
                for backend in (NUMPY, STRICT32):
                    assert claim.check(instance, backend).status is Status.HOLDS, (claim.id, instance)
