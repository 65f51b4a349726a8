"""Tests of theory/compression.py: Eq. 1 through a QR factor of the head, streamed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from checks.cli import EXIT_OK, EXIT_USAGE, main
from theory import compression as cp
from theory._validation import InputError

U = 2.0**-53


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
