"""Square matrices read entry by entry, exactly, and the strongly connected components of their
patterns: shared by :mod:`~rankwall.theory.error_rank` (attracting classes, weak chained dominance)
and :func:`rankwall.checks.exact.block_triangular_rank`."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sparse
import scipy.sparse.csgraph as csgraph

from rankwall.theory.validation import InputError, as_integer_array, as_numeric_array

#: What an integer matrix is asked for (a rational one is scaled to integers first).
INTEGER_MATRIX = "a 2-D integer matrix (scale rational rows to integers)"


def summed_entries(matrix: Any, name: str, *, integer: bool = False) -> tuple[int, Any, Any, Any]:
    """``(n, rows, columns, values)`` of the nonzero entries of a square matrix, dense or SciPy sparse,
    an entry stored in parts (a sparse duplicate) being their sum. Integers and exact numbers (Python
    ints, Fractions) are summed as Python numbers in an object array, so nothing wraps around at 2^63;
    floats in float64, a non-finite one refused. ``integer`` refuses anything but integers."""
    if sparse.issparse(matrix):
        m = sparse.coo_array(matrix)
        if m.dtype.kind not in ("iu" if integer else "iuf"):
            raise InputError(f"{name}: expected {INTEGER_MATRIX if integer else 'real entries'}, got dtype {m.dtype}")
        rows, columns, values, shape = m.row, m.col, m.data, m.shape
    else:
        dense = (
            as_integer_array(matrix, name, ndim=2, what=INTEGER_MATRIX)
            if integer
            else as_numeric_array(matrix, name, ndim=2)
        )
        rows, columns = np.nonzero(dense)
        values, shape = dense[rows, columns], dense.shape
    if shape[0] != shape[1]:
        raise InputError(f"{name}: expected a square matrix, got shape {tuple(shape)}")
    if values.dtype.kind in "iuO":
        values = values.astype(object)
    else:
        values = values.astype(np.float64)
        if not np.all(np.isfinite(values)):
            raise InputError(f"{name}: non-finite entry")
    n = shape[0]
    keys = rows.astype(np.int64) * n + columns.astype(np.int64)
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)
    if len(keys):
        values = np.add.reduceat(values, starts)
    keys = keys[starts]
    kept = values != 0
    return n, keys[kept] // max(n, 1), keys[kept] % max(n, 1), values[kept]


def strong_components(n: int, sources: Any, targets: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, closed)`` of the directed graph on n nodes with edges sources -> targets (loops
    ignored): each node's strongly connected component (SciPy), and for each component whether no
    edge leaves it (a closed, or sink, component)."""
    edge = sources != targets
    sources, targets = sources[edge], targets[edge]
    graph = sparse.csr_array((np.ones(len(sources), dtype=np.int8), (sources, targets)), shape=(n, n))
    count, labels = csgraph.connected_components(graph, directed=True, connection="strong")
    closed = np.ones(count, dtype=bool)
    closed[labels[sources][labels[sources] != labels[targets]]] = False
    return labels, closed
