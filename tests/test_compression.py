"""Tests of theory/compression.py (Eq. 1 through a QR factor of the head, streamed) and of the claims
compression.*, declared over the family's quantities: every quantity enclosed on one exact object per case,
every claim able to fail, every planted wrong quantity caught."""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction
from typing import ClassVar

import flint
import mpmath
import numpy as np
import pytest
import scipy.linalg
import scipy.special
from reference_check import quantity_disagreements

from rankwall.checks import exact
from rankwall.checks.claims import compression as claims
from rankwall.checks.cli import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, main
from rankwall.checks.engine.backends import float64_copy, resolve
from rankwall.checks.engine.quantities import Context, declare
from rankwall.checks.engine.reals import Real
from rankwall.checks.engine.verdict import REGISTRY, Certification, OutsideDomain, Relation, Status
from rankwall.checks.run.search import search
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
DECIDED = (Certification.EXACT, Certification.TWO_SIDED)


@pytest.fixture
def fresh_cases():
    """Cases built anew: a test that changes what the shared built cases were computed with (the exact
    routes withdrawn) must not see, or leave, values computed without the change."""
    claims.clear_caches()
    yield
    claims.clear_caches()


def without_exact_routes(monkeypatch):
    """The exact routes of K, S_n and the rates withdrawn (``None``): only the float enclosures decide, as
    they would for a quantity whose exact route cannot be evaluated."""
    for name in ("projected_energy", "spectral_sum", "exact_rates"):
        monkeypatch.setattr(claims, name, lambda *args: None)


def test_a_case_has_the_json_form_of_its_family():
    """A typed case writes the JSON of the untyped form: its family, then every parameter."""
    case = claims.BatchGradient(V=64, D=32, rank=None, tokens=96, seed=32, scale=1.0, aligned=False)
    expected = {"V": 64, "D": 32, "rank": None, "tokens": 96, "seed": 32, "scale": 1.0, "aligned": False}
    assert case.to_json() == {"case": "batch-gradient", **expected}
    assert list(case.to_json()) == ["case", *expected]
    assert case.vocabulary == 64 and claims.ky_fan.witnesses(64)[0] == case


def test_the_low_rank_factors_are_the_constructors():
    """The exact head of a low-rank case is A·B/√(rD) for the factors construct_head draws: their float
    product is bit for bit the head it returns."""
    for case in (SMALL[1], claims.BatchGradient(V=300, D=40, rank=5, seed=9)):
        A, B = claims.head_factors(case)
        assert np.array_equal(
            (A @ B) / np.sqrt(case.rank * case.D), cp.construct_head(case.V, case.D, case.seed, rank=case.rank)
        )


def exact_object(instance, backend=NUMPY):
    """c², the Ky Fan share, the rate ⟨G, GW*W*ᵀ⟩/‖GW*W*ᵀ‖_F and ‖G‖_F of the case's exact object at 50 digits
    (mpmath), from the built G and the head the case names: W as built (random), the product of the factors A·B
    (low-rank; col W* = col A), or the span of G's top k right singular vectors from mpmath's SVD (aligned)."""
    built = claims.build(instance, backend)
    G = float64_copy(built.G)
    with mpmath.workdps(50):
        Gm = mpmath.matrix(G.tolist())
        total = sum(x**2 for x in Gm)
        sigma = sorted(mpmath.svd_r(Gm, compute_uv=False), reverse=True)
        share = sum(s**2 for s in sigma[: built.k]) / total
        if instance.aligned:
            return share, share, mpmath.sqrt(share * total), mpmath.sqrt(total)
        if instance.rank is None:
            Wm = basis = mpmath.matrix(float64_copy(built.W).tolist())
        else:
            A, B = (mpmath.matrix(X.tolist()) for X in claims.head_factors(instance))
            Wm, basis = A * B, A
        X = Gm * basis
        kept = X * mpmath.inverse(basis.T * basis) * X.T
        c2 = sum(kept[i, i] for i in range(kept.rows)) / total
        K = Gm * Wm
        rate = sum(x**2 for x in K) / mpmath.sqrt(sum(x**2 for x in K * Wm.T))
        return c2, share, rate, mpmath.sqrt(total)


def within(value, measured):
    """Whether a measured quantity holds the exact value within its error bound."""
    return abs(mpmath.mpf(measured.value) - value) <= mpmath.mpf(measured.error)


def in_ball(value, real):
    ball = real.ball
    return (
        mpmath.mpf(ball.lower().str(60, radius=False)) - mpmath.mpf(10) ** -45
        <= value
        <= mpmath.mpf(ball.upper().str(60, radius=False)) + mpmath.mpf(10) ** -45
    )


class TestEnclosuresHoldTheExactQuantities:
    """The tolerance of every verdict comes from these bounds: each must hold the exact object's value, and
    the exact routes must enclose it too."""

    @pytest.mark.parametrize("instance", SMALL, ids=lambda i: f"V{i.V}-D{i.D}-{'aligned' if i.aligned else i.rank}")
    def test_against_fifty_digits(self, instance):
        """c, r, the share and both rates lie within their measured bounds of the exact object, and in the
        exact routes' balls; the float64 bounds are narrow (other backends:
        :func:`test_measurements_at_the_backend_dtype_hold_fifty_digits`)."""
        c2, share, rate, norm = exact_object(instance)
        ctx = Context(instance, NUMPY)
        with mpmath.workdps(50), exact.precision(128):
            sides = {
                claims.surviving: mpmath.sqrt(c2),
                claims.destroyed: mpmath.sqrt(1 - c2),
                claims.best_share: share,
                claims.descent_along_update: rate,
                claims.descent_along_gradient: norm,
            }
            for quantity, value in sides.items():
                assert within(value, quantity.measure(ctx)), (quantity, value, quantity.measure(ctx))
                assert in_ball(value, quantity.exact(ctx)), (quantity, value, quantity.exact(ctx))
        assert 0 < claims.surviving.measure(ctx).error < 1e-12
        assert 0 < claims.descent_along_update.measure(ctx).error < 1e-10

    def test_an_aligned_head_keeps_the_top_share_to_within_the_slack(self):
        """The float head is aligned only to the SVD's backward error: the slack covers that, exactly."""
        instance = SMALL[2]
        built = claims.build(instance)
        c2, share, _, _ = exact_object(instance)
        G = float64_copy(built.G)
        Q = float64_copy(built.Q)
        with mpmath.workdps(50):
            Gm, Qm = mpmath.matrix(G.tolist()), mpmath.matrix(Q.tolist())
            X = Gm * Qm
            kept = X * mpmath.inverse(Qm.T * Qm) * X.T
            span_q = sum(kept[i, i] for i in range(kept.rows)) / sum(x**2 for x in Gm)
            assert share - mpmath.mpf(claims.alignment_slack(built.G, built.W, built.Q)) <= span_q <= share
            assert c2 == share

    @pytest.mark.parametrize("bits", [128, 512])
    def test_the_eigenvalue_sum_is_enclosed_at_every_precision(self, bits):
        """The Ky Fan sum S_k: Weyl's enclosure at 128 bits, the integer certificate beyond, both holding Arb's
        certified eigenvalues, the second to about 2^-bits."""
        built = claims.build(claims.BatchGradient(V=64, D=8, tokens=24, seed=3, aligned=True))
        gram = claims.integer_gram(built)
        with exact.precision(bits):
            S = claims.spectral_sum(built, built.k).ball
            values = sorted(
                (e.real for e in flint.acb_mat(flint.arb_mat(gram)).eig(multiple=True)), key=lambda x: -x.mid()
            )
            certified = sum(values[: built.k], flint.arb(0)) * flint.arb(
                claims.dyadic(1, 2 * claims.integer_gradient(built)[1])
            )
            assert S.overlaps(certified)
            assert float(S.rad() / S.mid()) < (1e-12 if bits == 128 else 2.0 ** (20 - bits))


class TestOneExactObjectPerCase:
    """Issue 26: every quantity of a context certifies the same exact object, so an equality of the statements
    holds exactly, never "violated" by two objects whose balls separate."""

    def test_an_aligned_head_keeps_exactly_the_ky_fan_share(self):
        """The reproducer: c² ≥ the top-k share on aligned heads (true: equality) held by the balls of the float
        basis against the share's; c² and the share are now the one atom S_k over g."""
        at_least = declare(
            "user.aligned-keeps-the-share",
            statement="c² ≥ Σ_{i ≤ rank W} σ_i(G)²/‖G‖_F² on aligned heads",
            lhs=claims.surviving**2,
            relation=">=",
            rhs=claims.best_share,
            cases=claims.aligned_heads,
            default_V=64,
            register=False,
        )
        verdicts = [at_least.check(i, NUMPY) for V in (16, 64) for i in at_least.witnesses(V)]
        assert all(v.status is Status.HOLDS and v.certified_by is Certification.EXACT for v in verdicts), [
            v.to_json() for v in verdicts if v.status is not Status.HOLDS
        ][:2]

    def test_a_low_rank_head_is_its_factors_product(self):
        """The float product fl(AB) has full rank D exactly; the exact head A·B has rank r, the rank the case
        names, and c is measured on it (within the head's perturbation) and evaluated on col A."""
        instance = SMALL[1]
        built = claims.build(instance)
        Z = claims.integer_matrix(float64_copy(built.W))[0]
        assert Z.rank() == instance.D  # the float head itself
        assert built.k == instance.rank and built.head_error > 0
        ctx = Context(instance, NUMPY)
        assert claims.rank_W.measure(ctx).pinned and claims.rank_W.measure(ctx).lo == instance.rank
        for backend in (NUMPY, resolve("array-api-strict", "no_float64", "float32")):
            verdict = claims.pythagoras.check(instance, backend)
            assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()

    def test_a_float_basis_reported_for_the_exact_head_is_caught_by_the_reference(self, monkeypatch):
        """The issue's mechanism, planted: the exact c evaluated on the float basis Q (a different object,
        ~1e-16 away) is caught by the reference on the exact head, and no longer makes r² + c² = 1 exact."""
        cases = [i for i in claims.batch_gradients.witnesses(16) if not i.aligned and i.D < i.V]
        assert not quantity_disagreements(claims.surviving, cases, NUMPY)

        def on_the_float_basis(ctx):
            built = claims.built_in(ctx)
            G, Q = (flint.arb_mat(float64_copy(X).tolist()) for X in (built.G, built.Q))
            C = G * Q
            kept = (Q.transpose() * Q).solve(C.transpose() * C).trace()
            return Real(kept / flint.arb(claims.exact_total(built))).sqrt()

        monkeypatch.setattr(claims.surviving, "exact_fn", on_the_float_basis)
        found = quantity_disagreements(claims.surviving, cases, NUMPY)
        assert len(found) >= len(cases) - 1 and all("outside the exact ball" in why for why in found), found[:2]
        assert claims.pythagoras.check(cases[0], NUMPY).status is not Status.HOLDS


def planted(monkeypatch, quantity, factor):
    """Replace ``quantity`` by ``factor`` times itself, in its float measurement and its exact route alike."""
    measure, exact_fn = quantity.measure_fn, quantity.exact_fn

    def wrong_measure(ctx):
        m = measure(ctx)
        return dataclasses.replace(m, value=m.value * float(factor), error=m.error * float(factor))

    def wrong_exact(ctx):
        value = exact_fn(ctx)
        return None if value is None else Real.of(factor) * Real.of(value)

    monkeypatch.setattr(quantity, "measure_fn", wrong_measure)
    monkeypatch.setattr(quantity, "exact_fn", wrong_exact)


@pytest.mark.parametrize(
    ("claim_id", "name", "factor"),
    [
        ("compression.pythagoras", "surviving", Fraction(2)),
        ("compression.pythagoras", "destroyed", Fraction(1, 2)),
        ("compression.ky-fan", "surviving", Fraction(3, 2)),
        ("compression.ky-fan", "best_share", Fraction(1, 3)),
        ("compression.ky-fan-attained", "surviving", Fraction(3, 2)),
        ("compression.ky-fan-attained", "best_share", Fraction(1, 3)),
        ("compression.update-efficiency", "descent_along_update", Fraction(3)),
        ("compression.update-efficiency", "descent_along_gradient", Fraction(1, 3)),
    ],
)
def test_a_quantity_planted_wrong_is_a_violation(monkeypatch, claim_id, name, factor):
    """The verdict follows the quantities: plant one wrong (in both routes) and the claim fails, certified."""
    claim = REGISTRY[claim_id]
    instance = claim.witnesses(64)[0]
    assert claim.check(instance, NUMPY).status is Status.HOLDS
    planted(monkeypatch, getattr(claims, name), factor)
    verdict = claim.check(instance, NUMPY)
    assert verdict.status is Status.VIOLATED and verdict.certified_by in DECIDED, verdict.to_json()


@pytest.mark.parametrize("claim_id", ["compression.ky-fan", "compression.update-efficiency"])
class TestEveryVerdictIsReachable:
    """holds, violated and inconclusive each follow from the measured margin against its bound."""

    def test_holds(self, claim_id):
        verdict = REGISTRY[claim_id].check(REVIEWED, NUMPY)
        assert verdict.status is Status.HOLDS and verdict.margin > verdict.tolerance

    def test_violated_when_tightened_to_a_hundredth(self, claim_id):
        verdict = REGISTRY[claim_id].check(REVIEWED, NUMPY, Fraction(1, 100))
        assert verdict.status is Status.VIOLATED and verdict.margin < -verdict.tolerance < 0

    def test_inconclusive_without_the_exact_routes(self, monkeypatch, fresh_cases, claim_id):
        """With the exact routes withdrawn only the float margin decides: undecided where F times the bound meets
        the measured side (with them, the exact route decides that tie: docs/compression.md prints how)."""
        without_exact_routes(monkeypatch)
        claim = REGISTRY[claim_id]
        m = claim.measure(REVIEWED, NUMPY, Fraction(1))
        tie = Fraction(m.lhs) / Fraction(m.rhs)
        verdict = claim.check(REVIEWED, NUMPY, tie)
        assert verdict.status is Status.INCONCLUSIVE and abs(verdict.margin) <= verdict.tolerance, verdict.to_json()


def test_a_full_head_keeps_everything_exactly():
    """rank W = V: Π = I, so c² = 1 = the share and the sign of the margin is that of F - 1."""
    full = claims.BatchGradient(V=8, D=8, rank=None, tokens=5, seed=0)
    assert claims.ky_fan.check(full, NUMPY).status is Status.HOLDS
    verdict = claims.ky_fan.check(full, NUMPY, Fraction(1, 2))
    assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT


def refuted_beyond_its_sides(mutant, verdict) -> bool:
    """A refutation certified by what decided it, its sides beyond its tolerance."""
    margin = verdict.margin
    beyond = margin < -verdict.tolerance if mutant.relation is Relation.AT_MOST else abs(margin) > verdict.tolerance
    return beyond and verdict.certified_by in DECIDED


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_every_mutant_is_refuted_on_a_witness_with_a_certificate(mutant):
    """A refutation is a certified difference of the two sides, never a verdict by fiat."""
    refuted = [v for v in (mutant.check(i, NUMPY) for i in mutant.witnesses(16)) if v.status is Status.VIOLATED]
    assert refuted, f"{mutant.id} survived every witness"
    assert all(refuted_beyond_its_sides(mutant, v) for v in refuted), [v.to_json() for v in refuted][:2]


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
def test_without_the_exact_routes_an_identity_is_only_equal_within_rounding(monkeypatch, fresh_cases, claim_id):
    """The float routes' contract, with the exact routes withdrawn: an inequality holds by its two-sided margin;
    an identity is equal within rounding, inconclusive (never holds)."""
    without_exact_routes(monkeypatch)
    claim = REGISTRY[claim_id]
    verdict = claim.check(claim.witnesses(64)[0], NUMPY)
    if claim.relation is Relation.EQUAL:
        assert verdict.status is Status.INCONCLUSIVE and verdict.certified_by is Certification.WITHIN_ROUNDING
    else:
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.TWO_SIDED, verdict.to_json()


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", [c.id for c in REGISTRY if c.id.startswith("compression.")])
def test_claims_at_the_full_vocabulary(claim_id):
    """V = 131,072 itself: the first witness there (D = 32, 96 tokens) per claim, decided as at V = 64: an
    inequality holds by its two-sided margin, an identity exactly (its exact routes read G and the head over
    V only through integer Gram matrices)."""
    claim = REGISTRY[claim_id]
    instance = next(w for w in claim.witnesses(131072) if w.V == 131072)
    assert (instance.D, instance.tokens) == (32, 96)
    verdict = claim.check(instance, NUMPY)
    decided = Certification.EXACT if claim.relation is Relation.EQUAL else Certification.TWO_SIDED
    assert verdict.status is Status.HOLDS and verdict.certified_by is decided, verdict.to_json()


@pytest.mark.slow
def test_a_tie_at_the_full_vocabulary_is_decided_exactly():
    """At V = 131,072 the exact routes still settle what the float margin cannot: Ky Fan's bound scaled to
    meet the measured c² (the tie docs/compression.md prints at V = 64), and the rates' bound likewise."""
    for claim in (claims.ky_fan, claims.efficiency):
        instance = next(w for w in claim.witnesses(131072) if w.V == 131072)
        m = claim.measure(instance, NUMPY, Fraction(1))
        verdict = claim.check(instance, NUMPY, Fraction(m.lhs) / Fraction(m.rhs))
        assert verdict.status is not Status.INCONCLUSIVE, verdict.to_json()
        assert verdict.certified_by in DECIDED, verdict.to_json()


class TestTheGramRouteIsTheDenseOne:
    """The exact routes read G and the head through :func:`row_gram` (residues modulo primes, float64 products
    that make no rounding error, Chinese remainders): at small V the same integers as the products of the
    whole integer matrices Z_G and Z_B."""

    CASES: ClassVar[list] = [
        *claims._witnesses(64),
        *claims.random_batches(64, 4, 0),
        claims.BatchGradient(V=40, D=5, tokens=60, seed=3, scale=100.0),  # T > V, saturated rows
    ]

    @pytest.mark.parametrize("instance", CASES, ids=str)
    def test_the_integer_gram_matrices_are_the_products(self, instance):
        built = claims.build(instance)
        ZG, e = claims.integer_gradient(built)
        assert claims.gradient_exponent(built) == e
        smaller = ZG * ZG.transpose() if ZG.nrows() <= ZG.ncols() else ZG.transpose() * ZG
        assert claims.integer_gram(built) == smaller
        assert claims.exact_total(built) == claims.dyadic(sum(int(x) ** 2 for x in ZG.entries()), 2 * e)
        if built.span is not None:
            ZB = claims.integer_matrix(built.span)[0]
            A, M = claims.head_integers(built)
            assert A == ZB.transpose() * ZB and M == ZG * ZB

    @pytest.mark.parametrize("backend", [NUMPY, resolve("array-api-strict", "no_float64", "float32")], ids=str)
    def test_every_exact_quantity_is_unchanged(self, monkeypatch, backend):
        """K, S_k, g and the rates from the Gram route equal those from the dense products: the same
        rationals, the same balls."""
        instances = [*[i for i in claims._witnesses(64) if not i.aligned][:3], claims._witnesses(64, True)[0]]

        def ball(x):
            return x.ball.mid().man_exp(), x.ball.rad().man_exp()

        def values():
            out = []
            for instance in instances:
                built = claims.build(instance, backend)
                K, S = claims.projected_energy(built), claims.spectral_sum(built, built.k)
                rate = claims.exact_rates(built)[0]
                out.append((claims.exact_total(built), ball(K), ball(S), repr(rate.radicand), ball(rate)))
            return out

        routed = values()

        def dense_gram(blocks):  # the whole integer matrices, stacked, times their transpose in python-flint
            stacked = [claims.integer_matrix(b)[0] for b in blocks]
            entries = [int(x) for Zi in stacked for x in Zi.entries()]
            Z = flint.fmpz_mat(sum(Zi.nrows() for Zi in stacked), stacked[0].ncols(), entries)
            product = Z * Z.transpose()
            n = product.nrows()
            return np.array([int(x) for x in product.entries()], dtype=object).reshape(n, n)

        monkeypatch.setattr(claims, "row_gram", dense_gram)
        assert values() == routed

    def test_a_wide_exponent_range_needs_many_primes(self):
        """Entries 2^-1074 (subnormal) to 2^1000 in one row: the residues recover Γ exactly."""
        X = np.array([[2.0**-1074, 3.0 * 2.0**1000, -(2.0**-500), 1.0], [5.0, -(2.0**-1074), 0.0, 2.0**900]])
        Z = claims.integer_matrix(X)[0]
        assert claims.fmpz_block(claims.row_gram([X])) == Z * Z.transpose()
        assert claims.fmpz_block(claims.row_gram([X.T])) == Z.transpose() * Z


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
def test_measurements_at_the_backend_dtype_hold_fifty_digits(instance, backend):
    """Computed in the backend at its own u: the measured quantities still hold the exact object's values."""
    c2, share, rate, _norm = exact_object(instance, backend)
    ctx = Context(instance, backend)
    with mpmath.workdps(50):
        sides = {claims.surviving: mpmath.sqrt(c2), claims.best_share: share, claims.descent_along_update: rate}
        for quantity, value in sides.items():
            assert within(value, quantity.measure(ctx)), (quantity, value, quantity.measure(ctx))
    u = claims.unit(claims.built_in(ctx).G)
    assert u == (2.0**-24 if backend.dtype_name == "float32" else U)
    assert 0 < claims.surviving.measure(ctx).error < 1e4 * u


def test_a_float32_tolerance_is_float32_sized():
    """The tolerance follows the dtype: float32's is about 2^29 times float64's on the same instance."""
    m64 = claims.pythagoras.measure(REVIEWED, NUMPY, Fraction(1))
    m32 = claims.pythagoras.measure(REVIEWED, STRICT32, Fraction(1))
    assert 1e7 < m32.tolerance / m64.tolerance < 1e10
    assert m32.method.startswith("array-api-strict float32")


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_every_mutant_is_refuted_in_float32_with_a_certificate(mutant):
    """On the ported route each mutant is refuted, certified on the exact object the float32 backend built."""
    refuted = [v for v in (mutant.check(i, STRICT32) for i in mutant.witnesses(16)) if v.status is Status.VIOLATED]
    assert refuted, f"{mutant.id} survived every witness"
    assert all(refuted_beyond_its_sides(mutant, v) for v in refuted), [v.to_json() for v in refuted][:2]


@pytest.mark.parametrize(
    ("claim_id", "name", "factor"),
    [
        ("compression.pythagoras", "surviving", Fraction(2)),
        ("compression.ky-fan", "best_share", Fraction(1, 3)),
        ("compression.update-efficiency", "descent_along_gradient", Fraction(1, 3)),
    ],
)
def test_a_quantity_planted_wrong_in_float32_is_a_violation(monkeypatch, claim_id, name, factor):
    claim = REGISTRY[claim_id]
    instance = claim.witnesses(64)[0]
    assert claim.check(instance, STRICT32).status is Status.HOLDS
    planted(monkeypatch, getattr(claims, name), factor)
    verdict = claim.check(instance, STRICT32)
    assert verdict.status is Status.VIOLATED and verdict.certified_by in DECIDED, verdict.to_json()


def test_rankwall_verify_in_float32_names_backend_and_dtype(capsys):
    """Every record names the backend and dtype it measured in, and every claim holds there; the identities
    are exact on the float32 instance."""
    argv = ["verify", "compression.*", "--backend", "array-api-strict", "--device", "no_float64"]
    code = main([*argv, "--dtype", "float32", "--V", "64", "--examples", "4", "--json"])
    records = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and len(records) == 4
    for record in records:
        assert record["status"] == "holds" and record["array_api"] is True, record
        assert (record["backend"], record["dtype"]) == ("array-api-strict", "float32")
        if REGISTRY[record["claim"]].relation is Relation.EQUAL:
            assert set(record["certifications"]) == {"exact"}, record


def test_a_norm_below_float32s_normal_range_is_still_enclosed():
    """Squares of 1e-25 underflow in float32 (1e-50 < 2^-126): the relative model alone would enclose 0 and
    miss the exact norm; the underflow term keeps it inside."""
    X = np.full((4, 3), 1e-25)
    stored = float64_copy(STRICT32.asarray(X))
    value = mpmath.sqrt(sum(mpmath.mpf(x) ** 2 for x in stored.ravel()))
    inside = lambda e: mpmath.mpf(e.lo) <= value <= mpmath.mpf(e.hi)  # noqa: E731
    assert inside(claims.frobenius(STRICT32.asarray(X)))
    assert inside(claims.frobenius(stored)) and claims.frobenius(stored).radius < 1e-38


# ----------------------------------------------------------------- checked quantities (issues 18 and 26)


def test_a_quantity_of_the_wrong_rank_is_caught_by_its_reference(monkeypatch):
    """Planted: the Ky Fan share at rank W + 1, a true bound, so every verdict of compression.ky-fan still
    holds; the reference's share of rank W (Arb's eigenvalues of the dense Gram matrix) disagrees."""
    witnesses = [i for i in claims.ky_fan.witnesses(16) if i.D < i.V][4:]
    assert not quantity_disagreements(claims.best_share, witnesses, NUMPY)
    one_more = claims.singular_share(claims.rank_W + 1)
    monkeypatch.setattr(claims.best_share, "measure_fn", one_more.measure_fn)
    monkeypatch.setattr(claims.best_share, "exact_fn", one_more.exact_fn)
    assert all(claims.ky_fan.check(i, NUMPY).status is Status.HOLDS for i in witnesses)
    found = quantity_disagreements(claims.best_share, witnesses, NUMPY)
    assert len(found) >= 3 and all("reference" in why for why in found), found[:2]


def test_every_quantity_agrees_with_its_reference():
    """Each public quantity's measurement and exact value hold its reference on the three kinds of head, a
    head of rank V and V = 3."""
    cases = [*SMALL, claims.BatchGradient(V=3, D=2, tokens=2, seed=1), claims.BatchGradient(V=8, D=8, tokens=5, seed=0)]
    quantities = (claims.surviving, claims.destroyed, claims.best_share, claims.rank_W, claims.vocabulary)
    quantities += (claims.descent_along_update, claims.descent_along_gradient)
    found = [why for quantity in quantities for why in quantity_disagreements(quantity, cases, NUMPY)]
    assert not found, found[:3]


@pytest.mark.parametrize(
    ("instance", "message"),
    [
        (claims.BatchGradient(V=2, D=1, tokens=1, seed=1, scale=1e4), "the logit gradient is zero"),
        (claims.BatchGradient(V=40, D=5, rank=3, tokens=8, seed=0), "not 3"),
    ],
)
def test_built_values_outside_the_domain_are_refused(monkeypatch, instance, message):
    """A zero gradient (every row saturated at its target) has no shares; a low-rank head whose factors do
    not have the rank its case names is no instance of it. Both are OutsideDomain, which search rejects and
    verify counts apart."""
    if instance.rank is not None:  # a factor B of rank 2 < 3: its last row a copy of its first
        factors = claims.head_factors

        def deficient(case):
            A, B = factors(case)
            B[-1] = B[0]
            return A, B

        def product(V, D, seed, rank=None):
            A, B = deficient(instance)
            return (A @ B) / np.sqrt(rank * D)

        monkeypatch.setattr(claims, "head_factors", deficient)
        monkeypatch.setattr(cp, "construct_head", product)
    with pytest.raises(OutsideDomain, match=message):
        claims.build(instance)


def test_the_exact_route_decides_what_the_float_tolerance_cannot():
    """r² + c² = 1 − 10⁻¹² lies inside the float64 tolerance at V = 1024 (it "held" on every witness), but the
    balls separate it; r² + c² = 1 itself is an identity in the instance's atoms: exact."""
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
    assert shipped.status is Status.HOLDS and shipped.certified_by is Certification.EXACT, shipped.to_json()


@pytest.mark.parametrize("V", [64, pytest.param(1024, marks=pytest.mark.slow)])
def test_an_aligned_head_refutes_a_ky_fan_ceiling_short_by_a_millionth(V):
    """c² ≤ (1 − 10⁻⁶)(Ky Fan share) fails only where the head attains the share: the witnesses include an
    aligned head of rank below V (and, where V ≤ 64, a full head, Π = I), and the search draws aligned heads."""
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
    """An aligned head spanning G's rows makes GW*W*ᵀ = G: the two rates are √‖G‖_F² exactly, equal (no float
    margin decides), and a bound short by 10⁻¹⁵ is refuted exactly."""
    instance = claims.BatchGradient(V=64, D=8, tokens=3, seed=4, aligned=True)
    measured = claims.efficiency.measure(instance, NUMPY, Fraction(1))
    assert abs(measured.rhs - measured.lhs) <= measured.tolerance
    verdict = claims.efficiency.check(instance, NUMPY)
    assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()
    beaten = claims.efficiency.check(instance, NUMPY, Fraction(1) - Fraction(1, 10**15))
    assert beaten.status is Status.VIOLATED and beaten.certified_by is Certification.EXACT


def test_the_ky_fan_sum_of_a_nearly_rank_one_gradient_is_decided_by_its_rank():
    """V = 2: the rows of G sum to zero up to their rounding, so σ₂(G) is zero (float32: rank G = 1, and an
    aligned head of one column keeps all of G, S₁ = ‖G‖_F² exactly) or about 10⁻¹⁷ (float64: rank 2, S₁ < ‖G‖_F²
    by less than any ball at 128 bits shows): the exact rank decides both, exactly."""
    instance = claims.BatchGradient(V=2, D=1, tokens=24, seed=3, aligned=True)
    for backend, exceeds in ((STRICT32, False), (NUMPY, True)):
        assert claims.rank_exceeds(claims.build(instance, backend), 1) is exceeds
        verdict = claims.efficiency.check(instance, backend)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()
        reverse = claims.efficiency.mutants["update-beats-gradient"].check(instance, backend)
        assert reverse.status is (Status.VIOLATED if exceeds else Status.HOLDS), reverse.to_json()


def test_every_boundary_witness_holds_on_the_backends():
    """The edge witnesses (aligned heads, ties, saturated rows, one token, a full head) hold at V = 2, 3, 64,
    in float64 and float32; the identities exactly (r² + c² = 1 on every kind of head, c² = share on the
    aligned ones: identities in the instance's atoms, or rationals)."""
    for claim in (c for c in REGISTRY if c.id.startswith("compression.")):
        for V in (2, 3, 64):
            for instance in claim.witnesses(V)[6:]:
                for backend in (NUMPY, STRICT32):
                    verdict = claim.check(instance, backend)
                    assert verdict.status is Status.HOLDS, verdict.to_json()
                    if claim.relation is Relation.EQUAL:
                        assert verdict.certified_by is Certification.EXACT, verdict.to_json()


REPRODUCER = """
from rankwall import compression as co
from rankwall import declare

declare("repro.aligned-keeps-the-share", statement="c² ≥ the Ky Fan share on aligned heads",
        lhs=co.surviving**2, relation=">=", rhs=co.best_share, cases=co.aligned_heads, default_V=16)
"""


def test_the_reproducer_holds_through_the_command_line(tmp_path, capsys):
    """Issue 26's compression reproducer, a user's file: verify holds (exit 0), search finds nothing."""
    path = tmp_path / "repro.py"
    path.write_text(REPRODUCER)
    assert main(["verify", "--claims", str(path), "repro.aligned-keeps-the-share", "--examples", "2"]) == EXIT_OK
    assert main(["search", "--claims", str(path), "repro.aligned-keeps-the-share", "--budget", "12"]) == EXIT_OK
    capsys.readouterr()


class TestAGradientWhoseSquaresUnderflow:
    """One token at logit scale 100 (V = D = 3, seed 3834): G's entries are near 1e-169, so every sum of
    squares of G rounds to 0 and the float shares were 0/0 (a ZeroDivisionError, found by the strategy
    test). The share routes now rescale G by a power of two first, which is exact and changes no ratio."""

    def test_the_rescaling_is_exact(self):
        G = np.array([[2.80467703e-169, 0.0, 2.18729397e-191], [5e-324, -1e-300, 0.0]])
        scaled = claims.rescaled_up(G)
        exponent = math.frexp(float(np.max(np.abs(scaled))))[1] - math.frexp(float(np.max(np.abs(G))))[1]
        assert 0.5 <= np.max(np.abs(scaled)) < 1
        assert np.array_equal(np.ldexp(scaled, -exponent), G)  # nothing was rounded on the way

    @pytest.mark.parametrize(
        "case",
        [claims.BatchGradient(V=3, D=3, tokens=1, seed=3834, scale=100.0, aligned=a) for a in (False, True)],
        ids=["random", "aligned"],
    )
    def test_the_claims_are_decided_and_the_shares_meet_their_reference(self, case):
        for claim_id in ("compression.ky-fan", "compression.pythagoras", "compression.ky-fan-attained"):
            verdict = REGISTRY[claim_id].check(case, NUMPY)
            assert verdict.status is Status.HOLDS and verdict.certified_by is not None
        assert not quantity_disagreements(claims.surviving, [case], NUMPY)
