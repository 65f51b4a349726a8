"""Bad input gets an InputError that names the argument and the problem, never a wrong answer."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sparse
import torch

from rankwall.checks import exact
from rankwall.checks.claims import error_rank as er_claims
from rankwall.theory import compression as cp
from rankwall.theory import error_rank as er
from rankwall.theory import heads as hd
from rankwall.theory import softmax_jacobian as sj
from rankwall.theory import updates as up
from rankwall.theory.validation import InputError

ROW_FUNCTIONS = [
    sj.spectral_norm,
    sj.dense_jacobian,
    sj.trace,
    sj.collision_complement,
    sj.entropy,
    sj.support_size,
    sj.top_probability,
    sj.lower_bound,
    sj.upper_bound,
    sj.envelope,
    sj.probability_rows,
]
DIRECTION_FUNCTIONS = [sj.jvp, sj.quadratic_form, sj.variance]

BAD_PROBABILITIES = {
    "nan": (np.array([0.5, np.nan, 0.5]), "non-finite value nan at index (1,)"),
    "inf": (np.array([0.5, np.inf]), "non-finite value inf"),
    "negative": (np.array([1.2, -0.2]), "negative probability -0.2 at index (1,)"),
    "not normalised": (np.array([[0.5, 0.5], [0.6, 0.6]]), "row 1 sums to 1.2"),
    "empty batch": (np.zeros((0, 4)), "the batch is empty"),
    "empty row": (np.zeros(0), "V=0 is out of range"),
    "three dimensions": (np.full((2, 2, 2), 0.5), "ndim=3"),
    "scalar": (np.float64(1.0), "ndim=0"),
    "integer dtype": (np.array([0, 1]), "expected a real floating dtype"),
    "complex dtype": (np.array([0.5, 0.5], dtype=complex), "expected a real floating dtype"),
    "half precision": (np.array([0.5, 0.5], dtype=np.float16), "too few bits"),
    "V < 2": (np.array([1.0]), "V=1 is out of range (need V >= 2)"),
    "not an array": ("0.5, 0.5", "expected an array"),
    "torch nan": (torch.tensor([0.5, float("nan"), 0.5], dtype=torch.float64), "non-finite"),
}


@pytest.mark.parametrize("function", ROW_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("case", sorted(BAD_PROBABILITIES))
def test_bad_probabilities_are_refused_with_a_named_argument(function, case):
    value, message = BAD_PROBABILITIES[case]
    with pytest.raises(InputError) as error:
        function(value)
    assert str(error.value).startswith("p: "), str(error.value)
    assert message in str(error.value)


@pytest.mark.parametrize("function", DIRECTION_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("u", "message"),
    [
        (np.array([1.0, np.nan, 0.0]), "u: non-finite value nan at index (0, 1)"),
        (np.array([1.0, 2.0]), "u: shape (1, 2) does not match"),
        (np.array([1, 2, 3]), "u: expected a real floating dtype"),
        (np.array([1.0, 2.0, 3.0], dtype=np.float32), "u: dtype float32 differs"),
        (torch.ones(3, dtype=torch.float64), "u: array library differs"),
    ],
)
def test_bad_directions_are_refused(function, u, message):
    p = np.array([0.2, 0.3, 0.5])
    with pytest.raises(InputError) as error:
        function(p, u)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("z", "message"),
    [
        (np.array([1.0, np.inf]), "z: non-finite value inf"),
        (np.array([[1.0]]), "z: vocabulary size V=1"),
        (np.array([1, 2]), "z: expected a real floating dtype"),
        (np.zeros((2, 2, 2)), "z: expected a vector or a 2-D batch"),
    ],
)
def test_bad_logits_are_refused(z, message):
    with pytest.raises(InputError) as error:
        sj.softmax_rows(z)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sj.construct_runner_up(1, 0.6), "V: 1 is out of range"),
        (lambda: sj.construct_runner_up(2**25, 0.6), "V: 33554432 is out of range"),
        (lambda: sj.construct_runner_up(5.0, 0.6), "V: expected an integer"),
        (lambda: sj.construct_runner_up(5, 0.4), "m: 0.4 is outside [0.5, 1.0]"),
        (lambda: sj.construct_runner_up(5, float("nan")), "m: nan is outside"),
        (lambda: sj.construct_runner_up(5, 0.6, tail_mass=0.5), "tail_mass: 0.5 is outside"),
        (lambda: sj.construct_runner_up(2, 0.6, tail_mass=0.1), "tail_mass: a positive tail needs V >= 3"),
        (lambda: sj.construct_tied_atoms(10, 0.6), "m: 0.6 is outside [0.0, 0.5]"),
        (lambda: sj.construct_tied_atoms(10, 0.05), "m: 0.05 is too small for two tied top atoms"),
        (lambda: sj.construct_spread_tail(10, 0.05), "m: 0.05 is outside [0.1, 1.0]"),
        (lambda: sj.construct_logits(10, -1.0), "gap: -1.0 is outside"),
        (lambda: sj.construct_logits(10, 1.0, runners=10), "runners: 10 is out of range"),
        (lambda: sj.construct_dirichlet(10, 0.0, 1), "concentration: 0.0 is outside"),
        (lambda: sj.construct_dirichlet(10, 1.0, -1), "seed: -1 is out of range"),
        (lambda: sj.construct_sparse(10, 11, 0), "support: 11 is out of range"),
        (lambda: sj.spread_tail_ceiling(0.5, 1), "atoms: 1 is out of range"),
        (lambda: sj.slowdown(1.0), "m: 1.0 is outside (0.0, 1.0)"),
    ],
)
def test_constructors_refuse_out_of_range_parameters(call, message):
    with pytest.raises(InputError) as error:
        call()
    assert message in str(error.value)


def test_rows_summing_to_one_within_rounding_are_accepted():
    p = np.full(1000, 1e-3)
    p[0] += 50 * np.finfo(float).eps  # a softmax's own rounding
    assert float(sj.spectral_norm(p)) > 0


# --------------------------------------------------------------------------- the API refuses what it cannot do


def test_a_composite_modulus_is_refused_instead_of_aborting_the_interpreter():
    """flint's nmod_mat aborts the process (SIGABRT) on a composite modulus, so run it apart."""
    script = (
        "import numpy as np\n"
        "from rankwall.checks import exact\n"
        "from rankwall.theory.validation import InputError\n"
        "for p in (4, 6, 2**61 + 1, 2**64 - 1):\n"
        "    try:\n"
        "        exact.rank_mod_prime(np.array([[2, 0], [0, 1]]), p)\n"
        "    except InputError as error:\n"
        "        print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" is not prime")[0] for line in lines] == [
        f"prime: {p}" for p in (4, 6, 2**61 + 1, 2**64 - 1)
    ], done.stdout


@pytest.mark.parametrize(
    ("prime", "message"),
    [
        (1, "prime: 1 is out of range (need >= 2"),
        (0, "prime: 0 is out of range (need >= 2"),
        (-3, "prime: -3 is out of range (need >= 2"),
        (2.5, "prime: expected an integer, got 2.5"),
        (7.0, "prime: expected an integer, got 7.0"),
        (True, "prime: expected an integer, got True"),
        (2**64 + 13, f"prime: {2**64 + 13} is out of range (need >= 2 and <= {2**64 - 1})"),
    ],
)
def test_rank_mod_prime_refuses_a_modulus_that_is_not_a_word_size_prime(prime, message):
    with pytest.raises(InputError) as error:
        exact.rank_mod_prime(np.array([[2, 0], [0, 1]]), prime)
    assert message in str(error.value)


def test_rank_mod_prime_still_answers_for_primes():
    A = np.array([[2, 0], [0, 1]])
    assert exact.rank_mod_prime(A, 2) == 1
    assert exact.rank_mod_prime(A, 3) == exact.rank_mod_prime(A, np.int64(2**61 - 1)) == 2


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.ones((2, 2)), "matrix: expected a 2-D integer matrix (scale rational rows to integers), got dtype float64"),
        ([[1, 2], [3]], "matrix: ragged nested sequence"),
        ([1, 2], "matrix: expected a 2-D array, got ndim=1"),
        (np.array([[True, False]]), "matrix: boolean entries (dtype bool)"),
        ([[1, True]], "matrix: boolean True at index (0, 1)"),
        (np.array([[1, Fraction(1, 2)]], dtype=object), "matrix: expected a 2-D integer matrix"),
        ([["1", "2"]], "matrix: string '1' at index (0, 0)"),
    ],
)
def test_exact_ranks_refuse_what_is_not_an_integer_matrix(matrix, message):
    for call in (exact.rank_mod_prime, exact.exact_rank):
        with pytest.raises(InputError) as error:
            call(matrix)
        assert message in str(error.value)


U_ROW = np.array([0.2, 0.3, 0.5])
Z_3 = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]])
H_2, W_3 = np.ones((2, 2)), np.arange(6.0).reshape(3, 2)

REFUSED = {
    # ragged lists
    "ragged probabilities": (lambda: sj.spectral_norm([[0.5, 0.5], [1.0]]), "p: ragged nested sequence"),
    "ragged logits": (lambda: sj.softmax_rows([[0.5, 0.5], [1.0]]), "z: ragged nested sequence"),
    "ragged direction": (lambda: sj.jvp(U_ROW, [[1.0, 2.0], [3.0]]), "u: ragged nested sequence"),
    "ragged counts": (lambda: er.validated_counts([[1, 2], [3]]), "counts: ragged nested sequence"),
    "ragged A": (lambda: er.log_softmax([[1.0, 2.0], [3.0]]), "z: ragged nested sequence"),
    "ragged head": (lambda: cp.column_basis([[1.0, 2.0], [3.0]]), "W: ragged nested sequence"),
    "ragged H": (lambda: up.first_order_update([[1, 2], [3]], np.ones((3, 2)), np.ones((2, 3))), "H: ragged"),
    "ragged stochastic": (lambda: er.stochastic_defect_rank([[1, 0], [1]]), "stochastic: ragged nested sequence"),
    # float ids
    "float ngram tokens": (lambda: er.ngram_counts([0.5, 1, 2], 1, 3), "tokens: expected integer ids, got dtype float"),
    "whole float tokens": (lambda: er.ngram_counts(np.array([1.0, 2.0, 0.0]), 1, 3), "tokens: expected integer ids"),
    "float targets": (lambda: cp.cross_entropy(Z_3, [0.5, 1]), "targets: expected integer ids, got dtype float64"),
    "whole float targets": (lambda: cp.cross_entropy(Z_3, np.array([1.0, 2.0])), "targets: expected integer ids"),
    "float gradient targets": (
        lambda: list(cp.logit_gradient_blocks(H_2, W_3, np.array([1.0, 2.0]))),
        "targets: expected integer ids",
    ),
    "float loss targets": (lambda: cp.loss_change_along(H_2, W_3, [0.0, 1.0], [0.1]), "targets: expected integer"),
    "float submatrix tokens": (
        lambda: er.prediction_error_submatrix(np.array([[0.5, 0.5]]), np.array([0.0])),
        "tokens: expected integer ids",
    ),
    "float margin tokens": (
        lambda: er.dominance_margins(er.LogitRows(H_2, W_3), np.array([0.0, 1.0])),
        "tokens: expected integer ids",
    ),
    # out-of-range and boolean ids
    "negative target": (lambda: cp.cross_entropy(Z_3, [-1, 0]), "targets: ids must lie in [0, 3), got -1 at index (0,"),
    "target beyond V": (lambda: cp.cross_entropy(Z_3, [0, 3]), "targets: ids must lie in [0, 3), got 3 at index (1,)"),
    "gradient target beyond V": (
        lambda: list(cp.logit_gradient_blocks(H_2, W_3, [0, 7])),
        "targets: ids must lie in [0, 3), got 7",
    ),
    "negative margin token": (
        lambda: er.dominance_margins(er.LogitRows(H_2, W_3), [-1, 0]),
        "tokens: ids must lie in [0, 3), got -1",
    ),
    "boolean tokens": (lambda: er.ngram_counts([True, False, True], 1, 2), "tokens: boolean True at index (0,)"),
    "boolean token array": (lambda: er.ngram_counts(np.array([True, False, True]), 1, 2), "tokens: boolean entries"),
    "too few targets": (lambda: cp.cross_entropy(Z_3, [0]), "targets: 1 ids for 2 rows"),
    # string and boolean counts, negative counts
    "string counts": (lambda: er.validated_counts(["3", 1]), "counts: string '3' at index (0,)"),
    "string count array": (lambda: er.empirical_distribution(np.array([["3", "1"]])), "counts: expected a real dtype"),
    "boolean counts": (lambda: er.validated_counts(np.array([[True, False]])), "counts: boolean entries (dtype bool)"),
    "boolean sparse counts": (
        lambda: er.validated_counts(sparse.csr_matrix(np.array([[True, False]]))),
        "counts: boolean entries (dtype bool)",
    ),
    "negative sparse count": (
        lambda: er.unique_continuations(sparse.csr_matrix(np.array([[0, 2], [-1, 0]]))),
        "counts: negative count -1.0 at index (1, 0)",
    ),
    "negative batch count": (
        lambda: er.batch_unique_continuations(np.ones((2, 3)), np.array([[-1, 0, 0], [1, 0, 0]])),
        "batch: negative count -1.0 at index (0, 0)",
    ),
    "string secular counts": (lambda: sj.secular_function(0.5, 0.6, 0.4, [0.3], ["3"]), "counts: string '3'"),
    "fractional secular counts": (
        lambda: sj.secular_function(0.5, 0.6, 0.4, [0.3], [0.5]),
        "counts: fractional count 0.5 at index (0,)",
    ),
    "too many secular counts": (
        lambda: sj.secular_function(0.5, 0.6, 0.4, [0.3], [1, 1]),
        "counts: 2 counts for 1 tail values",
    ),
    # booleans and strings where numbers are expected
    "boolean probability": (lambda: sj.spectral_norm([1.0, False]), "p: boolean False at index (1,)"),
    "boolean m": (lambda: sj.construct_runner_up(5, True), "m: expected a real number, got True"),
    "string m": (lambda: sj.construct_runner_up(5, "0.6"), "m: expected a real number, got '0.6'"),
    "boolean shifts": (lambda: er.row_shift(np.ones((2, 2)), [True, False]), "shifts: boolean True at index (0,)"),
    "boolean margins": (lambda: er.varah_bound(np.array([True, False])), "margins: boolean entries"),
    "integer hidden states": (
        lambda: hd.log_probabilities("softmax", hd.construct_head_parameters(5, 2, 1, 0), np.array([[1, 0]])),
        "h: expected a real floating dtype",
    ),
    "boolean hidden states": (
        lambda: hd.effective_hidden("moc", hd.construct_head_parameters(5, 2, 1, 0), np.array([[True, False]])),
        "h: expected a real floating dtype",
    ),
    "boolean head scale": (lambda: hd.construct_head_parameters(5, 2, 1, 0, scale=True), "scale: expected a real"),
    "boolean batch scale": (lambda: cp.construct_batch(4, 2, 5, 0, scale=True), "scale: expected a real number"),
    "string fractions": (lambda: cp.loss_change_along(H_2, W_3, [0, 1], ["0.1"]), "fractions: string '0.1'"),
    "string gradient": (lambda: cp.compression([[["1", "2", "3"]]], np.eye(3)), "G: string '1' at index (0, 0)"),
    # sizes
    "batch vocabulary": (lambda: cp.construct_batch(4, 2, 1, 0), "V: 1 is out of range (need >= 2"),
    "batch hidden size": (lambda: cp.construct_batch(4, 2.0, 5, 0), "D: expected an integer, got 2.0"),
    "gradient block": (lambda: list(cp.logit_gradient_blocks(H_2, W_3, [0, 1], block=0)), "block: 0 is out of range"),
    "non-square stochastic": (lambda: er.attracting_components(np.ones((2, 3))), "stochastic: expected a square"),
    "dense pattern too large": (
        lambda: er.construct_stochastic_with_classes(131072, 1, 0),
        "n: 131072 is beyond 5,000 states for a dense pattern; give recurrent",
    ),
    "fewer recurrent states than classes": (
        lambda: er.construct_stochastic_with_classes(100, 10, 0, recurrent=5),
        "recurrent: 5 is out of range (need >= 10",
    ),
    "sparse pattern too dense": (
        lambda: er.construct_stochastic_with_classes(10_000, 1, 0, density=0.5, recurrent=1000),
        "density: 0.5 gives about 1001 weights per state",
    ),
    "block rank of a float matrix": (lambda: exact.block_triangular_rank(np.eye(2)), "matrix:"),
    "recurrent not an integer": (
        lambda: er.construct_stochastic_with_classes(10, 1, 0, recurrent=None),
        "recurrent: expected an integer, got None",
    ),
    "negative leaks": (
        lambda: er_claims.wcdd_matrix(er_claims.WcddPattern(n=5, leaks=-1)),
        "leaks: -1 is out of range",
    ),
    "a wcdd claim on another case": (
        lambda: er_claims.wcdd_hypothesis(er_claims.StochasticPattern(n=5)),
        "case: the WCDD claims read wcdd cases, not StochasticPattern",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_ragged_lists_float_ids_string_counts_and_booleans_are_refused(case):
    call, message = REFUSED[case]
    with pytest.raises(InputError) as error:
        call()
    assert message in str(error.value), str(error.value)
    assert str(error.value).startswith(message.split(":")[0] + ": "), str(error.value)


def test_ids_of_any_integer_dtype_are_accepted_and_whole_floats_are_not():
    expected = cp.cross_entropy(Z_3, [2, 0])
    for ids in (np.array([2, 0], dtype=np.uint8), np.array([2, 0], dtype=np.int32), [np.int64(2), 0]):
        assert cp.cross_entropy(Z_3, ids) == expected
    with pytest.raises(InputError, match="targets: expected integer ids, got dtype float64"):
        cp.cross_entropy(Z_3, np.array([2.0, 0.0]))
