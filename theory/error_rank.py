r"""The rank of the prediction error :math:`P - \tilde N` and of log-probability matrices.

Sources: seed 000 ("Lost in Backpropagation: The LM Head is a Gradient Bottleneck"), §2.2,
Appendix A.3 (Prop. A.5, Prop. A.7, Cor. A.8), Appendix B.2-B.3, Cor. A.3; seed 001 ("Breaking
the softmax bottleneck"), Property 2 and Corollary 1. The seed text has lost the formal
statements; they are reconstructed from the proofs in ``docs/error_rank.md``. Notation:
:math:`P \in \Delta^{C \times V}` model probabilities (rows = contexts),
:math:`\tilde N` the row-normalised next-token counts.

1. *Unique continuations (Prop. A.5).* If k contexts each have a single observed next token
   and those tokens are distinct, then for every strictly positive P,
   :math:`\operatorname{rank}(P - \tilde N) \ge \min(k, V-1)`. For k < V the k x k submatrix
   on those rows and tokens is strictly diagonally dominant, with row margins
   :math:`\alpha_j = \sum_{v \notin T} P_{c_j v}` (the mass outside the token set); for k = V it
   is :math:`-(I - P_T)` with :math:`P_T` a positive stochastic matrix.
2. *Beyond positivity.* For a row-stochastic :math:`P_T`,
   :math:`\operatorname{rank}(I - P_T) = n - a` where a is the number of attracting (closed)
   strongly connected components of the graph of its positive entries; and a weakly chained
   diagonally dominant matrix is nonsingular.
3. *Mini-batches (Prop. A.7, Cor. A.8).* Contexts with one distinct next token in the batch
   but several in the data behave as in 1 against :math:`\tilde N^B`.
4. *Log-probabilities.* :math:`\operatorname{rank}(\log\operatorname{softmax}(A)) \le
   \operatorname{rank}(A) + 1` (Cor. A.3); any two row shifts :math:`A + \lambda\mathbf 1^\top`
   differ in rank by at most one (Property 2); logits :math:`HW^\top` of inner dimension d give
   log-probabilities of rank at most d + 1 (Corollary 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import array_api_compat
import networkx as nx
import numpy as np
import scipy.sparse as sparse
import scipy.sparse.csgraph as csgraph
import scipy.special

from rankwall.theory._softmax import log_softmax as log_softmax  # the shared one, under its old name
from rankwall.theory._sparse import strong_components, summed_entries
from rankwall.theory.validation import (
    MAX_VOCABULARY,
    InputError,
    as_count_array,
    as_index_array,
    as_numeric_array,
    as_real_array,
    check_integer_in,
    check_real_in,
    validated_probabilities,
)

#: Entries (rows x V) held at once when rows of P are streamed from logits.
STREAM_BLOCK_ENTRIES = 1 << 22


# --------------------------------------------------------------------------- counts


def validated_counts(counts: Any, name: str = "counts", *, every_context: bool = True) -> sparse.csr_matrix:
    """A context x token count matrix as float64 CSR: non-negative whole numbers, 2-D, V >= 2,
    and (``every_context``) at least one observed next token per context."""
    counts = as_count_array(counts, name)
    if counts.ndim == 1:  # one context (as SciPy reads a vector)
        counts = counts[None, :]
    if counts.ndim != 2:
        raise InputError(f"{name}: expected a 2-D context x token matrix, got ndim={counts.ndim}")
    matrix = sparse.csr_matrix(counts)
    if matrix.shape[1] < 2:
        raise InputError(f"{name}: vocabulary size V={matrix.shape[1]} is out of range (need V >= 2)")
    if matrix.shape[0] == 0:
        raise InputError(f"{name}: there are no contexts (shape {matrix.shape})")
    empty = np.asarray(matrix.sum(axis=1)).ravel() == 0
    if every_context and np.any(empty):
        raise InputError(f"{name}: context {int(np.flatnonzero(empty)[0])} has no observed next token")
    return matrix


def empirical_distribution(counts: Any) -> sparse.csr_matrix:
    """:math:`\\tilde N`: each context's counts divided by their total."""
    matrix = validated_counts(counts)
    totals = np.asarray(matrix.sum(axis=1)).ravel()
    return sparse.csr_matrix(sparse.diags(1.0 / totals) @ matrix)


def unique_continuations(counts: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(contexts, tokens)``: one context for each distinct token that is the *only* observed
    continuation of some context (the set :math:`\\mathcal C^{uu}` of Prop. A.5)."""
    matrix = validated_counts(counts)
    distinct = np.diff(matrix.indptr)
    rows = np.flatnonzero(distinct == 1)
    tokens = matrix.indices[matrix.indptr[rows]]
    tokens, first = np.unique(tokens, return_index=True)
    return rows[first], tokens


def batch_unique_continuations(full: Any, batch: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(contexts, tokens)`` of :math:`\\mathcal C^u_B` (Prop. A.7): contexts with one distinct
    next token in the batch but several in the whole data, one context per distinct batch token."""
    full_m, batch_m = validated_counts(full, "full"), validated_counts(batch, "batch", every_context=False)
    if full_m.shape != batch_m.shape:
        raise InputError(f"batch: shape {batch_m.shape} differs from the full counts' {full_m.shape}")
    in_batch = np.diff(batch_m.indptr)
    several = np.diff(full_m.indptr) >= 2
    rows = np.flatnonzero((in_batch == 1) & several)
    tokens = batch_m.indices[batch_m.indptr[rows]]
    tokens, first = np.unique(tokens, return_index=True)
    return rows[first], tokens


def ngram_counts(tokens: Sequence[int] | np.ndarray, order: int, V: int) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Counts of next tokens after each distinct context of ``order`` preceding tokens.

    Returns the (contexts x V) count matrix and the context of each row (``order`` ids)."""
    order = check_integer_in(order, "order", 1, 16)
    V = check_integer_in(V, "V", 2, MAX_VOCABULARY)
    ids = as_index_array(tokens, "tokens", V)
    if len(ids) <= order:
        raise InputError(f"tokens: need a 1-D stream longer than order={order}")
    windows = np.lib.stride_tricks.sliding_window_view(ids, order + 1)
    if order * np.log2(V) < 62:  # encode each context as one integer (base V digits): fast unique
        codes = windows[:, :order] @ (V ** np.arange(order - 1, -1, -1, dtype=np.int64))
        _, first, row = np.unique(codes, return_index=True, return_inverse=True)
        contexts = windows[first, :order]
    else:
        contexts, row = np.unique(windows[:, :order], axis=0, return_inverse=True)
    counts = sparse.coo_matrix((np.ones(len(row)), (row.ravel(), windows[:, order])), shape=(len(contexts), V))
    return counts.tocsr(), contexts


# --------------------------------------------------------------------------- instances


@dataclass(frozen=True)
class LogitRows:
    """Rows of logits :math:`z_c = W h_c` given by factors, never materialised as C x V. The factors
    may live in any array-API namespace; the logits and probabilities are computed there."""

    H: Any  # (C, D)
    W: Any  # (V, D)

    @property
    def shape(self) -> tuple[int, int]:
        return self.H.shape[0], self.W.shape[0]

    def block(self, rows: slice | np.ndarray) -> Any:
        """Logits of some rows, (r, V)."""
        return self.H[rows, ...] @ self.W.T

    def probabilities(self, rows: slice | np.ndarray) -> Any:
        """Softmax of some rows (log-sum-exp stabilised)."""
        z = self.block(rows)
        if isinstance(z, np.ndarray):
            return scipy.special.softmax(z, axis=1)
        xp = array_api_compat.array_namespace(z)
        e = xp.exp(z - xp.max(z, axis=1, keepdims=True))
        return e / xp.sum(e, axis=1, keepdims=True)

    def row_blocks(self, count: int) -> list[slice]:
        """Slices of the first ``count`` rows holding about :data:`STREAM_BLOCK_ENTRIES` entries each."""
        step = max(1, STREAM_BLOCK_ENTRIES // self.shape[1])
        return [slice(i, min(i + step, count)) for i in range(0, count, step)]


def construct_unique_continuation(
    V: int, k: int, D: int, seed: int, *, scale: float = 1.0
) -> tuple[LogitRows, np.ndarray]:
    """k contexts with distinct unique continuations and logits :math:`HW^\\top` of inner
    dimension D (entries of H and W normal, times ``scale``): ``(logits, tokens)``."""
    V = check_integer_in(V, "V", 2, MAX_VOCABULARY)
    k = check_integer_in(k, "k", 1, V)
    D = check_integer_in(D, "D", 1, 4096)
    scale = check_real_in(scale, "scale", 0.0, 1e6)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    H = scale * rng.standard_normal((k, D)) / np.sqrt(D)
    W = rng.standard_normal((V, D))
    tokens = rng.permutation(V)[:k] if k < V else rng.permutation(V)
    return LogitRows(H, W), tokens


def construct_zipf_language(
    V: int,
    contexts: int,
    seed: int,
    *,
    exponent: float = 1.1,
    unique_share: float = 0.5,
    mean_tokens: int = 8,
) -> sparse.csr_matrix:
    """A synthetic language: next-token counts whose token frequencies follow Zipf's law.

    ``unique_share`` of the contexts have a single observed continuation (drawn from the
    Zipf law); the others draw a Poisson number of tokens (mean ``mean_tokens``)."""
    V = check_integer_in(V, "V", 2, MAX_VOCABULARY)
    contexts = check_integer_in(contexts, "contexts", 1, 10_000_000)
    exponent = check_real_in(exponent, "exponent", 0.0, 10.0)
    unique_share = check_real_in(unique_share, "unique_share", 0.0, 1.0)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    weights = 1.0 / np.arange(1, V + 1) ** exponent
    weights /= weights.sum()
    rows, cols = [], []
    for c in range(contexts):
        n = 1 if rng.random() < unique_share else max(2, int(rng.poisson(mean_tokens)))
        drawn = rng.choice(V, size=n, p=weights)
        if n == 1:
            rows.append(c)
            cols.append(int(drawn[0]))
            continue
        rows.extend([c] * n)
        cols.extend(int(t) for t in drawn)
    counts = sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(contexts, V))
    return counts.tocsr()


def sample_batch(counts: Any, tokens: int, seed: int) -> sparse.csr_matrix:
    """A mini-batch: ``tokens`` (context, next token) occurrences drawn without replacement."""
    matrix = validated_counts(counts)
    total = int(matrix.sum())
    tokens = check_integer_in(tokens, "tokens", 1, total)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    coo = matrix.tocoo()
    occurrence_owner = np.repeat(np.arange(len(coo.data)), coo.data.astype(np.int64))
    chosen = occurrence_owner[rng.choice(total, size=tokens, replace=False)]
    kept = np.bincount(chosen, minlength=len(coo.data)).astype(np.float64)
    batch = sparse.coo_matrix((kept, (coo.row, coo.col)), shape=matrix.shape).tocsr()
    batch.eliminate_zeros()
    return batch


# --------------------------------------------------------------------------- quantities


def dominance_margins(logits: LogitRows, tokens: np.ndarray) -> Any:
    """:math:`\\alpha_j = \\sum_{v \\notin T} P_{jv}` for each context j, computed from the logits
    as :math:`\\exp(\\operatorname{lse}(z_{j, \\notin T}) - \\operatorname{lse}(z_j))` (no
    cancellation), streaming blocks of rows: memory O(block x V), never C x V; in the factors' namespace
    and dtype."""
    C, V = logits.shape
    tokens = as_index_array(tokens, "tokens", V)
    if len(tokens) != C:
        raise InputError(f"tokens: {len(tokens)} tokens for {C} contexts")
    outside = np.ones(V, dtype=bool)
    outside[tokens] = False
    xp = array_api_compat.array_namespace(logits.H)
    if not outside.any():
        return xp.zeros(C, dtype=logits.H.dtype, device=array_api_compat.device(logits.H))
    columns = xp.asarray(np.flatnonzero(outside), device=array_api_compat.device(logits.H))
    blocks = [xp.sum(xp.take(logits.probabilities(b), columns, axis=1), axis=1) for b in logits.row_blocks(C)]
    return xp.concat(blocks)


def varah_bound(margins: np.ndarray) -> float:
    """Varah's bound for a strictly diagonally dominant k x k matrix with row margins
    :math:`\\alpha_j`: :math:`\\sigma_{\\min} \\ge \\min_j \\alpha_j / \\sqrt k`."""
    margins = as_real_array(margins, "margins", ndim=1)
    return float(margins.min() / np.sqrt(len(margins))) if len(margins) else 0.0


def log_probability_floor(logits: LogitRows) -> float:
    """A lower bound on :math:`\\log P_{cv}` over all entries, in O((C + V) D):
    :math:`|z_{cv}| \\le \\max_c \\lVert h_c \\rVert \\max_v \\lVert w_v \\rVert = R`, so
    :math:`\\log P_{cv} \\ge -2R - \\log V`."""
    R = float(np.linalg.norm(logits.H, axis=1).max() * np.linalg.norm(logits.W, axis=1).max())
    return -2 * R - np.log(logits.shape[1])


def prediction_error_submatrix(P_rows: Any, tokens: Any) -> np.ndarray:
    """:math:`(P - \\tilde N)[C^{uu}, T]`: rows of P at the unique contexts, columns at their
    tokens, minus the identity (dense; small k only)."""
    _, rows = validated_probabilities(as_real_array(P_rows, "P"), "P")
    tokens = as_index_array(tokens, "tokens", rows.shape[1])
    if tokens.shape != (rows.shape[0],):
        raise InputError(f"tokens: {tokens.shape[0]} tokens for {rows.shape[0]} rows of P")
    if len(np.unique(tokens)) != len(tokens):
        raise InputError(f"tokens: must be distinct ids in [0, {rows.shape[1]})")
    return rows[:, tokens] - np.eye(len(tokens))


def _square(matrix: Any, name: str) -> Any:
    """A square real matrix, dense (NumPy) or SciPy sparse, with its entries checked."""
    if sparse.issparse(matrix):
        as_numeric_array(matrix.data, name)
    else:
        matrix = as_numeric_array(matrix, name, ndim=2)
    if matrix.shape[0] != matrix.shape[1]:
        raise InputError(f"{name}: expected a square matrix, got shape {tuple(matrix.shape)}")
    return matrix


def positive_graph(matrix: Any, name: str = "matrix") -> nx.DiGraph:
    """The directed graph with an edge i -> j wherever ``matrix[i, j] > 0`` (i != j)."""
    m = sparse.coo_matrix(_square(matrix, name))
    graph = nx.DiGraph()
    graph.add_nodes_from(range(m.shape[0]))
    graph.add_edges_from((int(i), int(j)) for i, j, v in zip(m.row, m.col, m.data, strict=True) if v > 0 and i != j)
    return graph


def graph_components(matrix: Any, name: str = "matrix") -> tuple[np.ndarray, np.ndarray]:
    """``(labels, closed)`` of the graph with an edge i -> j wherever ``matrix[i, j] > 0`` (i != j):
    each state's strongly connected component (SciPy), and for each component whether it is closed
    (attracting: no edge leaves it). Dense or SciPy sparse, an entry stored in parts summed exactly."""
    n, rows, columns, values = summed_entries(matrix, name)
    positive = values > 0
    return strong_components(n, rows[positive], columns[positive])


def attracting_components(stochastic: Any) -> int:
    """Number of attracting (closed) strongly connected components of the graph of the
    positive entries of a square row-stochastic matrix."""
    return int(graph_components(stochastic, "stochastic")[1].sum())


def stochastic_defect_rank(stochastic: Any) -> int:
    """:math:`\\operatorname{rank}(I - P_T) = n - a(P_T)`, the theorem's value."""
    n = _square(stochastic, "stochastic").shape[0]
    return n - attracting_components(stochastic)


#: Below this bound on a row's sum of magnitudes, integer rows are summed in int64 without overflow.
INT64_SAFE = 2**62


def row_dominance(matrix: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(|m_ii|, Σ_j≠i |m_ij|)`` for each row of a square matrix (dense or SciPy sparse, an entry
    stored in parts summed). Integer entries are summed exactly: returned in int64 where every row's
    magnitudes stay below :data:`INT64_SAFE`, else as Python ints (object arrays); floats in float64."""
    return _dominance(*summed_entries(matrix, "matrix"))


def _dominance(n: int, rows: Any, columns: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    magnitudes = np.abs(values)
    diagonal, total = np.zeros(n, dtype=magnitudes.dtype), np.zeros(n, dtype=magnitudes.dtype)
    on = rows == columns
    diagonal[rows[on]] = magnitudes[on]
    np.add.at(total, rows, magnitudes)
    if magnitudes.dtype == object and max(total.max(initial=0), 0) < INT64_SAFE:
        diagonal, total = diagonal.astype(np.int64), total.astype(np.int64)
    return diagonal, total - diagonal


def is_weakly_chained_diagonally_dominant(matrix: Any) -> bool:
    """Whether every row is weakly diagonally dominant and every row reaches a strictly
    dominant row along nonzero off-diagonal entries (then the matrix is nonsingular). Dense or
    SciPy sparse; integer entries are compared exactly."""
    n, rows, columns, values = summed_entries(matrix, "matrix")
    diagonal, off = _dominance(n, rows, columns, values)
    if np.any(diagonal < off):
        return False
    strict = np.flatnonzero(diagonal > off)
    if not len(strict):
        return False
    # Every state reaches a strict row: search backwards from a root joined to every strict row.
    forward = rows != columns
    sources = np.concatenate([columns[forward], np.full(len(strict), n)])
    targets = np.concatenate([rows[forward], strict])
    backward = sparse.csr_array((np.ones(len(sources), dtype=np.int8), (sources, targets)), shape=(n + 1, n + 1))
    return len(csgraph.breadth_first_order(backward, n, directed=True, return_predecessors=False)) == n + 1


def row_shift(A: Any, shifts: Any) -> np.ndarray:
    """:math:`A + \\lambda\\mathbf 1^\\top`: add ``shifts[i]`` to every entry of row i. Integer
    inputs are added exactly: in int64 when :math:`\\max|A| + \\max|\\lambda| < 2^{63}`, else in
    Python ints (an object array); never wrapped around in a narrower integer type."""
    A = as_numeric_array(A, "A", ndim=2)
    shifts = as_numeric_array(shifts, "shifts")
    if shifts.shape != (A.shape[0],):
        raise InputError(f"shifts: shape {shifts.shape} does not match the {A.shape[0]} rows of A")
    if A.dtype.kind in "iu" and shifts.dtype.kind in "iu":
        bound = sum(max(abs(int(m.min())), abs(int(m.max()))) if m.size else 0 for m in (A, shifts))
        wide = np.int64 if bound < 2**63 else object  # |a + s| <= max|A| + max|shifts|
        A, shifts = A.astype(wide), shifts.astype(wide)
    return A + shifts[:, None]


def construct_low_rank_factors(
    rows: int, columns: int, rank: int, seed: int, *, spread: int = 3, ones_column: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Integer factors H (rows x rank) and W (columns x rank), entries in [-spread, spread]; with
    ``ones_column`` (and rank >= 1) W's first column is all ones, so that
    :math:`\\mathbf 1 \\in \\operatorname{rowspace}(HW^\\top)`."""
    rows = check_integer_in(rows, "rows", 1, 100_000)
    columns = check_integer_in(columns, "columns", 2, MAX_VOCABULARY)
    rank = check_integer_in(rank, "rank", 0, min(rows, columns))
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    H = rng.integers(-spread, spread + 1, size=(rows, rank))
    W = rng.integers(-spread, spread + 1, size=(columns, rank))
    if ones_column and rank:
        W[:, 0] = 1
    return H, W


def construct_low_rank_integers(
    rows: int, columns: int, rank: int, seed: int, *, spread: int = 3, ones_column: bool = False
) -> np.ndarray:
    """An integer matrix :math:`HW^\\top` with H, W integer of inner dimension ``rank``
    (entries in [-spread, spread], :func:`construct_low_rank_factors`); its rank is at most ``rank``
    (generically equal)."""
    H, W = construct_low_rank_factors(rows, columns, rank, seed, spread=spread, ones_column=ones_column)
    return (H @ W.T).astype(np.int64)


#: Largest order of a dense stochastic pattern (n x n int64 weights).
DENSE_PATTERN_ORDER = 5000

#: Most stored weights of a sparse stochastic pattern, per state.
SPARSE_PATTERN_ENTRIES_PER_STATE = 64


def construct_stochastic_with_classes(
    n: int, closed: int, seed: int, *, density: float = 0.3, recurrent: int = 0
) -> Any:
    """An integer matrix whose row normalisation is stochastic with exactly ``closed``
    attracting classes: states split into ``closed`` closed blocks (strongly connected inside: a
    cycle, and each other pair joined with probability ``density``) and transient states, each of
    which leads into a block and on to later transient states. Returns non-negative integer weights.

    With ``recurrent = 0`` the number of states in the blocks is drawn uniformly from closed..n, a
    transient state joins each later one with probability ``density``, and the weights are a dense
    n x n int64 array (n <= :data:`DENSE_PATTERN_ORDER`). With ``recurrent`` given, the blocks hold
    that many states, and the weights are a SciPy CSR array of order up to :data:`MAX_VOCABULARY`
    (:func:`_sparse_pattern`)."""
    n = check_integer_in(n, "n", 1, MAX_VOCABULARY)
    recurrent = check_integer_in(recurrent, "recurrent", 0, n)
    if not recurrent and n > DENSE_PATTERN_ORDER:
        raise InputError(
            f"n: {n} is beyond {DENSE_PATTERN_ORDER:,} states for a dense pattern; give recurrent (the number "
            "of states in closed classes) for a sparse one"
        )
    closed = check_integer_in(closed, "closed", 1, n)
    density = check_real_in(density, "density", 0.0, 1.0)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    if recurrent:
        return _sparse_pattern(rng, n, closed, check_integer_in(recurrent, "recurrent", closed, n), density)
    order = rng.permutation(n)
    transient = order[: rng.integers(0, n - closed + 1)]
    recurrent_states = order[len(transient) :]
    blocks = np.array_split(recurrent_states, closed)
    weights = np.zeros((n, n), dtype=np.int64)
    for block in blocks:
        cycle = np.roll(block, 1)
        weights[block, cycle] += rng.integers(1, 5, size=len(block))  # a cycle: strongly connected
        extra = rng.random((len(block), len(block))) < density
        weights[np.ix_(block, block)] += extra * rng.integers(1, 5, size=extra.shape)
    for i, state in enumerate(transient):
        target_block = blocks[rng.integers(closed)]
        weights[state, rng.choice(target_block)] += rng.integers(1, 5)
        later = transient[i + 1 :]
        if len(later):
            mask = rng.random(len(later)) < density
            weights[state, later[mask]] += rng.integers(1, 5, size=mask.sum())
    return weights


def _sparse_pattern(rng: Any, n: int, closed: int, recurrent: int, density: float) -> sparse.csr_array:
    """The weights of a large pattern, drawn block-wise at once (memory linear in the weights):
    ``recurrent`` states in ``closed`` blocks (sizes differing by at most one), each a cycle and
    Binomial(size², ``density``) more steps between uniformly drawn states of the block (repeats add
    their weights); each transient state steps into a uniformly chosen state of a uniformly chosen block,
    and to Binomial(min(later, block size), ``density``) later transient states drawn uniformly (repeats
    add their weights), so that a transient row holds about as many weights as a block row."""
    block_size = -(-recurrent // closed)
    per_state = 1 + 2 * density * block_size
    if per_state > SPARSE_PATTERN_ENTRIES_PER_STATE:
        raise InputError(
            f"density: {density} gives about {per_state:.0f} weights per state in blocks of {block_size} "
            f"states, beyond the {SPARSE_PATTERN_ENTRIES_PER_STATE} a sparse pattern holds"
        )
    order = rng.permutation(n)
    transient, members = order[: n - recurrent], order[n - recurrent :]
    small, large = divmod(recurrent, closed)  # `large` blocks of small + 1 states, then blocks of `small`
    rows, columns, weights = [], [], []
    start = 0
    for size, count in ((small + 1, large), (small, closed - large)):
        if not count or not size:
            continue
        group = members[start : start + size * count].reshape(count, size)
        start += size * count
        rows.append(group.ravel())
        columns.append(np.roll(group, 1, axis=1).ravel())  # a cycle: strongly connected
        weights.append(rng.integers(1, 5, size=group.size))
        block = np.repeat(np.arange(count), rng.binomial(size * size, density, size=count))
        rows.append(group[block, rng.integers(size, size=len(block))])
        columns.append(group[block, rng.integers(size, size=len(block))])
        weights.append(rng.integers(1, 5, size=len(block)))
    count = len(transient)
    if count:
        sizes = np.array([small + 1] * large + [small] * (closed - large))
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        chosen = rng.integers(closed, size=count)
        rows.append(transient)
        columns.append(members[starts[chosen] + np.floor(rng.random(count) * sizes[chosen]).astype(np.int64)])
        weights.append(rng.integers(1, 5, size=count))
        later = count - 1 - np.arange(count)
        sources = np.repeat(np.arange(count), rng.binomial(np.minimum(later, block_size), density))
        rows.append(transient[sources])
        columns.append(transient[sources + 1 + np.floor(rng.random(len(sources)) * later[sources]).astype(np.int64)])
        weights.append(rng.integers(1, 5, size=len(sources)))
    pattern = sparse.csr_array(
        (np.concatenate(weights).astype(np.int64), (np.concatenate(rows), np.concatenate(columns))), shape=(n, n)
    )
    pattern.sum_duplicates()
    return pattern
