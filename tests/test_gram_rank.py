"""The Gram-matrix rank certificate (exact.gram_rank_lower_bound) against the SVD's and exact ranks."""

from __future__ import annotations

import numpy as np
import pytest

from rankwall.checks import exact
from rankwall.checks.engine import tolerance
from rankwall.theory.validation import InputError

U64 = tolerance.unit_roundoff(np.float64)


def low_rank_integers(rows, columns, rank, seed):
    """An integer matrix that is a product of two integer factors, and its exact rank (python-flint)."""
    rng = np.random.default_rng(seed)
    M = rng.integers(-9, 10, (rows, rank)) @ rng.integers(-9, 10, (rank, columns))
    return M.astype(np.float64), exact.exact_rank(M.astype(np.int64))[0]


@pytest.mark.parametrize(("rows", "columns", "rank"), [(20, 300, 7), (300, 20, 7), (40, 40, 40), (16, 900, 1)])
def test_the_bound_is_the_exact_rank_when_the_gap_is_wide(rows, columns, rank):
    M, true_rank = low_rank_integers(rows, columns, rank, rows + columns)
    lower, margin, sigma = exact.gram_rank_lower_bound(M)
    assert lower == true_rank == rank
    reference = np.linalg.svd(M, compute_uv=False)
    assert np.allclose(sigma[:rank], reference[:rank], rtol=1e-9)
    assert sigma[rank - 1] > margin >= sigma[rank:].max(initial=0.0)


def test_it_never_claims_more_than_the_svd_route():
    """A singular value of 1e-7 next to one of 1e4: the SVD's Weyl margin (about u sigma_1) sees it, the
    Gram route's (about sqrt(u) sigma_1) does not; neither claims more than the exact rank."""
    rng = np.random.default_rng(1)
    Q1, _ = np.linalg.qr(rng.standard_normal((30, 3)))
    Q2, _ = np.linalg.qr(rng.standard_normal((200, 3)))
    M = Q1 @ np.diag([1e4, 1.0, 1e-7]) @ Q2.T
    gram, _, _ = exact.gram_rank_lower_bound(M)
    svd, _, _ = exact.weyl_rank_lower_bound(M, U64)
    assert gram == 2 and svd == 3


@pytest.mark.parametrize("seed", range(5))
def test_a_certified_count_holds_for_every_matrix_within_the_entry_error(seed):
    """rank(M*) >= the count for any M* with ||M* - M||_F <= entry_error: here M* = M + E with E of
    exactly that norm, of rank 5, aimed at cancelling M's smallest singular directions."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((12, 80)) @ np.diag(np.geomspace(1, 1e-3, 80))
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    epsilon = float(s[6])
    lower, margin, _ = exact.gram_rank_lower_bound(M, entry_error=epsilon)
    E = -(U[:, 7:] * s[7:]) @ Vt[7:]  # removes the 5 smallest singular values, norm < epsilon
    E *= epsilon / np.linalg.norm(E)
    true_rank = np.linalg.matrix_rank(M + E, tol=1e-9)
    assert margin >= epsilon and lower <= true_rank


def test_float32_entries_are_read_exactly():
    M, _ = low_rank_integers(10, 64, 4, 3)
    M32 = (M / 7).astype(np.float32)
    assert exact.gram_rank_lower_bound(M32)[0] == exact.gram_rank_lower_bound(M32.astype(np.float64))[0] == 4


def test_the_error_model_covers_the_measured_gram_error():
    """|computed eigenvalue - sigma^2| stays inside gram_eigenvalue_error, for a matrix whose singular
    values are known exactly (an orthogonal factorization built in float64)."""
    rng = np.random.default_rng(5)
    M = rng.standard_normal((50, 400)) * 3
    reference = np.linalg.svd(M, compute_uv=False) ** 2
    _, _, sigma = exact.gram_rank_lower_bound(M)
    delta = tolerance.gram_eigenvalue_error(M.shape, U64, float(np.sum(M * M)))
    assert np.abs(sigma**2 - reference).max() <= delta


@pytest.mark.parametrize("matrix", [np.ones(5), np.ones((3, 4), dtype=np.int64), np.ones((2, 2, 2))])
def test_bad_matrices_are_refused(matrix):
    with pytest.raises(InputError, match="matrix: expected a 2-D float32 or float64 array"):
        exact.gram_rank_lower_bound(matrix)
