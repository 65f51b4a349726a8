"""Bad input gets an InputError that names the argument and the problem, never a wrong answer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from theory import softmax_jacobian as sj
from theory._validation import InputError

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
