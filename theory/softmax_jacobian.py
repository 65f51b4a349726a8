r"""The softmax Jacobian :math:`J(p) = \operatorname{diag}(p) - p p^\top`.

Source: seed 002 ("Gradients 2: A Confident Attention Head Passes Almost No Gradient").
Write :math:`m = \max_i p_i` and :math:`s = 1 - m`. For every probability vector
:math:`p \in \Delta^{V-1}`:

1. *Variance form.* :math:`u^\top J u = \operatorname{Var}_p(u)` for every :math:`u`, so
   :math:`J` is symmetric positive semidefinite and :math:`J\mathbf 1 = 0`.
2. *Trace.* :math:`\operatorname{tr} J = 1 - \sum_i p_i^2` (a collision complement, not the
   entropy).
3. *Rank.* :math:`\operatorname{rank} J = |\operatorname{supp} p| - 1`; the smallest nonzero
   eigenvalue is at least :math:`\min_{i \in \operatorname{supp} p} p_i`.
4. *Bounds.* :math:`m s \le \lVert J \rVert_2 \le 2 m s`. The seed states this for
   :math:`m \ge 1/2`; both halves hold for every :math:`p`.
5. *Envelope.* :math:`\sup\{\lVert J \rVert_2 : \max p = m\} = \min(m, 2ms)`, attained by the
   runner-up row :math:`(m, 1-m)` when :math:`m \ge 1/2` and by two tied atoms when
   :math:`m \le 1/2`; the infimum :math:`ms` is approached by spreading the tail over
   :math:`n` atoms, where :math:`\lVert J \rVert_2 \le ms \cdot n/(n-1)`.

The spectral norm is computed without forming :math:`J`: its eigenvalues are the roots of the
secular equation of a diagonal minus a rank-one matrix (see :func:`secular_function`), solved
row by row in :math:`O(V)` per iteration. Every function accepts probabilities (validated)
or a :class:`SoftmaxRows` built from logits by :func:`softmax_rows`, in which the complement
:math:`1 - m` is a sum of the other probabilities and so never cancels.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np

from rankwall.theory._rounding import gamma, unit_roundoff
from rankwall.theory.validation import (
    MAX_VOCABULARY,
    InputError,
    as_array,
    as_count_array,
    check_integer_in,
    check_real_floating,
    check_real_in,
    check_rows,
    normalization_tolerance,
    validated_like,
    validated_logits,
    validated_probabilities,
)

#: Iteration cap of the secular solver; convergence takes 3-4 evaluations on the benchmark's rows
#: (a safeguarded rational model), so reaching the cap means the row is pathological and is reported.
SECULAR_MAX_ITERATIONS = 200


@dataclass(frozen=True)
class SoftmaxRows:
    """Rows of probabilities with the top mass and its complement kept apart.

    ``p`` is (R, V) and sums to one by row; ``top`` is :math:`m`, ``complement`` is
    :math:`s = 1 - m` computed as the sum of the other entries, ``tail`` is ``p`` with the
    top entry set to zero, ``top_index`` the (first) argmax. ``single`` records that the
    input was one row, so results come back as scalars (0-d arrays).
    """

    xp: Any
    p: Any
    tail: Any
    top: Any
    complement: Any
    top_index: Any
    single: bool
    #: From logits: the tail divided by its largest entry, computed in log space as
    #: :math:`e^{z_i - z_{(2)}}` (so it never underflows where the runner-up is kept), and
    #: :math:`\log \sigma = z_{(2)} - \max z - \log S` (None for probabilities).
    scaled_tail: Any = None
    log_sigma: Any = None

    def result(self, values: Any) -> Any:
        """Squeeze a per-row result back to a 0-d array when the input was one row."""
        return values[0, ...] if self.single else values


def _zero(xp: Any, like: Any) -> Any:
    """A 0-d zero of ``like``'s dtype and device (cheaper than ``zeros_like`` for masking)."""
    return xp.asarray(0, dtype=like.dtype, device=array_api_compat.device(like))


def _split_top(xp: Any, p: Any) -> tuple[Any, Any, Any]:
    """``(top_index, is_top mask, tail)`` for rows ``p``."""
    top_index = xp.argmax(p, axis=-1)
    columns = xp.arange(p.shape[-1], device=array_api_compat.device(p))
    is_top = columns[None, :] == top_index[:, None]
    return top_index, is_top, xp.where(is_top, _zero(xp, p), p)


def _normalized_rows(xp: Any, rows: Any, single: bool) -> SoftmaxRows:
    """:class:`SoftmaxRows` of validated probability rows, each divided by its sum."""
    rows = rows / xp.sum(rows, axis=-1, keepdims=True)
    top_index, _, tail = _split_top(xp, rows)
    top = xp.max(rows, axis=-1)
    return SoftmaxRows(xp, rows, tail, top, xp.sum(tail, axis=-1), top_index, single)


def probability_rows(p: Any) -> SoftmaxRows:
    """Validate probability rows and normalise each to sum to one exactly up to rounding."""
    if isinstance(p, SoftmaxRows):
        return p
    xp, rows = validated_probabilities(p, "p")
    return _normalized_rows(xp, rows, getattr(p, "ndim", np.ndim(p)) == 1)


def softmax_rows(z: Any) -> SoftmaxRows:
    """:math:`\\operatorname{softmax}(z)` by rows, with :math:`1 - m` taken from the logits.

    With :math:`e_i = \\exp(z_i - \\max z)` and :math:`S = \\sum e_i`, the top mass is
    :math:`1/S` and its complement :math:`(\\sum_{i \\ne k} e_i)/S`: no subtraction, so a
    logit gap of 700 still gives a complement near :math:`e^{-700}` with full relative
    accuracy."""
    xp, rows = validated_logits(z, "z")
    single = getattr(z, "ndim", np.ndim(z)) == 1
    top_index, is_top, _ = _split_top(xp, rows)
    e = xp.exp(rows - xp.max(rows, axis=-1, keepdims=True))
    total = xp.sum(e, axis=-1, keepdims=True)
    p = e / total
    tail = xp.where(is_top, _zero(xp, p), p)
    tail_e = xp.where(is_top, _zero(xp, e), e)
    complement = xp.sum(tail_e, axis=-1) / total[:, 0]
    tail_z = xp.where(is_top, _zero(xp, rows) - xp.inf, rows)
    second_z = xp.max(tail_z, axis=-1, keepdims=True)
    scaled = xp.exp(tail_z - second_z)
    log_sigma = (second_z[:, 0] - xp.max(rows, axis=-1)) - xp.log(total[:, 0])
    return SoftmaxRows(xp, p, tail, 1 / total[:, 0], complement, top_index, single, scaled, log_sigma)


# --------------------------------------------------------------------------- quantities


def dense_jacobian(p: Any) -> Any:
    """:math:`J = \\operatorname{diag}(p) - pp^\\top` as a dense (R, V, V) array (small V only)."""
    rows = probability_rows(p)
    xp, q = rows.xp, rows.p
    eye = xp.eye(q.shape[-1], dtype=q.dtype, device=array_api_compat.device(q))
    return rows.result(q[:, :, None] * eye[None, :, :] - q[:, :, None] * q[:, None, :])


def jvp(p: Any, u: Any) -> Any:
    """:math:`Ju = p \\odot (u - \\langle p, u\\rangle)` in :math:`O(V)`, without forming J."""
    rows = probability_rows(p)
    xp = rows.xp
    u2 = validated_like(xp, u, rows.p, "u")
    mean = xp.sum(rows.p * u2, axis=-1, keepdims=True)
    return rows.result(rows.p * (u2 - mean))


def quadratic_form(p: Any, u: Any) -> Any:
    """:math:`u^\\top J u` from the matrix form :math:`\\sum_i u_i (Ju)_i`."""
    rows = probability_rows(p)
    xp = rows.xp
    u2 = validated_like(xp, u, rows.p, "u")
    ju = rows.p * u2 - rows.p * xp.sum(rows.p * u2, axis=-1, keepdims=True)
    return rows.result(xp.sum(u2 * ju, axis=-1))


def variance(p: Any, u: Any) -> Any:
    """:math:`\\operatorname{Var}_p(u) = \\sum_i p_i (u_i - \\mu)^2` (two-pass, no cancellation)."""
    rows = probability_rows(p)
    xp = rows.xp
    u2 = validated_like(xp, u, rows.p, "u")
    mean = xp.sum(rows.p * u2, axis=-1, keepdims=True)
    return rows.result(xp.sum(rows.p * (u2 - mean) ** 2, axis=-1))


def trace(p: Any) -> Any:
    """:math:`\\operatorname{tr} J = \\sum_i J_{ii} = \\sum_i p_i(1 - p_i)`, with
    :math:`1 - m` for the top entry taken as the complement."""
    rows = probability_rows(p)
    xp = rows.xp
    off_top = xp.sum(rows.tail * (1 - rows.tail), axis=-1)
    return rows.result(off_top + rows.top * rows.complement)


def collision_complement(p: Any) -> Any:
    """:math:`1 - \\sum_i p_i^2`, evaluated as :math:`s(1+m) - \\sum_{i \\ne k} p_i^2` (no cancellation:
    the result is at least :math:`s`)."""
    rows = probability_rows(p)
    xp = rows.xp
    return rows.result(rows.complement * (1 + rows.top) - xp.sum(rows.tail * rows.tail, axis=-1))


def entropy(p: Any) -> Any:
    """Shannon entropy :math:`-\\sum_i p_i \\log p_i` in nats (with :math:`0 \\log 0 = 0`)."""
    rows = probability_rows(p)
    xp = rows.xp
    positive = rows.p > 0
    safe = xp.where(positive, rows.p, xp.ones_like(rows.p))
    return rows.result(-xp.sum(xp.where(positive, rows.p * xp.log(safe), xp.zeros_like(safe)), axis=-1))


def support_size(p: Any) -> Any:
    """:math:`|\\operatorname{supp} p|`, the number of strictly positive entries of each row."""
    rows = probability_rows(p)
    xp = rows.xp
    return rows.result(xp.sum(xp.astype(rows.p > 0, xp.int64), axis=-1))


def top_probability(p: Any) -> Any:
    """:math:`m = \\max_i p_i`."""
    rows = probability_rows(p)
    return rows.result(rows.top)


def lower_bound(p: Any) -> Any:
    """:math:`m(1 - m)`, the winner's diagonal entry of J."""
    rows = probability_rows(p)
    return rows.result(rows.top * rows.complement)


def upper_bound(p: Any) -> Any:
    """:math:`2m(1 - m)`."""
    rows = probability_rows(p)
    return rows.result(2 * rows.top * rows.complement)


def envelope(p: Any) -> Any:
    """:math:`\\min(m, 2m(1-m))`, the largest :math:`\\lVert J \\rVert_2` among rows with top mass m."""
    rows = probability_rows(p)
    xp = rows.xp
    return rows.result(xp.minimum(rows.top, 2 * rows.top * rows.complement))


def spread_tail_ceiling(m: float, atoms: int) -> float:
    """:math:`m(1-m) \\cdot n/(n-1)`, the ceiling on :math:`\\lVert J \\rVert_2` for the row
    :math:`(m, \\tfrac{1-m}{n}, \\dots, \\tfrac{1-m}{n})` with ``atoms`` = n >= 2 tail atoms."""
    atoms = check_integer_in(atoms, "atoms", 2)
    m = check_real_in(m, "m", 0.0, 1.0)
    return m * (1 - m) * atoms / (atoms - 1)


def slowdown(m: float, reference: float = 0.5) -> float:
    """How many times more steps a head at top mass ``m`` needs than one at ``reference``
    to make the same routing change, read as the ratio of capacities 2m(1-m)."""
    m = check_real_in(m, "m", 0.0, 1.0, closed=False)
    reference = check_real_in(reference, "reference", 0.0, 1.0, closed=False)
    return (reference * (1 - reference)) / (m * (1 - m))


def secular_function(
    lam: Any, top: Any, complement: Any, tail: Iterable[Any], counts: Iterable[int] | None = None
) -> Any:
    """The secular function whose largest root is :math:`\\lVert J \\rVert_2`:

    .. math:: F(\\lambda) = \\frac{\\lambda - m s}{m - \\lambda}
              - \\sum_{i \\ne k} \\frac{q_i^2}{\\lambda - q_i},

    increasing on :math:`(\\max_i q_i, m)` from :math:`-\\infty` to :math:`+\\infty`, so
    :math:`\\lVert J \\rVert_2 \\le t \\iff F(t) \\ge 0` for :math:`t` in that interval. Plain
    scalar arithmetic: it runs on floats, exact rationals (``flint.fmpq``) and balls
    (``flint.arb``) alike. ``counts`` gives multiplicities of repeated tail values."""
    tail = list(tail)
    counts = [1] * len(tail) if counts is None else [int(c) for c in as_count_array(counts, "counts", ndim=1)]
    if len(counts) != len(tail):
        raise InputError(f"counts: {len(counts)} counts for {len(tail)} tail values")
    total = (lam - top * complement) / (top - lam)
    for q, c in zip(tail, counts, strict=True):
        if q != 0:
            total -= c * q * q / (lam - q)
    return total


#: Entries processed per block of rows in the secular solver (bounds temporary memory: four
#: buffers of this many entries). Two rows at V = 131,072: measured fastest on NumPy (cache).
SECULAR_BLOCK_ENTRIES = 1 << 18

#: Roundings the rounding-error model charges :func:`spectral_norm` besides its sums. Bracketing
#: solver: dividing by the row total (1), the scaled tail :math:`q_i/\sigma` and its offset
#: :math:`1 - q_i` (2), the square, the offset :math:`\mu - q_i` and the division of each secular
#: term (3), and the stopping test, which accepts the root within :math:`u\mu` (2). Moment route
#: (:func:`_moment_roots`): the term of :math:`M_{j+1}` carries :math:`3j + 4` roundings (the
#: distance :math:`c - r_i`, its reciprocal, the chain of products), weighted at the root by
#: :math:`(Z/(m - r_i))^j \le 4^{-j}` at the top pole, so at most 5 on average (at the second centre
#: the accepted remainder keeps the one negative term below :math:`\sqrt u` of the side, see
#: :mod:`._secular_kernel`); with Horner's rule and the side's sum
#: (at most 8/3), :math:`m^2` (1), the series' remainder (at most u/4, checked) and the Newton stop
#: (within 2u), under V + 12 on the root Z, which enters the norm :math:`(m - Z)/T` damped by
#: :math:`Z/(m - Z) \le 1/3`: with :math:`(m - Z)/T` (2) and T's few u, :math:`(V + 12)/3 + 4 \le V + 8`.
#: The compiled kernel (:mod:`._secular_kernel`) forms every term by the same operations in the same
#: order, and adds the few tail entries nearest the top pole exactly (three roundings each), so the
#: same charges hold there; its sums run in 16 (first pass, moments) or 64 (bracketing) partial sums
#: added in turn (V - 1 additions of the terms, the zero padding exact: within the
#: :math:`\gamma_{V-1}` of any order), and its row total and tail sum are compensated (TwoSum).
SPECTRAL_NORM_ROUNDINGS = 8


def spectral_norm_error_bound(V: int, dtype: Any) -> float:
    r"""Relative error bound of :func:`spectral_norm` on a row of V entries of ``dtype``, from the
    rounding-error model: :math:`\gamma_{V + 8}`. The backend sums a row in an order it chooses,
    so the model charges each sum of V terms :math:`\gamma_{V-1}`; the root inherits the
    relative error of the secular function's two sides with a factor at most 1 (the slope there is
    at least their common value over :math:`\lambda`). This is the bound behind
    ``checks.engine.tolerance.spectral_norm_tolerance``; measured errors are far inside it (docs)."""
    return gamma(check_integer_in(V, "V", 1) + SPECTRAL_NORM_ROUNDINGS, unit_roundoff(dtype))


def _row_blocks(n_rows: int, V: int, entries: int | None = None) -> list[slice]:
    """Blocks of rows holding about ``entries`` (default :data:`SECULAR_BLOCK_ENTRIES`) entries each."""
    step = max(1, (SECULAR_BLOCK_ENTRIES if entries is None else entries) // V)
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


#: Operations :func:`_into` writes in place, by their names in NumPy (CuPy) and in PyTorch.
_OPS = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div"}


_MODULES: dict[Any, Any] = {}


def _module(xp: Any) -> Any:
    """NumPy, CuPy or PyTorch itself when ``xp`` wraps one of them (they take ``out=``), else None.
    Remembered per namespace: it is asked on every pass, and the lookups cost ~10 us each."""
    if xp not in _MODULES:
        module = None
        if array_api_compat.is_numpy_namespace(xp):
            module = np
        elif array_api_compat.is_torch_namespace(xp) or array_api_compat.is_cupy_namespace(xp):
            import importlib

            module = importlib.import_module("torch" if array_api_compat.is_torch_namespace(xp) else "cupy")
        _MODULES[xp] = module
    return _MODULES[xp]


def _into(xp: Any, op: str, a: Any, b: Any, out: Any) -> Any:
    """``a op b`` written into ``out`` where the library takes ``out=`` (NumPy, CuPy, PyTorch):
    at V = 131,072 a fresh V-sized temporary (page faults) costs more than the arithmetic.
    Elsewhere (or with ``out`` None) a new array with the same values."""
    module = _module(xp)
    if module is None or out is None:
        if op == "add":
            return a + b
        if op == "subtract":
            return a - b
        return a * b if op == "multiply" else a / b
    name = _OPS[op] if module.__name__ == "torch" else op
    return getattr(module, name)(a, b, out=out)


def _floor(xp: Any, x: Any, out: Any) -> Any:
    """``floor(x)``, written into ``out`` where the library takes ``out=``."""
    module = _module(xp)
    if module is None or out is None:
        return xp.floor(x)
    return module.floor(x, out=out)


def _workspace(xp: Any, rows: int, like: Any) -> dict[str, Any] | None:
    """Buffers of ``rows`` rows shaped like ``like``'s, reused by every block (None: no ``out=``)."""
    if _module(xp) is None:
        return None
    shape = (rows, like.shape[-1])
    device = array_api_compat.device(like)
    return {k: xp.empty(shape, dtype=like.dtype, device=device) for k in ("q", "e", "diff", "term")}


def _take(work: dict[str, Any] | None, key: str, rows: int) -> Any:
    return None if work is None else work[key][:rows, ...]


def _is_torch_cpu(xp: Any, like: Any) -> bool:
    module = _module(xp)
    return module is not None and module.__name__ == "torch" and like.device.type == "cpu"


def _is_torch_cpu_array(x: Any) -> bool:
    return array_api_compat.is_torch_array(x) and x.device.type == "cpu"


def _row_namespace(xp: Any, like: Any) -> tuple[Any, Any, Any]:
    """``(sp, to_rows, to_xp)``: the namespace for the solver's per-row values (a few numbers
    per row, some 75 operations per iteration) and the conversions to and from it.

    On PyTorch/CPU these run on zero-copy NumPy views: a PyTorch call on a 2-element tensor
    costs ~4 us against NumPy's ~1 us, which at V = 131,072 was ~0.3 ms a row, a sixth of the
    solver. The per-row steps are single IEEE operations (+, -, *, /, sqrt, comparisons,
    selections), correctly rounded in both libraries, so the values are the same; every O(V)
    pass (the divisions, the sums) still runs on the caller's backend. Elsewhere: ``xp`` itself."""
    if _is_torch_cpu(xp, like):
        import torch

        def to_rows(t: Any) -> Any:
            return t.detach().numpy() if isinstance(t, torch.Tensor) else t

        return array_api_compat.array_namespace(np.empty(0)), to_rows, torch.from_numpy
    return xp, lambda t: t, lambda t: t


#: Intra-op threads PyTorch/CPU gets inside :func:`spectral_norm` (restored afterwards). The
#: solver's passes are ~50 us each on a 2-row block; a fork/join across cores that other jobs keep
#: busy waits for a descheduled thread, and on a loaded 2-core machine 2 threads gave 6-9 rows/s at
#: V = 131,072 against ~250 with one. Independent rows would be the way to use more cores.
TORCH_CPU_THREADS = 1


@contextmanager
def _solver_context(x: Any) -> Iterator[None]:
    """For a PyTorch/CPU input ``x``: no autograd recording, :data:`TORCH_CPU_THREADS` intra-op
    threads; the thread count is process-wide in PyTorch, so it is set for the call only and then
    restored (another Python thread running PyTorch meanwhile sees it)."""
    if not _is_torch_cpu_array(x):
        yield
        return
    import torch

    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(min(previous, TORCH_CPU_THREADS))
        with torch.no_grad():
            yield
    finally:
        torch.set_num_threads(previous)


def _largest_root(xp: Any, tail: Any, m: Any, s: Any) -> Any:
    """Largest root of :func:`secular_function` by a fixed-pole rational model.

    Work in :math:`\\mu = \\lambda/\\sigma` with :math:`\\sigma = \\max_{i \ne k} q_i` (so squares
    of a tail near :math:`e^{-700}` do not underflow); the root lies between the poles
    :math:`\\mu = 1` and :math:`\\mu = b = m/\\sigma` (interlacing). The unknown is kept as an
    offset from the nearer pole -- :math:`y = \\mu - 1` or :math:`z = b - \\mu` -- so that every
    difference :math:`\\mu - \tilde q_i` is a sum of non-negative terms and the root keeps full
    relative accuracy even a few ulps from a pole. Each step models the non-pole tail sum
    :math:`R(\\mu) = \\sum_{\tilde q_i < 1} \tilde q_i^2/(\\mu - \tilde q_i)` as
    :math:`\beta + \alpha/(\\mu - 1)` (value and slope matched; :math:`\beta \\ge 0`), solves the
    resulting quadratic in closed form, and falls back to the secant of the bracket ends, then
    to bisection (the "middle way" of LAPACK's dlaed4). The m-bounds under test are never used."""
    second = xp.max(tail, axis=-1)
    trivial = s == 0
    tied = second >= m
    sigma = xp.where(trivial | tied, xp.ones_like(m), second)
    return _solve(xp, tail / sigma[:, None], m, sigma, m * s / sigma, trivial, tied, own_q=True)


def _from_probabilities(xp: Any, raw: Any, work: dict[str, Any] | None) -> Any:
    r"""The root for validated probability rows ``raw`` (not yet normalised), in few passes:
    :math:`q_i/\sigma` is taken from the raw entries (the normalising sum cancels), and
    :math:`m, s, \sigma` are the raw top, tail sum and runner-up divided by the row sum."""
    r = raw.shape[0]
    sp, to_rows, to_big = _row_namespace(xp, raw)
    total = to_rows(xp.sum(raw, axis=-1))
    module = _module(xp)
    if module is None:
        top_index = xp.argmax(raw, axis=-1)
        top_raw = xp.max(raw, axis=-1)
        columns = xp.arange(raw.shape[-1], device=array_api_compat.device(raw))
        tail = xp.where(columns[None, :] == top_index[:, None], _zero(xp, raw), raw)
    else:
        # The (first) argmax is an exact selection, so PyTorch/CPU takes it on the NumPy view
        # (torch.argmax was ~6x slower there); the top is then read off, not found by a pass.
        top_index = to_big(sp.argmax(to_rows(raw), axis=-1))
        tail = work["q"][:r, ...]
        tail[...] = raw
        rows = module.arange(r, device=top_index.device) if module.__name__ == "torch" else module.arange(r)
        top_raw = tail[rows, top_index]
        tail[rows, top_index] = 0
    second_raw = to_rows(xp.max(tail, axis=-1))
    s_raw = to_rows(xp.sum(tail, axis=-1))
    top_raw = to_rows(top_raw)
    m, s = top_raw / total, s_raw / total
    trivial = s_raw == 0
    tied = second_raw >= top_raw
    closed = trivial | tied
    sigma_raw = sp.where(closed, sp.ones_like(m), second_raw)
    sigma = sp.where(closed, sp.ones_like(m), second_raw / total)
    q = _into(xp, "divide", tail, to_big(sigma_raw)[:, None], tail if module is not None else None)
    return _solve(xp, q, m, sigma, m * s / sigma, trivial, tied, work=work, own_q=True)


def _solve(
    xp: Any,
    q: Any,
    m: Any,
    sigma: Any,
    a: Any,
    trivial: Any,
    tied: Any,
    log_sigma: Any = None,
    work: dict[str, Any] | None = None,
    own_q: bool = False,
) -> Any:
    r"""The root from the scaled tail ``q`` (:math:`q_i/\sigma`, at most 1), :math:`\sigma`,
    :math:`a = ms/\sigma`; ``log_sigma`` (from logits) gives :math:`\lambda = \sigma(1 + y)`
    in log space where :math:`\sigma` is below the normal range (or underflowed to 0).
    ``work`` holds reusable buffers (:func:`_workspace`); ``own_q`` lets ``q`` be overwritten.
    The per-row values may come in either namespace of :func:`_row_namespace`."""
    big = xp
    xp, to_rows, to_big = _row_namespace(big, q)  # from here on xp holds the per-row values
    m, sigma, a, trivial, tied = (to_rows(x) for x in (m, sigma, a, trivial, tied))
    log_sigma = None if log_sigma is None else to_rows(log_sigma)
    u = xp.finfo(m.dtype).eps / 2
    closed = trivial | tied
    one = xp.ones_like(m)
    zero = xp.zeros_like(m)
    r = q.shape[0]
    # The poles q_i = 1 are handled in closed form. As 0 <= q_i <= 1, floor(q_i) is 1 at a pole
    # and 0 elsewhere: the count and the removal are exact float passes, with no boolean mask.
    at_pole = _floor(big, q, _take(work, "e", r))
    poles = to_rows(big.sum(at_pole, axis=-1))
    q = _into(big, "subtract", q, at_pole, q if own_q else None)
    e = _into(big, "subtract", 1.0, q, _take(work, "e", r))  # 1 - q_i: exact for q_i >= 1/2
    q2 = _into(big, "multiply", q, q, q if own_q else _take(work, "q", r))
    diff, term = _take(work, "diff", r), _take(work, "term", r)  # reused by every step
    top_gap = xp.where(closed, one, m - sigma)  # sigma * g
    # Top pole out of reach: always measure from the runner-up. The root's offset is below
    # tr(J)/sigma <= 2V < 2**41, so 2**41 stands in for the (possibly overflowing) pole offset.
    far = sigma < top_gap * 2.0**-40
    g = xp.where(far, 2 * one * 2.0**40, top_gap / xp.where(far, one, sigma))  # b - 1
    # First step at the midpoint tau = g/2 (the same point in both offsets) picks the origin.
    tau = xp.where(far, xp.maximum(a, one), g / 2)
    high = xp.zeros_like(closed)
    lo, hi = zero, xp.where(far, g, g / 2)
    # phi = f oriented to increase with the offset (phi = -f from the top pole): phi(lo) < 0 <
    # phi(hi). The pole end has phi = -inf; the far stand-in end is unknown (+inf).
    inf = xp.full_like(m, float("inf"))
    phi_lo, phi_hi = -inf, inf
    done = closed
    for iteration in range(SECULAR_MAX_ITERATIONS):
        y = xp.where(high, g - tau, tau)  # mu - 1 (g - tau >= g/2: one rounding)
        diff = _into(big, "add", e, to_big(y)[:, None], diff)  # mu - q_i = (1 - q_i) + (mu - 1) >= 0
        term = _into(big, "divide", q2, diff, term)  # q_i^2/(mu - q_i)
        rest = to_rows(big.sum(term, axis=-1))
        rest_slope = to_rows(big.sum(_into(big, "divide", term, diff, term), axis=-1))
        top_dist = xp.where(high, sigma * tau, top_gap - sigma * tau)  # m - lambda
        mu = 1 + y
        f = (mu - a) / top_dist - (rest + poles / y)
        if iteration == 0:
            high = ~far & ~closed & (f < 0)
            lo, hi = zero, xp.where(far, g, g / 2)
            phi_hi = xp.where(far, inf, xp.abs(f))
        else:
            phi = xp.where(high, -f, f)
            rising = phi < 0  # the root lies at a larger offset
            lo = xp.where(~done & rising, tau, lo)
            phi_lo = xp.where(~done & rising, phi, phi_lo)
            moved = ~done & ~rising & (f != 0)
            hi = xp.where(moved, tau, hi)
            phi_hi = xp.where(moved, phi, phi_hi)
        alpha = rest_slope * y * y
        beta = xp.maximum(rest - alpha / y, zero)
        c = poles + alpha
        qa = 1 + sigma * beta
        qb = 1 - a - top_gap * beta + sigma * c
        disc_y = xp.maximum(qb * qb + 4 * qa * top_gap * c, zero)
        root_y = xp.where(qb >= 0, 2 * top_gap * c / (qb + xp.sqrt(disc_y)), (xp.sqrt(disc_y) - qb) / (2 * qa))
        g_near = xp.where(far, one, g)  # the top-pole offset is unused (and may overflow) when far
        k = g_near * (g_near + 1 - a)
        mid = 2 * qa * g_near + qb
        disc_z = xp.maximum(mid * mid - 4 * qa * k, zero)
        root_z = 2 * k / (mid + xp.sqrt(disc_z))
        model = xp.where(high, root_z, root_y)
        finite = xp.isfinite(model)
        inside = finite & (model > lo) & (model < hi)
        # A model outside the bracket (its rounding near the root can put it an ulp beyond the
        # end where phi is tiny) falls back to the secant of the bracket ends, then bisection.
        known = xp.isfinite(phi_lo) & xp.isfinite(phi_hi)
        secant = hi - (hi - lo) * (xp.where(known, phi_hi, zero) / xp.where(known, phi_hi - phi_lo, one))
        secant_inside = known & xp.isfinite(secant) & (secant > lo) & (secant < hi)
        new = xp.where(inside, model, xp.where(secant_inside, secant, (lo + hi) / 2))
        small_model = finite & (xp.abs(model - tau) <= u * mu)
        small_secant = ~inside & secant_inside & (xp.abs(secant - tau) <= u * mu)
        small = small_model | small_secant
        converged = (f == 0) | small | (hi - lo <= 2 * u * mu)
        settled = xp.where(small & (f != 0), xp.where(small_model, model, secant), tau)
        tau = xp.where(done, tau, xp.where(converged & (iteration > 0), settled, new))
        done = done | (converged & (iteration > 0))
        if bool(xp.all(done)):
            break
    else:
        raise ArithmeticError("spectral_norm: the secular solver did not converge")
    low = sigma + sigma * tau
    if log_sigma is not None:
        tiny = sigma < xp.finfo(m.dtype).smallest_normal
        low = xp.where(tiny, xp.exp(xp.where(tiny, log_sigma, zero) + xp.log1p(tau)), low)
    lam = xp.where(high, m - sigma * tau, low)
    return to_big(xp.where(trivial, zero, xp.where(tied, m, lam)))


# --------------------------------------------------------------------------- the moment route

#: Smallest V for which probability rows take the moment route (:func:`_moment_roots`); smaller
#: rows are cheap, and the bracketing solver (:func:`_solve`) handles a block's rows at once.
MOMENT_ROUTE_MIN_V = 4096

#: The moment route takes a row only when its root is provably within this fraction of the gap
#: :math:`g = m - \sigma` from the top pole (:math:`Z \le m^2/T`, so :math:`m^2/(Tg)` bounds
#: :math:`Z/g`): there every tail term's series converges at least as fast as :math:`4^{-j}`.
MOMENT_REACH = 0.25

#: Entries per block of rows on the moment route: one row at V = 131,072, so the row and the
#: three buffers (4 MiB) stay in the 8 MiB L3 cache (two-row blocks measured 10% slower).
MOMENT_BLOCK_ENTRIES = 1 << 17

#: Tail moments taken at the first centre (the top pole) and at the second (the first model's
#: root); even counts (:func:`_tail_moments` takes them in pairs), at most the compiled kernel's
#: ``TOP_MOMENTS``. Six at the top pole: of the benchmark's 96 Dirichlet rows at V = 131,072 four
#: settled 8 and six settle 54 without the second centre (95 in the kernel, which adds the entries
#: nearest the pole exactly); the two more moments cost the kernel's pass nothing measurable (it
#: waits on the division) and the array route about what the second centre's pass saves.
FIRST_MOMENTS = 6
SECOND_MOMENTS = 2

#: The share of u (of T) the series' remainder may move the tail sum by (:func:`_series_is_exact`).
MOMENT_REMAINDER = 0.25

#: Newton steps allowed on a moment model (it converges quadratically, from an upper bound).
MODEL_NEWTON_STEPS = 12


#: Length of the pieces NumPy's dot products are cut into: OpenBLAS runs a dot product of more
#: than 10,000 entries on all its threads, and on a loaded machine a descheduled thread stalls it
#: (measured on two busy cores: 4 ms for one dot of 131,072 entries, against 0.05 ms in pieces).
DOT_PIECE = 8192


def _row_dots(module: Any, a: Any, b: Any) -> Any:
    """:math:`\\sum_i a_i b_i` for each row. On NumPy a batched BLAS dot over pieces of
    :data:`DOT_PIECE` entries (each on one thread), their sum, and the remainder; elsewhere ``einsum``."""
    if module is not np:
        return module.einsum("ij,ij->i", a, b)
    whole = a.shape[-1] // DOT_PIECE * DOT_PIECE
    out = np.empty(a.shape[0], dtype=np.result_type(a, b))
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        pieces = np.vecdot(x[:whole].reshape(-1, DOT_PIECE), y[:whole].reshape(-1, DOT_PIECE)).sum()
        out[i] = pieces + np.dot(x[whole:], y[whole:])
    return out


def _rows_and(module: Any, like: Any) -> Any:
    """``arange(rows)`` on ``like``'s device, for picking one entry per row."""
    if module.__name__ == "torch":
        return module.arange(like.shape[0], device=like.device)
    return module.arange(like.shape[0])


def _runner_up(module: Any, raw: Any, top_index: Any) -> Any:
    """:math:`\\sigma = \\max_{i \\ne k} r_i` of each row, the top entry k left out. On NumPy (and on
    PyTorch/CPU through its NumPy view) two slices per row: the row is read once and nothing is
    written. On a GPU the maximum of the row with its top entry masked (one kernel)."""
    if module is np:
        pairs = zip(raw, top_index.tolist(), strict=True)
        return np.array([max(row[:k].max(initial=0.0), row[k + 1 :].max(initial=0.0)) for row, k in pairs], raw.dtype)
    columns = _rows_and(module, raw.T)
    masked = module.where(columns[None, :] == top_index[:, None], module.zeros_like(raw[:, :1]), raw)
    return masked.max(-1).values if module.__name__ == "torch" else masked.max(axis=-1)


def _tail_moments(module: Any, raw: Any, top_index: Any, centre: Any, count: int, work: dict[str, Any]) -> list[Any]:
    r"""The moments :math:`M_j = \sum_{i \ne k} r_i^2/(c - r_i)^j`, j = 1..``count`` (even), of each
    row's tail about its centre c (a float above every tail entry), in 2 + 3·count/2 passes: the
    distances :math:`c - r_i` (the top's set to infinity, so its terms are exactly 0), their
    reciprocals :math:`w_i` in place, :math:`t = r \odot w`, :math:`M_1 = \langle t, r\rangle`,
    :math:`M_2 = \langle t, t\rangle`; then per further pair :math:`t' = t \odot w`,
    :math:`M_{2j+1} = \langle t, t'\rangle`, :math:`M_{2j+2} = \langle t', t'\rangle`."""
    r = raw.shape[0]
    d = work["diff"][:r, ...]
    module.subtract(centre[:, None], raw, out=d)
    d[_rows_and(module, raw), top_index] = float("inf")
    w = module.reciprocal(d, out=d)
    t = module.multiply(raw, w, out=work["term"][:r, ...])
    moments = [_row_dots(module, t, raw), _row_dots(module, t, t)]
    spare = work["e"][:r, ...]
    for _ in range(count // 2 - 1):
        following = module.multiply(t, w, out=spare)
        moments += [_row_dots(module, t, following), _row_dots(module, following, following)]
        t, spare = following, t
    return moments


def _model_root(
    sp: Any, active: Any, m2: Any, total: Any, z_centre: Any, moments: list[Any], start: Any
) -> tuple[Any, Any]:
    r"""The root Z of :math:`\phi(Z) = Z\,(T + P(Z - Z_c)) - m^2`, :math:`P(\varepsilon) = \sum_j
    M_{j+1}\varepsilon^j` the truncated series of the tail sum, by Newton from ``start``;
    ``(Z, converged)``. :math:`\phi` is increasing and convex on the rows' reach, so from an upper
    bound the steps descend monotonically onto the root."""
    u = sp.finfo(m2.dtype).eps / 2
    z = start
    converged = ~active
    for _ in range(MODEL_NEWTON_STEPS):
        e = z - z_centre
        value, slope = moments[-1], sp.zeros_like(z)
        for moment in moments[-2::-1]:  # Horner for P and P'
            slope = slope * e + value
            value = value * e + moment
        side = total + value
        step = (z * side - m2) / (side + z * slope)
        z = sp.where(converged, z, z - step)
        converged = converged | (sp.abs(step) <= 2 * u * z)  # rounding leaves steps of an ulp
        if bool(sp.all(converged)):
            break
    return z, converged & active


def _series_is_exact(sp: Any, z: Any, z_centre: Any, reach: Any, moments: list[Any], total: Any) -> Any:
    r"""Whether the K-term series moves the tail sum by at most u/4 of T at the root: with
    :math:`\varepsilon = Z - Z_c` and every tail distance at least ``reach``, the remainder is at
    most :math:`|\varepsilon|^K M_{K+1}/(1 - \varepsilon^+/\text{reach}) \le
    |\varepsilon|^K M_K/(\text{reach} - \varepsilon^+)`, as :math:`M_{K+1} \le M_K/\text{reach}`."""
    u = sp.finfo(z.dtype).eps / 2
    e = z - z_centre
    left = reach - sp.maximum(e, sp.zeros_like(e))
    remainder = sp.abs(e) ** len(moments) * moments[-1] / left
    return (left > 0) & sp.isfinite(remainder) & (remainder <= MOMENT_REMAINDER * u * total)


def _moment_roots(xp: Any, raw: Any, work: dict[str, Any], invalid: Callable[[], None]) -> Any:
    r"""Roots for raw probability rows at large V, from two evaluations of the tail; the input is
    checked on the way from the same passes (``invalid()`` raises when a row is not a probability row).

    In the row's own units (entries :math:`r`, total :math:`T`, top :math:`m = r_k`, runner-up
    :math:`\sigma`, gap :math:`g = m - \sigma`) the norm is :math:`(m - Z)/T`, where
    :math:`Z \in (0, g)` solves :math:`m^2/Z = T + \sum_{i \ne k} r_i^2/(m - Z - r_i)`: the secular
    equation with :math:`1 - s = m`, two positive sides, nothing cancels. Where
    :math:`m^2/(Tg) \le` :data:`MOMENT_REACH` (every row of a large Dirichlet batch), each tail term is
    a geometric series in the offset from a centre: the tail's moments at the top pole, then at that
    model's root, each give the root by one scalar Newton solve, and the next moment bounds what the
    series leaves out (:func:`_series_is_exact`). A row that misses the bound, or whose root is
    elsewhere, or whose runner-up is small enough for squares to underflow, goes to the bracketing
    solver (:func:`_from_probabilities`). ``xp`` is NumPy's, CuPy's or PyTorch's namespace (a
    PyTorch/CPU batch comes as its zero-copy NumPy view); ``work`` holds the buffers of a block."""
    V = raw.shape[-1]
    module = _module(xp)
    top_index = raw.argmax(-1)
    m = raw[_rows_and(module, raw), top_index]
    total = raw.sum(-1)
    low = raw.min(-1).values if module.__name__ == "torch" else raw.min(-1)
    u = xp.finfo(m.dtype).eps / 2
    if not bool(xp.all((low >= 0) & xp.isfinite(m) & (xp.abs(total - 1) <= normalization_tolerance(V, 2 * u)))):
        invalid()
    sigma = _runner_up(module, raw, top_index)
    zero = xp.zeros_like(m)
    trivial = sigma == 0
    tied = sigma >= m
    gap = xp.where(tied, xp.ones_like(m), m - sigma) * (1 - u)  # rounded down: a lower bound
    m2 = m * m
    # Below this runner-up a square may underflow: each such term moves a moment by less than the
    # smallest normal number, and V of them by less than u/16 of sigma^2.
    smallest_sigma = math.sqrt(16 * V * float(xp.finfo(m.dtype).smallest_normal) / u)
    take = ~trivial & ~tied & (sigma >= smallest_sigma) & (m2 <= MOMENT_REACH * total * gap)
    lam = xp.where(tied, m / total, zero)
    # Rows not taken (tied, peaked) may divide by zero here; their values are never used.
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if bool(xp.any(take)):
            first = _tail_moments(module, raw, top_index, m, FIRST_MOMENTS, work)
            z, converged = _model_root(xp, take, m2, total, zero, first, m2 / (total + first[0]))
            done = converged & _series_is_exact(xp, z, zero, gap, first, total)
            again = take & ~done
            if bool(xp.any(again)):
                centre = xp.where(again, m - z, m)
                z_centre = m - centre  # exact (Sterbenz): the centre lies within a quarter gap of m
                second = _tail_moments(module, raw, top_index, centre, SECOND_MOMENTS, work)
                reach = (centre - sigma) * (1 - u)
                z2, converged = _model_root(xp, again, m2, total, z_centre, second, z)
                settled = converged & _series_is_exact(xp, z2, z_centre, reach, second, total)
                z = xp.where(settled, z2, z)
                done = done | settled
            lam = xp.where(done, (m - z) / total, lam)
            take = done
    rest = ~(take | trivial | tied)
    if bool(xp.any(rest)):
        index = xp.nonzero(rest)[0]
        lam[index] = _from_probabilities(xp, xp.take(raw, index, axis=0), work)
    return lam


def _from_logits(xp: Any, rows: SoftmaxRows, b: slice) -> Any:
    r"""The root for rows built from logits: the scaled tail and :math:`s/\sigma = \sum_i
    e^{z_i - z_{(2)}}` come from the logits, so a tail whose probabilities underflow (a logit
    gap past ~745 in float64) still gives the (subnormal) norm instead of 0."""
    m, q, log_sigma = rows.top[b], rows.scaled_tail[b, ...], rows.log_sigma[b]
    second = xp.max(rows.tail[b, ...], axis=-1)
    s_over_sigma = xp.sum(q, axis=-1)
    trivial = s_over_sigma == 0
    tied = second >= m
    closed = trivial | tied
    sigma = xp.where(closed, xp.ones_like(m), second)
    return _solve(xp, q, m, sigma, m * s_over_sigma, trivial, tied, xp.where(closed, xp.zeros_like(m), log_sigma))


def _probability_input(p: Any) -> tuple[Any, Any, bool]:
    """``(xp, rows, single)`` for probability input, its dtype and shape checked (``single``: it was
    one row); its values are checked by the solver's own passes (the kernel, :func:`_moment_roots`)
    or by :func:`validated_probabilities`."""
    xp, rows = as_array(p, "p")
    check_real_floating(xp, rows, "p")
    check_rows(xp, rows, "p")
    return xp, rows if rows.ndim == 2 else xp.reshape(rows, (1, -1)), rows.ndim == 1


@functools.cache
def _compiled_kernel() -> Any:
    """The compiled secular solver (:mod:`rankwall.theory._secular_kernel`), or None where numba is
    not installed or cannot be used (an ImportError, e.g. a NumPy it does not support; a
    RuntimeError, e.g. no folder it may cache in): then every backend takes the array-API route."""
    try:
        from rankwall.theory import _secular_kernel
    except (ImportError, RuntimeError):
        return None
    return _secular_kernel


def _numpy_view(xp: Any, raw: Any) -> np.ndarray | None:
    """``raw`` as a float32/float64 NumPy array the kernel can read without a copy: a NumPy array
    itself, or a PyTorch/CPU tensor's zero-copy view; None for other backends (CuPy,
    array-api-strict, PyTorch on CUDA) and dtypes, which take the array-API route."""
    if array_api_compat.is_numpy_namespace(xp):
        view = raw
    elif _is_torch_cpu(xp, raw):
        view = raw.detach().numpy()
    else:
        return None
    return view if view.dtype in (np.float32, np.float64) else None


def _kernel_solve(kernel: Any, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(norms, routes)`` of C-contiguous float32/float64 raw probability rows from the compiled
    kernel, with this module's constants (read at each call); ``routes`` says per row what settled
    it (``kernel.CLOSED``, ``FIRST_MOMENTS``, ``SECOND_MOMENTS``, ``BRACKETING``) or that it was not
    accepted (``INVALID``: not finite, negative, or not within half of :func:`normalization_tolerance`
    of summing to one) or not solved (``UNCONVERGED``)."""
    F = rows.dtype.type
    V = rows.shape[-1]
    if max(FIRST_MOMENTS, SECOND_MOMENTS) > kernel.TOP_MOMENTS:
        raise ValueError(f"spectral_norm: the compiled kernel takes at most {kernel.TOP_MOMENTS} moments")
    u = float(np.finfo(F).eps) / 2
    smallest_sigma = math.sqrt(16 * V * float(np.finfo(F).smallest_normal) / u)
    return kernel.spectral_norms(
        rows,
        V >= MOMENT_ROUTE_MIN_V,
        (FIRST_MOMENTS, SECOND_MOMENTS),
        F(MOMENT_REACH),
        F(MOMENT_REMAINDER),
        F(smallest_sigma),
        F(normalization_tolerance(V, 2 * u) / 2),
        F(u),
        SECULAR_MAX_ITERATIONS,
        MODEL_NEWTON_STEPS,
        F,
    )


def _kernel_norms(kernel: Any, view: np.ndarray, p: Any, xp: Any) -> Any:
    """:func:`spectral_norm` of raw probability rows through the compiled kernel (the moment route at
    V >= :data:`MOMENT_ROUTE_MIN_V`, the bracketing solver for the rows it does not settle and at
    smaller V), returned in ``xp``'s namespace. The kernel accepts a row that is finite, non-negative
    and within half of :func:`normalization_tolerance` of summing to one (its own sum, in its own
    order); every other row is handed to :func:`validated_probabilities`, which raises its error for a
    bad row, and a row it accepts (one within rounding of the edge) is solved on the array-API route."""
    rows = np.ascontiguousarray(view)
    norms, routes = _kernel_solve(kernel, rows)
    unchecked = np.nonzero(routes == kernel.INVALID)[0]
    if unchecked.size:
        validated_probabilities(p, "p")
        numpy_xp = array_api_compat.array_namespace(rows)
        edge = rows[unchecked]
        norms[unchecked] = _from_probabilities(numpy_xp, edge, _workspace(numpy_xp, edge.shape[0], edge))
    if bool((routes == kernel.UNCONVERGED).any()):
        raise ArithmeticError("spectral_norm: the secular solver did not converge")
    if array_api_compat.is_torch_namespace(xp):
        import torch

        return torch.from_numpy(norms)
    return norms


def _array_api_norms(xp: Any, raw: Any, p: Any) -> list[Any]:
    """The norms of raw probability rows on the array-API route, block by block: the moment route at
    large V where the library takes ``out=``, the bracketing solver elsewhere."""
    moments = _module(xp) is not None and raw.shape[-1] >= MOMENT_ROUTE_MIN_V
    blocks = _row_blocks(raw.shape[0], raw.shape[-1], MOMENT_BLOCK_ENTRIES if moments else None)
    work = _workspace(xp, blocks[0].stop - blocks[0].start, raw)
    if moments:

        def invalid() -> None:
            validated_probabilities(p, "p")
            raise AssertionError("spectral_norm: the input check disagrees with validated_probabilities")

        if _is_torch_cpu(xp, raw):  # the same IEEE operations on the zero-copy NumPy view
            import torch

            view, numpy_work = raw.detach().numpy(), {k: v.numpy() for k, v in work.items()}
            numpy_xp = array_api_compat.array_namespace(view)
            norms = [torch.from_numpy(_moment_roots(numpy_xp, view[b], numpy_work, invalid)) for b in blocks]
        else:
            norms = [_moment_roots(xp, raw[b, ...], work, invalid) for b in blocks]
    else:
        xp, raw = validated_probabilities(p, "p")
        norms = [_from_probabilities(xp, raw[b, ...], work) for b in blocks]
    return norms


def spectral_norm(p: Any) -> Any:
    r""":math:`\lVert J(p) \rVert_2 = \lambda_{\max}(J)` per row, in :math:`O(V)` per
    iteration, never forming J. Ties at the top give exactly :math:`m`; a one-hot row gives 0.
    Probability rows on NumPy and PyTorch/CPU go through the compiled kernel where numba is
    installed (:mod:`rankwall.theory._secular_kernel`, a row at a time); every other input takes
    the array-API route, in blocks of rows. Either way memory stays bounded for any batch."""
    if not isinstance(p, SoftmaxRows):
        xp, raw, single = _probability_input(p)
        kernel = _compiled_kernel()
        view = _numpy_view(xp, raw) if kernel is not None else None
        if view is not None:
            result = _kernel_norms(kernel, view, p, xp)
            return result[0] if single else result
    with _solver_context(p.p if isinstance(p, SoftmaxRows) else p):
        if isinstance(p, SoftmaxRows):
            xp, single = p.xp, p.single
            blocks = _row_blocks(p.p.shape[0], p.p.shape[-1])
            if p.scaled_tail is not None:
                norms = [_from_logits(xp, p, b) for b in blocks]
            else:
                norms = [_largest_root(xp, p.tail[b, ...], p.top[b], p.complement[b]) for b in blocks]
        else:
            norms = _array_api_norms(xp, raw, p)
    result = norms[0] if len(norms) == 1 else xp.concat(norms)
    return result[0] if single else result


# --------------------------------------------------------------------------- constructors


def _emit(values: np.ndarray, xp: Any, dtype: Any, device: Any) -> Any:
    """Hand a float64 NumPy construction to the caller's namespace, dtype and device."""
    if xp is None:
        return values if dtype is None else values.astype(dtype)
    kwargs = {"device": device} if device is not None else {}
    return xp.asarray(values, dtype=dtype if dtype is not None else xp.float64, **kwargs)


def _vocabulary(V: Any, low: int = 2) -> int:
    return check_integer_in(V, "V", low, MAX_VOCABULARY)


def construct_runner_up(
    V: int, m: float, *, tail_mass: float = 0.0, xp: Any = None, dtype: Any = None, device: Any = None
) -> Any:
    """:math:`(m, 1 - m - \\tau, \\tau/(V-2), \\dots)`: with :math:`\\tau = 0` and
    :math:`m \\ge 1/2` the losing mass sits on one runner-up and
    :math:`\\lVert J \\rVert_2 = 2m(1-m)` exactly."""
    V = _vocabulary(V)
    m = check_real_in(m, "m", 0.5, 1.0)
    tail_mass = check_real_in(tail_mass, "tail_mass", 0.0, 1.0 - m)
    if tail_mass > 0 and V < 3:
        raise InputError("tail_mass: a positive tail needs V >= 3")
    p = np.zeros(V)
    p[0], p[1] = m, (1.0 - m) - tail_mass
    if tail_mass > 0:
        p[2:] = tail_mass / (V - 2)
    return _emit(p, xp, dtype, device)


def construct_tied_atoms(V: int, m: float, *, xp: Any = None, dtype: Any = None, device: Any = None) -> Any:
    """Two atoms tied at :math:`m \\le 1/2` and the rest spread evenly: ``||J|| = m`` exactly."""
    V = _vocabulary(V)
    m = check_real_in(m, "m", 0.0, 0.5)
    rest = 1.0 - 2.0 * m
    if rest > 0 and (V == 2 or rest / (V - 2) > m):
        raise InputError(f"m: {m} is too small for two tied top atoms at V={V} (need m >= 1/V)")
    p = np.zeros(V)
    p[:2] = m
    if rest > 0:
        p[2:] = rest / (V - 2)
    return _emit(p, xp, dtype, device)


def construct_spread_tail(V: int, m: float, *, xp: Any = None, dtype: Any = None, device: Any = None) -> Any:
    """:math:`(m, \\tfrac{1-m}{V-1}, \\dots)`: approaches the infimum :math:`m(1-m)` as V grows."""
    V = _vocabulary(V)
    m = check_real_in(m, "m", 1.0 / V, 1.0)
    p = np.full(V, (1.0 - m) / (V - 1))
    p[0] = m
    return _emit(p, xp, dtype, device)


def construct_uniform(V: int, *, xp: Any = None, dtype: Any = None, device: Any = None) -> Any:
    """The uniform row :math:`(1/V, \\dots, 1/V)`: ``||J|| = 1/V`` (all V entries tie)."""
    V = _vocabulary(V)
    return _emit(np.full(V, 1.0 / V), xp, dtype, device)


def construct_logits(
    V: int,
    gap: float,
    *,
    offset: float = 0.0,
    runners: int = 1,
    tail_gap: float | None = None,
    xp: Any = None,
    dtype: Any = None,
    device: Any = None,
) -> Any:
    """Logits with the winner ``gap`` above ``runners`` runner-up tokens and the rest
    ``tail_gap`` further below, all shifted by a common ``offset`` (which softmax ignores).

    Gaps up to ~800 give rows whose complement underflows a naive ``1 - max(p)``."""
    V = _vocabulary(V)
    gap = check_real_in(gap, "gap", 0.0, 1e4)
    runners = check_integer_in(runners, "runners", 1, V - 1)
    offset = check_real_in(offset, "offset", -1e12, 1e12)
    tail_gap = gap if tail_gap is None else check_real_in(tail_gap, "tail_gap", 0.0, 1e4)
    z = np.full(V, offset - gap - tail_gap)
    z[0] = offset + gap
    z[1 : 1 + runners] = offset
    return _emit(z, xp, dtype, device)


def construct_dirichlet(
    V: int, concentration: float, seed: int, *, xp: Any = None, dtype: Any = None, device: Any = None
) -> Any:
    """A Dirichlet(:math:`\\alpha`) row; small :math:`\\alpha` gives peaked rows with exact
    zeros (underflow), large :math:`\\alpha` near-uniform ones."""
    V = _vocabulary(V)
    concentration = check_real_in(concentration, "concentration", 1e-3, 1e6)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    g = rng.gamma(concentration, size=V)
    if g.sum() == 0:
        g[rng.integers(V)] = 1.0
    return _emit(g / g.sum(), xp, dtype, device)


def construct_sparse(V: int, support: int, seed: int, *, xp: Any = None, dtype: Any = None, device: Any = None) -> Any:
    """A row positive on ``support`` random positions and exactly zero elsewhere."""
    V = _vocabulary(V)
    support = check_integer_in(support, "support", 1, V)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    p = np.zeros(V)
    p[rng.choice(V, size=support, replace=False)] = rng.uniform(0.05, 1.0, size=support)
    return _emit(p / p.sum(), xp, dtype, device)


def construct_direction(
    V: int,
    seed: int,
    *,
    scale: float = 1.0,
    offset: float = 0.0,
    xp: Any = None,
    dtype: Any = None,
    device: Any = None,
) -> Any:
    """A test direction :math:`u = \\text{offset} + \\text{scale} \\cdot g`, g standard normal.
    A large common ``offset`` stresses the cancellation in :math:`E[u^2] - E[u]^2`."""
    V = _vocabulary(V)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    scale = check_real_in(scale, "scale", 0.0, 1e150)
    offset = check_real_in(offset, "offset", -1e150, 1e150)
    return _emit(offset + scale * rng.standard_normal(V), xp, dtype, device)
