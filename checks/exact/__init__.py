"""Escalation beyond floating point: exact rationals, certified balls and rank certificates
(python-flint). The softmax rows' own exact routes are in :mod:`rankwall.checks.exact.softmax`.

A float64 or float32 number is a dyadic rational, so a row of floats *is* an exact instance;
its normalisation :math:`\\hat p = p / \\sum p` is a genuine probability vector, and the
real-number statements are decided on it. Two arithmetics serve:

- :class:`flint.fmpq`, exact rationals, when the row has few distinct values (constructed
  witnesses: ties, runner-ups, spread tails), so an *attained* bound is shown to hold with
  margin exactly zero;
- :class:`flint.arb`, balls with rigorous radii at 128 to 2048 bits, for rows of many
  distinct values and for transcendental quantities (softmax of logits, entropy). A ball
  that straddles zero leaves the question undecided: the answer is then ``None``, never a
  guess.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from rankwall.theory.validation import InputError, as_integer_array, check_integer_in

#: Largest number of distinct values for which exact rational arithmetic is attempted
#: (the denominators of a rational sum grow with every distinct term).
EXACT_DISTINCT_LIMIT = 512

#: Working precisions (bits) tried in turn by ball arithmetic.
BALL_PRECISIONS = (128, 512, 2048)


@contextlib.contextmanager
def precision(bits: int) -> Iterator[None]:
    """Run a block with flint's working precision set to ``bits``."""
    old = flint.ctx.prec
    flint.ctx.prec = bits
    try:
        yield
    finally:
        flint.ctx.prec = old


def rational(x: float) -> flint.fmpq:
    """The float ``x`` as the exact rational it is."""
    n, d = float(x).as_integer_ratio()
    return flint.fmpq(n, d)


def fmpq_of(q: Fraction) -> flint.fmpq:
    """A Python Fraction as a python-flint rational."""
    return flint.fmpq(q.numerator, q.denominator)


def ball(x: float) -> flint.arb:
    """The float ``x`` as an exact ball (radius zero) at the current precision."""
    n, d = float(x).as_integer_ratio()
    return flint.arb(n) / d


def sign(value: Any) -> int | None:
    """Sign of an exact rational, or of a ball that excludes zero; ``None`` if undecided."""
    if isinstance(value, flint.fmpq):
        return (value > 0) - (value < 0)
    if value > 0:
        return 1
    if value < 0:
        return -1
    if value == 0:
        return 0
    return None


def to_float(value: Any) -> float:
    """Nearest float of a rational, or the midpoint of a ball."""
    if isinstance(value, flint.fmpq):
        return int(value.p) / int(value.q)
    return float(value.mid())


def radius(value: Any) -> float:
    """Half-width of a ball as a float (zero for an exact rational)."""
    return 0.0 if isinstance(value, flint.fmpq) else float(value.rad())


#: The prime for ranks mod p (a word-size Mersenne prime for flint's nmod_mat).
RANK_PRIME = 2**61 - 1

#: Largest modulus flint's nmod_mat holds (one machine word).
WORD_MODULUS = 2**64 - 1


def _integer_rows(matrix: Any) -> tuple[int, int, list[int]]:
    """``(rows, columns, entries)`` of a 2-D matrix of integers, entries as Python ints."""
    m = as_integer_array(matrix, "matrix", ndim=2, what="a 2-D integer matrix (scale rational rows to integers)")
    return m.shape[0], m.shape[1], [int(x) for x in m.ravel()]


def check_prime(prime: Any) -> int:
    """Require a prime p < 2^64: over Z/pZ, a field only for prime p, rank is defined (and
    flint's nmod_mat aborts the interpreter on a composite modulus)."""
    p = check_integer_in(prime, "prime", 2, WORD_MODULUS)
    if not flint.fmpz(p).is_prime():
        raise InputError(f"prime: {p} is not prime (Z/{p}Z is not a field, so a rank mod {p} is not defined)")
    return p


def rank_mod_prime(matrix: Any, prime: int = RANK_PRIME) -> int:
    """Rank of an integer matrix reduced mod a prime: a certified *lower* bound on its rank
    over the rationals (reduction can only lose rank)."""
    prime = check_prime(prime)
    return _rank_mod(*_integer_rows(matrix), prime)


def _rank_mod(rows: int, columns: int, entries: list[int], prime: int) -> int:
    return flint.nmod_mat(rows, columns, [e % prime for e in entries], prime).rank()


def exact_rank(matrix: Any) -> tuple[int, str]:
    """Exact rank of an integer matrix over the rationals (python-flint). Full rank mod a
    prime settles it at once; otherwise a fraction-free elimination over the integers
    (``fmpz_mat.rank``) gives the exact value."""
    rows, columns, entries = _integer_rows(matrix)
    lower = _rank_mod(rows, columns, entries, RANK_PRIME)
    if lower == min(rows, columns):
        return lower, "exact rank (full rank mod p)"
    return flint.fmpz_mat(rows, columns, entries).rank(), "exact rank (fraction-free elimination)"


#: Largest diagonal block whose rank :func:`block_triangular_rank` computes (dense, exactly).
DENSE_BLOCK_ORDER = 1024


def block_triangular_rank(matrix: Any) -> tuple[int, int, str]:
    """Exact bounds ``(lower, upper, how)`` on the rank over the rationals of a square integer
    matrix M (SciPy sparse or dense), through its block triangular form: ordered by the strongly
    connected components S of the graph of its off-diagonal nonzeros (SciPy), M is block upper
    triangular with diagonal blocks M[S, S], so

    - rank M >= Σ_S rank M[S, S] (the rows of a triangular block matrix over independent diagonal
      rows are independent);
    - rank M <= Σ_S rank M[S, :] <= Σ_sink rank M[S, S] + Σ_other |S| (a sink component, left by no
      nonzero, has M[S, :] zero outside the columns S).

    The bounds meet when every component left by a nonzero has a nonsingular diagonal block. Each
    block's rank is :func:`exact_rank` (a one-state block: whether its diagonal entry is nonzero); a
    block beyond :data:`DENSE_BLOCK_ORDER` states is bounded by 0 and its order, and ``how`` says so.
    Nothing about the matrix's origin is assumed: these are facts of block triangular matrices."""
    from rankwall.theory._sparse import strong_components, summed_entries

    n, row, column, entries = summed_entries(matrix, "matrix", integer=True)
    if n == 0:
        return 0, 0, "an empty matrix"
    off = row != column
    labels, sink = strong_components(n, row, column)
    count = len(sink)
    sizes = np.bincount(labels, minlength=count)
    single, large = sizes == 1, sizes > DENSE_BLOCK_ORDER
    ranks = np.zeros(count, dtype=np.int64)
    diagonal = np.zeros(n, dtype=bool)
    diagonal[row[~off]] = True
    ranks[labels[single[labels]]] = diagonal[single[labels]]
    members = np.argsort(labels, kind="stable")
    position = np.empty(n, dtype=np.int64)
    ends = np.cumsum(sizes)
    inside = labels[row] == labels[column]
    by_block = np.argsort(labels[row[inside]], kind="stable")
    block_rows, block_columns = row[inside][by_block], column[inside][by_block]
    block_entries, block_labels = entries[inside][by_block], labels[row[inside]][by_block]
    first = np.searchsorted(block_labels, np.arange(count + 1))
    for label in np.flatnonzero(~single & ~large):
        states = members[ends[label] - sizes[label] : ends[label]]
        position[states] = np.arange(len(states))
        block = np.zeros((len(states), len(states)), dtype=object)
        span = slice(first[label], first[label + 1])
        block[position[block_rows[span]], position[block_columns[span]]] = block_entries[span]
        ranks[label] = exact_rank(block)[0]
    lower = int(ranks.sum())
    # an unranked sink block (rank 0 in ``ranks``) is bounded above by its order
    upper = int(ranks[sink].sum() + sizes[~sink].sum() + sizes[large & sink].sum())
    how = (
        f"block triangular form ({count:,} strong components, the largest of {int(sizes.max()):,} states; "
        "exact ranks of the diagonal blocks)"
    )
    if large.any():
        how += f"; {int(large.sum())} blocks beyond {DENSE_BLOCK_ORDER:,} states left unranked"
    return lower, upper, how


def weyl_rank_lower_bound(
    matrix: np.ndarray, u: float, *, entry_error: float = 0.0, forming_norm: float = 0.0
) -> tuple[int, float, np.ndarray]:
    """``(#{σ_i > m}, m, σ)`` for the singular values σ of a float matrix (computed in its own array
    namespace, dtype and device; returned as float64 NumPy), with the Weyl margin
    m = ``entry_error`` (a Frobenius bound on the error of the matrix itself) +
    :func:`rankwall.checks.engine.tolerance.svd_rank_margin` (the SVD's backward error, and ``forming_norm``'s
    rounding). Each singular value above m belongs to a nonzero singular value of the exact
    matrix, so the count is a certified *lower* bound on its rank, never an upper one."""
    from rankwall.checks.engine.backends import singular_values
    from rankwall.checks.engine.tolerance import svd_rank_margin

    sigma = singular_values(matrix)
    top = float(sigma[0]) if sigma.size else 0.0
    margin = entry_error + svd_rank_margin(tuple(matrix.shape), u, forming_norm, top)
    return int(np.sum(sigma > margin)), margin, sigma


#: Columns of a Gram matrix's factor cast to float64 at a time (rows x block float64 entries).
GRAM_BLOCK_ENTRIES = 1 << 23


def gram_rank_lower_bound(matrix: Any, *, entry_error: float = 0.0) -> tuple[int, float, np.ndarray]:
    r"""``(#{σ̂_i > m}, m, σ̂)`` for a NumPy matrix M (float32 or float64, read exactly), through the
    eigenvalues :math:`\hat\lambda` of its Gram matrix :math:`fl(MM^\top)` (of :math:`M^\top M` when M is
    tall) in float64, :math:`\hat\sigma = \sqrt{\max(\hat\lambda, 0)}` in descending order. For a wide M
    (m << n) it costs m²n flops where the SVD costs about twice that, and gives half the digits.

    Certificate: with δ = :func:`rankwall.checks.engine.tolerance.gram_eigenvalue_error`, every
    :math:`\sigma_i(M)^2 \ge \hat\lambda_i - \delta`, and Weyl's inequality moves each singular value of a
    matrix M* within ``entry_error`` = ε of M (Frobenius norm) by at most ε. So
    :math:`\hat\lambda_i > \delta + \varepsilon^2`, i.e. :math:`\hat\sigma_i > m = \sqrt{\delta + \varepsilon^2}`, makes
    :math:`\sigma_i(M^*) > 0`: the count is a certified *lower* bound on rank M*, never an upper one."""
    from rankwall.checks.engine.tolerance import gram_eigenvalue_error, unit_roundoff

    M = np.asarray(matrix)
    if M.ndim != 2 or M.dtype not in (np.float32, np.float64):
        raise InputError(f"matrix: expected a 2-D float32 or float64 array, got ndim {M.ndim}, dtype {M.dtype}")
    if M.shape[0] > M.shape[1]:
        M = M.T
    rows, columns = M.shape
    gram = np.zeros((rows, rows))
    squares = 0.0
    block = max(1, GRAM_BLOCK_ENTRIES // max(rows, 1))
    for start in range(0, columns, block):
        part = M[:, start : start + block].astype(np.float64)
        gram += part @ part.T
        squares += float(np.einsum("ij,ij->", part, part))
    eigenvalues = np.linalg.eigvalsh(gram)[::-1]
    sigma = np.sqrt(np.maximum(eigenvalues, 0.0))
    delta = gram_eigenvalue_error((rows, columns), unit_roundoff(np.float64), squares)
    margin = float(np.sqrt(delta + entry_error**2))
    return int(np.sum(sigma > margin)), margin, sigma
