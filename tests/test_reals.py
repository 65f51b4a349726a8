"""``reals.atoms``: the instance's atoms as exact reals, so that an expression that cancels in the atoms
is decided exactly (an identity), and one that does not is decided by balls or left undecided."""

from __future__ import annotations

import flint
import pytest

from rankwall.checks.engine.reals import Real, atoms, difference_sign

IDENTITY = "identity in the instance's atoms"


def test_an_expression_that_cancels_in_the_atoms_is_decided_exactly():
    log2, log3 = atoms([flint.arb(2).log(), flint.arb(3).log()], names=("log2", "log3"))
    assert difference_sign((log2 + log3) - log3, log2) == (0, IDENTITY)
    assert difference_sign(log2 * log3, log3 * log2) == (0, IDENTITY)
    assert difference_sign((log2 + Real.of(1)) * (log2 - Real.of(1)), log2 * log2 - Real.of(1)) == (0, IDENTITY)


def test_an_expression_that_does_not_cancel_is_not_called_an_identity():
    (log2,) = atoms([flint.arb(2).log()])
    sign, how = difference_sign(log2, log2 + Real.of(1))
    assert sign == 1 and how != IDENTITY
    sign, how = difference_sign(log2 * log2, log2)  # (log 2)² < log 2: the balls tell them apart
    assert sign == 1 and how != IDENTITY


def test_atoms_need_a_ball_each():
    with pytest.raises(ValueError, match="balls"):
        atoms([])
