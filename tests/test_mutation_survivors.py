"""Tests that kill the survivors of ``scripts/mutation.py`` (mutation testing of ``theory/``).

One class per theory module (``scripts/mutation.py`` adds the module's class to the module's test
selection). Each test states a contract of the module that the module's own fast tests left
unchecked; its docstring names the mutant it kills (``file:line`` and the change cosmic-ray made) and
why the behaviour matters.
"""

from __future__ import annotations

import warnings

import mpmath
import networkx as nx
import numpy as np
import pytest
import scipy.special
import torch

from rankwall.checks.engine.tolerance import log_softmax_error
from rankwall.theory import compression as cp
from rankwall.theory import error_rank as er
from rankwall.theory import heads as hd
from rankwall.theory import softmax_jacobian as sj
from rankwall.theory._rounding import gamma, unit_roundoff
from rankwall.theory.validation import InputError, normalization_tolerance

#: Standard errors a seeded sample's mean or variance may stray from the distribution's: a normal
#: deviate beyond 6 has probability 2e-9, so a draw that passes is no accident and a mutant that
#: moves the mean or the variance by more fails.
SAMPLING_SIGMAS = 6.0


def assert_normal_entries(entries: np.ndarray, sd: float) -> None:
    """The entries look like i.i.d. N(0, sd^2): sample mean within SAMPLING_SIGMAS standard errors
    of 0 (standard error sd / sqrt(n)), sample variance within SAMPLING_SIGMAS of sd^2 (standard
    error sd^2 sqrt(2 / (n - 1)) for normal entries)."""
    x = np.asarray(entries, dtype=np.float64).ravel()
    n = x.size
    assert abs(x.mean()) <= SAMPLING_SIGMAS * sd / np.sqrt(n), (x.mean(), sd)
    assert abs(x.var(ddof=1) - sd**2) <= SAMPLING_SIGMAS * sd**2 * np.sqrt(2 / (n - 1)), (x.var(ddof=1), sd**2)


class TestHeads:
    def test_head_parameters_are_gaussian_scaled_by_the_root_of_d(self):
        """Kills heads.py:62 (P = 2 N / sqrt(d) -> 2 N % sqrt(d)): the parameters are centred
        Gaussians of variance scale^2/d (W) and 4/d (P, U), so logits stay O(scale) at every d."""
        V, d, K, scale = 400, 16, 8, 3.0
        theta = hd.construct_head_parameters(V, d, K, 0, scale=scale)
        assert (theta.W.shape, theta.P.shape, theta.U.shape) == ((V, d), (K, d, d), (K, d))
        assert_normal_entries(theta.W, scale / np.sqrt(d))
        assert_normal_entries(theta.P, 2 / np.sqrt(d))
        assert_normal_entries(theta.U, 2 / np.sqrt(d))

    def test_a_head_named_at_run_time_is_the_same_head(self):
        """Kills heads.py:114 (head == "softmax" -> head is "softmax"): a name read from a command
        line or a file is an equal string but not the interned literal; it must select the same
        head, not fall through to sigsoftmax."""
        theta = hd.construct_head_parameters(20, 4, 2, 0)
        h = np.random.default_rng(1).standard_normal((3, 4))
        name = "".join(["soft", "max"])
        assert name == "softmax" and name is not "softmax"  # noqa: F632  (the point of the test)
        assert np.array_equal(hd.log_probabilities(name, theta, h), hd.log_probabilities("softmax", theta, h))

    def test_the_vocabulary_of_head_parameters_is_bounded_by_2_to_the_22(self):
        """Kills heads.py:56 (the bound 1 << 22 -> 2 << 22): V = 2^22 + 1 is refused by name before
        anything is allocated (a V x d head of that size is the limit the claims are sized for)."""
        with pytest.raises(InputError, match="V: 4194305 is out of range"):
            hd.construct_head_parameters((1 << 22) + 1, 1, 1, 0)


def softmax_reference(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of float64 logits in 50-digit arithmetic (mpmath), rounded to float64."""
    with mpmath.workdps(50):
        rows = [[mpmath.exp(mpmath.mpf(float(z))) for z in row] for row in Z]
        return np.array([[float(e / mpmath.fsum(row)) for e in row] for row in rows])


def softmax_entry_bounds(Z: np.ndarray, u: float) -> np.ndarray:
    """Bound on the error of each computed entry of a row-wise softmax (shifted by the row maximum
    m) of logits Z stored in a dtype with unit roundoff u: the rounded shift z - m perturbs the
    exponent by u|z - m|, exp adds two ulps, the sum of V terms and the division gamma_{V+1};
    all relative to the entry, plus the rounding of the reference to float64."""
    V = Z.shape[1]
    P = softmax_reference(Z)
    shift = np.abs(Z - Z.max(axis=1, keepdims=True))
    return (gamma(V + 6, u) * (1 + shift) + unit_roundoff(np.float64)) * P


class TestErrorRank:
    @pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
    def test_log_softmax_of_a_torch_matrix_is_computed_in_torch(self, dtype):
        """Kills error_rank.py:338 (the torch route's guard negated: every valid matrix refused):
        a PyTorch matrix gets its log-softmax in PyTorch, in its dtype, equal within rounding to
        SciPy's on the same numbers (each within log_softmax_error of the truth, so the two within
        twice that); a 1-D tensor is one row; an empty one is refused."""
        A = torch.as_tensor(np.random.default_rng(3).normal(scale=20.0, size=(7, 50)), dtype=dtype)
        L = er.log_softmax(A)
        assert isinstance(L, torch.Tensor) and L.dtype == dtype and L.shape == A.shape
        A64 = A.double().numpy()
        reference = scipy.special.log_softmax(A64, axis=1)
        bound = log_softmax_error(A64, reference, unit_roundoff(dtype)) + log_softmax_error(
            A64, reference, unit_roundoff(np.float64)
        )
        assert float(np.linalg.norm(L.double().numpy() - reference)) <= bound
        row = er.log_softmax(A[0])  # one log_softmax (issue 27): a 1-D tensor is one row, not refused
        assert isinstance(row, torch.Tensor) and row.dtype == dtype and torch.equal(row, L[0])
        with pytest.raises(InputError, match="z: "):
            er.log_softmax(A[:, :0])

    @pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
    def test_logit_rows_of_torch_factors_give_torch_probabilities(self, dtype):
        """Kills error_rank.py:156 (the NumPy test negated: torch logits sent to SciPy, which
        returns NumPy): the probabilities of factors in PyTorch are computed there, in their dtype,
        each within its rounding bound of the softmax of the same logits in 50-digit arithmetic (the
        logits are O(1): no entry near the underflow range, where relative bounds fail)."""
        rng = np.random.default_rng(5)
        H, W = (torch.as_tensor(rng.normal(size=shape), dtype=dtype) for shape in ((4, 6), (30, 6)))
        rows = er.LogitRows(H, W)
        P, Z = rows.probabilities(slice(0, 4)), rows.block(slice(0, 4))
        assert isinstance(P, torch.Tensor) and P.dtype == dtype and P.shape == (4, 30)
        bound = softmax_entry_bounds(Z.double().numpy(), unit_roundoff(dtype))
        assert np.all(np.abs(P.double().numpy() - softmax_reference(Z.double().numpy())) <= bound)

    def test_stochastic_classes_draw_extra_edges_at_the_given_density(self):
        """Kills error_rank.py:406 and :413 (an extra edge where random < density -> != density):
        density 0 leaves one edge per state (the cycles, one step into a block); density 1 makes
        every closed class complete and joins every pair of transient states one way."""
        n, closed = 30, 3
        sparse_weights = er.construct_stochastic_with_classes(n, closed, 1, density=0.0)
        assert np.all((sparse_weights > 0).sum(axis=1) == 1)
        dense_weights = er.construct_stochastic_with_classes(n, closed, 1, density=1.0)
        edges = dense_weights > 0
        classes = [sorted(c) for c in nx.attracting_components(er.positive_graph(dense_weights))]
        assert len(classes) == closed
        for members in classes:
            assert edges[np.ix_(members, members)].all()
        transient = sorted(set(range(n)) - {i for members in classes for i in members})
        assert len(transient) >= 2  # the seed draws a transient part to test
        between = edges[np.ix_(transient, transient)]
        assert (between ^ between.T)[~np.eye(len(transient), dtype=bool)].all()


class TestCompression:
    def test_a_full_rank_head_has_gaussian_entries_of_variance_one_over_d(self):
        """Kills compression.py:201 (W = N / sqrt(D) -> N * sqrt(D)): the random head's entries are
        N(0, 1/D), so a hidden state of unit-variance entries gives logits of unit variance."""
        V, D = 600, 12
        W = cp.construct_head(V, D, 0)
        assert W.shape == (V, D) and np.linalg.matrix_rank(W) == D
        assert_normal_entries(W, 1 / np.sqrt(D))

    def test_the_gradient_streams_in_blocks_of_one_row(self):
        """Kills compression.py:183 (the least block size 1 -> 2): ``block`` is any positive row
        count; blocks of one row give T rows (softmax(W h_t) - e_t) / T, each summing to zero within
        the normalisation tolerance, and a block of 0 rows is refused by name."""
        H, targets = cp.construct_batch(5, 3, 9, 0)
        W = cp.construct_head(9, 3, 1)
        blocks = list(cp.logit_gradient_blocks(H, W, targets, block=1))
        assert [block.shape for block in blocks] == [(1, 9)] * 5
        rows = np.concatenate(blocks)
        assert np.all(np.abs(rows.sum(axis=1)) <= normalization_tolerance(9, np.finfo(np.float64).eps) / 5)
        assert np.all(rows[np.arange(5), targets] < 0)
        with pytest.raises(InputError, match="block: 0 is out of range"):
            cp.logit_gradient_blocks(H, W, targets, block=0)

    def test_the_efficiency_split_matches_its_definitions_in_50_digits(self):
        """Kills compression.py:316 (||GWW^T||^2 summed as (GWW^T)/2) and :327 (the anisotropy's
        product or quotient replaced): e_G, e_H, total, kernel 1/c and anisotropy each equal, within
        the float route's rounding bound, their definitions evaluated in 50-digit arithmetic
        (Pi = W (W^T W)^-1 W^T); the split is Figure 6's first-order efficiency, a headline number."""
        T, V, D = 5, 8, 3
        rng = np.random.default_rng(11)
        G, W = rng.standard_normal((T, V)), rng.standard_normal((V, D))
        split = cp.efficiency_split(G, W)
        with mpmath.workdps(50):
            Gm, Wm = mpmath.matrix(G.tolist()), mpmath.matrix(W.tolist())
            GW = Gm * Wm
            GWWt = GW * Wm.T
            GPi = Gm * Wm * mpmath.inverse(Wm.T * Wm) * Wm.T
            norm = lambda M: mpmath.norm(M, 2)  # noqa: E731  (the 2-norm of the entries: Frobenius)
            e_G, e_H = norm(Gm), norm(GW) ** 2 / norm(GWWt)
            exact = {
                "logit_gradient": e_G,
                "hidden_state_update": e_H,
                "total": e_G / e_H,
                "kernel": norm(Gm) / norm(GPi),
                "anisotropy": norm(GPi) * norm(GWWt) / norm(GW) ** 2,
            }
            singular = mpmath.svd_r(Wm, compute_uv=False)
            condition = float(max(singular) / min(singular)) ** 2
        # The float route: products (entrywise error gamma_V |A||B|), a pivoted QR and an SVD of W
        # (backward stable, p(n) <= 8 (T + V + D) here), amplified at most by cond(W)^2.
        rtol = gamma(8 * (T + V + D), unit_roundoff(np.float64)) * condition
        for name, value in exact.items():
            assert abs(getattr(split, name) - float(value)) <= rtol * float(value), name
        assert split.rank == D and split.anisotropy >= 1

    def test_a_batch_has_at_least_one_token(self):
        """Kills compression.py:209 (the least token count 1 -> 0; found in a second sample, seed
        19): an empty batch has no gradient to compress, so ``tokens = 0`` is refused by name at
        the call, while one token gives one hidden state and one target."""
        H, targets = cp.construct_batch(1, 4, 10, 0)
        assert H.shape == (1, 4) and targets.shape == (1,) and 0 <= int(targets[0]) < 10
        with pytest.raises(InputError, match="tokens: 0 is out of range"):
            cp.construct_batch(0, 4, 10, 0)

    def test_the_memory_estimate_counts_the_arrays_it_names(self):
        """Kills compression.py:248 (4 * min(BLOCK_ROWS, tokens) * V -> 4 << ...): the estimate is
        the bytes of three arrays the size of the head W (W, the copy its QR factors in place, Q), the
        hidden states H and the one block of logit-gradient rows the stream reuses (issue 29), each
        measured here on the arrays the construction builds."""
        V, D, tokens = 300, 8, 40
        W = cp.construct_head(V, D, 0)
        H, targets = cp.construct_batch(tokens, D, V, 1)
        block = next(iter(cp.logit_gradient_blocks(H, W, targets)))
        assert cp.compression_memory_bytes(V, D, tokens) == 3 * W.nbytes + H.nbytes + block.nbytes


class TestSoftmaxJacobian:
    def test_logits_with_tied_top_entries_take_the_closed_form(self):
        """Kills softmax_jacobian.py:778 (tied = second >= m -> second > m): two tied top logits
        make the runner-up probability equal m exactly, and ||J||_2 = m exactly (a double
        eigenvalue of diag(p) - pp^T at m). The mutant still lands on m (the root's bracket
        collapses to the point m) but only through 0/0 in the secular iteration, which warns:
        under ``-W error`` a caller's tied row would crash. The closed form computes nothing invalid."""
        rng = np.random.default_rng(2)
        z = rng.normal(size=(6, 40))
        top = z.max(axis=1) + rng.uniform(0.0, 3.0, size=6)
        z[:, 0], z[:, 1] = top, top  # a tie at the top of every row, tails of various weights
        rows = sj.softmax_rows(z)
        assert np.array_equal(rows.top, np.max(rows.tail, axis=1))  # the runner-up ties m exactly
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            norms = sj.spectral_norm(rows)
        assert np.array_equal(norms, rows.top)

    @pytest.mark.parametrize("m", [-0.1, -1.0])
    def test_a_negative_top_mass_of_tied_atoms_is_named_out_of_range(self, m):
        """Kills softmax_jacobian.py:957 (the range of m from [0, 1/2] to [-1, 1/2]): a negative m
        was still refused, but as "too small for two tied top atoms", which misnames the problem: m
        is no mass at all. The domain check names the range."""
        with pytest.raises(InputError, match=r"m: -[\d.]+ is outside \[0\.0, 0\.5\]"):
            sj.construct_tied_atoms(5, m)
