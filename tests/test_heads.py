"""Tests of theory/heads.py: five heads, their log-probability rank, their Jacobians."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from theory import heads as hd
from theory._validation import InputError


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
    assert J.shape == (80, 6) and np.linalg.matrix_rank(J) <= 6


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
