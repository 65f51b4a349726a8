r"""Seed 002's exercise as a tool: watch one's own model's attention and LM head while it trains.

Attach a :class:`Monitor` to a PyTorch model; at the steps one chooses it records, for every head of
every attention layer,

- the median largest probability :math:`m = \max_j p_j` of its rows, the share of rows past 0.9 and the
  share whose argmax is the previous position;
- the *realised gain* :math:`\lVert g_z\rVert / \lVert g_p\rVert`, the norm of the gradient autograd
  delivers to the attention logits over the norm reaching the probabilities, beside the capacity
  :math:`2m(1 - m)` (seed 002: :math:`m(1-m) \le \lVert J\rVert_2 \le 2m(1-m)` for
  :math:`J = \operatorname{diag}(p) - pp^\top`), with the sums a log-log fit of gain on capacity needs;
- the largest row sum of :math:`g_z` relative to the row's 1-norm (:math:`J\mathbf 1 = 0`, so every
  row sums to zero in exact arithmetic);

and for the LM head (logits :math:`HW^\top`), from the gradient G reaching the logits: the share of its
norm destroyed in :math:`\ker W^\top` and the cosine of what survives (seed 000, Eq. 1,
:mod:`rankwall.theory.compression`), and a certified lower bound on the rank of G.

Every recorded row is checked against the theorems it must obey, with a margin from the rounding-error
model of the dtype the model ran in (:func:`rankwall.checks.engine.tolerance.softmax_gradient_error`): the
bounds :math:`m(1-m) \le \lVert J\rVert_2 \le 2m(1-m)` on the float64 row p of the recorded logits,
the realised gain :math:`\le \lVert J\rVert_2`, and the row sums zero within rounding. Each check counts
its rows as holding, violated (both sides certified beyond each other) or undecided (within rounding);
a violation means that something between the softmax and the loss is not what the theory assumes.

Records go to a JSON Lines file (one object per recorded step, :data:`SCHEMA`; ``docs/monitor.md``
gives the contract), to TensorBoard where ``tensorboard`` is installed, and are drawn by
``rankwall monitor report RUN.jsonl --out DIR``.

What the monitor sees: every ``torch.softmax`` / ``F.softmax`` / ``Tensor.softmax`` over the last
dimension of a 4-D (batch, heads, queries, keys) tensor that requires a gradient, found through a
``torch.overrides.TorchFunctionMode`` active only inside a recorded step. Hugging Face models do this
with ``attn_implementation="eager"``; a fused kernel (``scaled_dot_product_attention``, flash
attention) never forms the probabilities, and the record counts those calls instead. Nothing is
registered on the model outside a recorded step, no parameter, buffer or random state is touched, and
the hooks only read gradients, so training is bit-identical with and without the monitor.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rankwall.theory.validation import InputError

__all__ = [
    "DEFAULT_EVERY",
    "SCHEMA",
    "AttentionRows",
    "Monitor",
    "check_attention_rows",
    "fit_from_sums",
    "lm_head_record",
    "read_run",
]

#: The JSON Lines contract: every record carries ``"schema": SCHEMA``.
SCHEMA = "rankwall.monitor/1"
#: Record every this many steps by default (and step 0).
DEFAULT_EVERY = 50
#: Rows per head kept in each record for the report's scatter of gain against capacity.
DEFAULT_SAMPLE = 64
#: Confidence above which a row counts as committed (seed 002's "past 0.9").
CONFIDENT = 0.9
#: Keys of the sufficient statistics of a least-squares line y = a + b x (x = log 2m(1-m), y = log gain).
FIT_KEYS = ("n", "sum_x", "sum_y", "sum_xx", "sum_xy")
#: The three checks each recorded row goes through.
CHECKS = ("jacobian_bounds", "gain_within_norm", "row_sums_zero")
CERTIFIED_BY = {
    "jacobian_bounds": "two-sided (gamma_{V+8} float64 margins on both sides); rows with at most two atoms by "
    "structure (J = 0, or the two-atom lemma ||J|| = 2m(1-m)); rows within rounding re-decided exactly on the "
    "float64 row (exact_softmax.decide_norm_at_most)",
    "gain_within_norm": "two-sided (the model dtype's rounding bound on autograd's g_z, "
    "tolerance.softmax_gradient_error, plus float64 norms); one-atom rows by structure (J = 0)",
    "row_sums_zero": "within rounding (|sum g_z| against the 1-norm of softmax_gradient_error)",
}


# --------------------------------------------------------------------------- one layer's rows


@dataclass(frozen=True)
class AttentionRows:
    """Per-row quantities of attention rows (R rows of K keys) and the verdict of each check.

    ``m``, ``capacity`` (:math:`2m(1-m)`), ``norm_J`` and the bounds are of the float64 row p of the
    recorded logits; ``gain`` is :math:`\\lVert\\hat g_z\\rVert/\\lVert g_p\\rVert` of the model's own
    gradients (NaN where no gradient reached the row); ``row_sum`` is :math:`|\\sum_j \\hat g_{z,j}|`
    over the row's 1-norm (0 for a zero row); ``previous`` marks rows whose argmax is the key before the
    query, ``has_previous`` rows that have one. ``verdicts[check]`` holds +1 (holds), -1 (violated) or 0
    (undecided) per row, and ``closeness[check]`` the margin in units of its tolerance (inf where decided
    by structure)."""

    m: np.ndarray
    capacity: np.ndarray
    norm_J: np.ndarray
    gain: np.ndarray
    row_sum: np.ndarray
    previous: np.ndarray
    has_previous: np.ndarray
    verdicts: dict[str, np.ndarray]
    closeness: dict[str, np.ndarray]


def _shifted_logits(z: np.ndarray) -> np.ndarray:
    """:math:`z - \\max z` by rows in float64, masked entries (:math:`-\\infty`) set to -2000, whose
    exponential is exactly 0 in float64 as theirs is."""
    z = np.asarray(z, dtype=np.float64)
    top = np.max(np.where(np.isfinite(z), z, -np.inf), axis=-1, keepdims=True)
    x = z - top
    return np.where(np.isneginf(x), -2000.0, x)


def _decide(margin: np.ndarray, tol: np.ndarray, structure: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Verdicts (+1 holds: margin > tol; -1 violated: margin < -tol; else 0) and closeness margin/tol.
    Where ``structure`` says the exact sides are equal, a margin within tolerance holds (exactly)."""
    verdict = np.where(margin > tol, 1, np.where(margin < -tol, -1, 0))
    closeness = np.divide(margin, tol, out=np.full_like(margin, np.inf), where=tol > 0)
    if structure is not None:
        settled = structure & (verdict == 0)
        verdict = np.where(settled, 1, verdict)
        closeness = np.where(structure, np.inf, closeness)
    return verdict, closeness


#: Rows per layer and bound whose Jacobian bounds, left within rounding by the float64 margins, are re-decided on
#: the exact row (balls, rationals, the tie and two-atom lemmas); beyond it they stay undecided.
EXACT_ROWS = 16


def _exactly(p: np.ndarray, up: np.ndarray, up_close: np.ndarray, low: np.ndarray, low_close: np.ndarray) -> None:
    r"""Re-decide, in place, the bounds that the float margins left undecided, on the same float64 row
    read exactly (:func:`rankwall.checks.exact.softmax.decide_norm_at_most`): ``up`` is
    :math:`\lVert J\rVert_2 \le 2m(1-m)`, ``low`` is :math:`\lVert J\rVert_2 \ge m(1-m)`."""
    from fractions import Fraction

    from rankwall.checks.exact.softmax import Bound, ExactRow, decide_norm_at_most

    for verdicts, closeness, coefficient, holds in ((up, up_close, 2, (1, 0)), (low, low_close, 1, (-1, 0))):
        for i in np.flatnonzero(verdicts == 0)[:EXACT_ROWS]:
            outcome, _ = decide_norm_at_most(ExactRow.from_probabilities(p[i]), Bound("ms", Fraction(coefficient)))
            if outcome is not None:
                verdicts[i] = 1 if outcome in holds else -1
                closeness[i] = np.inf


def check_attention_rows(
    scores: Any,
    probabilities: Any,
    grad_probabilities: Any,
    grad_scores: Any,
    position: Any,
    u_model: float,
    tiny_model: float,
) -> AttentionRows:
    r"""Measure and check R attention rows: the softmax's input ``scores`` and output ``probabilities``
    (R x K, in the model's dtype of unit roundoff ``u_model`` and smallest normal number ``tiny_model``),
    the gradients autograd delivered to each, and each row's own position among the keys ``position``
    (its previous key is one before).

    The Jacobian bounds are stated for the float64 softmax p of the recorded scores, read exactly and
    normalised (it differs from the exact softmax of the scores by a relative :math:`u|x_i| + \gamma`
    per entry, :func:`rankwall.checks.engine.tolerance.softmax_relative_error`), decided by float64 margins and,
    within them, exactly. The gain and the row sums are the model's own gradients, against J(p) with the
    model dtype's rounding bound on autograd's arithmetic."""
    from rankwall.checks.engine import tolerance
    from rankwall.theory import softmax_jacobian as sj

    x = _shifted_logits(scores)
    e = np.exp(x)
    p = e / e.sum(axis=-1, keepdims=True)
    rows = sj.probability_rows(p)
    m, s = np.asarray(rows.top), np.asarray(rows.complement)
    norm_J = np.asarray(sj.spectral_norm(p))
    K, u64 = p.shape[-1], tolerance.unit_roundoff(np.float64)
    support = np.sum(p > 0, axis=-1)
    lower, upper = m * s, 2 * m * s
    tol_J = tolerance.spectral_norm_tolerance(K, u64, norm_J) + tolerance.spectral_norm_tolerance(K, u64, upper)
    up, up_close = _decide(upper - norm_J, tol_J, support <= 2)
    low, low_close = _decide(norm_J - lower, tol_J, support <= 1)
    _exactly(p, up, up_close, low, low_close)
    g = np.asarray(grad_probabilities, dtype=np.float64)
    g_z = np.asarray(grad_scores, dtype=np.float64)
    error = tolerance.softmax_gradient_error(p, np.where(p > 0, x, 0.0), g, u_model, tiny_model)
    incoming, outgoing = np.linalg.norm(g, axis=-1), np.linalg.norm(g_z, axis=-1)
    norms = tolerance.gamma(K + 2, u64) * (outgoing + norm_J * incoming)
    tol_gain = np.linalg.norm(error, axis=-1) + norms + tolerance.spectral_norm_tolerance(K, u64, norm_J) * incoming
    gain_verdict, gain_close = _decide(norm_J * incoming - outgoing, tol_gain, support <= 1)
    has_gradient = incoming > 0
    gain_verdict = np.where(has_gradient, gain_verdict, 1)
    one_norm = np.sum(np.abs(g_z), axis=-1)
    total = np.abs(np.sum(g_z, axis=-1))
    tol_sum = np.sum(error, axis=-1) + tolerance.gamma(K, u64) * one_norm
    sum_verdict = np.where(total <= tol_sum, 1, -1)
    sum_close = np.divide(tol_sum - total, tol_sum, out=np.full_like(total, np.inf), where=tol_sum > 0)
    previous_key = np.asarray(position) - 1
    return AttentionRows(
        m=m,
        capacity=upper,
        norm_J=norm_J,
        gain=np.divide(outgoing, incoming, out=np.full_like(outgoing, np.nan), where=has_gradient),
        row_sum=np.divide(total, one_norm, out=np.zeros_like(total), where=one_norm > 0),
        previous=(np.argmax(p, axis=-1) == previous_key) & (previous_key >= 0),
        has_previous=previous_key >= 0,
        verdicts={
            "jacobian_bounds": np.minimum(up, low),
            "gain_within_norm": gain_verdict,
            "row_sums_zero": sum_verdict,
        },
        closeness={
            "jacobian_bounds": np.minimum(up_close, low_close),
            "gain_within_norm": np.where(has_gradient, gain_close, np.inf),
            "row_sums_zero": sum_close,
        },
    )


# --------------------------------------------------------------------------- summaries


def _fit_sums(capacity: np.ndarray, gain: np.ndarray) -> dict[str, float]:
    """Sufficient statistics of the least-squares line log gain = a + b log capacity over the rows
    where both are positive (sums add across heads and steps, so any pooled fit is exact)."""
    usable = (capacity > 0) & (gain > 0) & np.isfinite(gain)
    x, y = np.log(capacity[usable]), np.log(gain[usable])
    return {
        "n": int(usable.sum()),
        "sum_x": float(x.sum()),
        "sum_y": float(y.sum()),
        "sum_xx": float(x @ x),
        "sum_xy": float(x @ y),
    }


def fit_from_sums(sums: Iterable[dict[str, float]]) -> dict[str, float | int | None]:
    """The pooled least-squares fit gain ≈ constant · (2m(1 − m))^slope from summed statistics
    (:func:`_fit_sums` of any set of heads and steps): slope, constant and the number of rows."""
    total = dict.fromkeys(FIT_KEYS, 0.0)
    for part in sums:
        for key in FIT_KEYS:
            total[key] += part[key]
    n = total["n"]
    spread = n * total["sum_xx"] - total["sum_x"] ** 2
    if n < 2 or spread <= 0:
        return {"rows": int(n), "slope": None, "constant": None}
    slope = (n * total["sum_xy"] - total["sum_x"] * total["sum_y"]) / spread
    intercept = (total["sum_y"] - slope * total["sum_x"]) / n
    return {"rows": int(n), "slope": float(slope), "constant": float(math.exp(intercept))}


def _median(values: np.ndarray) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else None


def _check_counts(verdicts: np.ndarray, closeness: np.ndarray) -> dict[str, Any]:
    decided = np.isfinite(closeness) & (verdicts == 1)
    return {
        "rows": int(verdicts.size),
        "holds": int(np.sum(verdicts == 1)),
        "violated": int(np.sum(verdicts == -1)),
        "undecided": int(np.sum(verdicts == 0)),
        "closest_margin_in_tolerances": float(closeness[decided].min()) if decided.any() else None,
    }


def _merge_counts(parts: list[dict[str, Any]], check: str) -> dict[str, Any]:
    close = [c["closest_margin_in_tolerances"] for c in parts if c["closest_margin_in_tolerances"] is not None]
    merged = {key: sum(c[key] for c in parts) for key in ("rows", "holds", "violated", "undecided")}
    return {
        **merged,
        "closest_margin_in_tolerances": min(close) if close else None,
        "certified_by": CERTIFIED_BY[check],
    }


def _head_record(rows: AttentionRows, keep: slice, sample: int, rng: np.random.Generator) -> dict[str, Any]:
    """Seed 002's per-head numbers over the rows ``keep`` of ``rows`` (one head's)."""
    m, gain, capacity = rows.m[keep], rows.gain[keep], rows.capacity[keep]
    has_prev = rows.has_previous[keep]
    median_m = _median(m)
    chosen = rng.permutation(np.flatnonzero(np.isfinite(gain) & (gain > 0) & (capacity > 0)))[:sample]
    return {
        "rows": int(m.size),
        "median_m": median_m,
        "median_gain": _median(gain),
        "median_capacity": _median(capacity),
        "capacity_at_median_m": None if median_m is None else 2 * median_m * (1 - median_m),
        "share_m_above_0.9": float(np.mean(m > CONFIDENT)) if m.size else None,
        "previous_token_share": float(np.mean(rows.previous[keep][has_prev])) if has_prev.any() else None,
        "row_sum_relative_max": float(rows.row_sum[keep].max()) if m.size else None,
        "row_sum_relative_median": _median(rows.row_sum[keep]),
        "fit": _fit_sums(capacity, gain),
        "sample": {
            "capacity": [float(f"{v:.6g}") for v in capacity[np.sort(chosen)]],
            "gain": [float(f"{v:.6g}") for v in gain[np.sort(chosen)]],
        },
        "checks": {c: _check_counts(rows.verdicts[c][keep], rows.closeness[c][keep]) for c in CHECKS},
    }


# --------------------------------------------------------------------------- the LM head


def _column_basis(W: np.ndarray) -> tuple[np.ndarray, int]:
    """An orthonormal basis of col W (V x D) and its numerical rank, through
    :func:`rankwall.theory.compression.column_basis`; for D > V through W = Rᵀ Q'ᵀ (a QR of Wᵀ), whose
    V x V factor Rᵀ has the same column space."""
    from rankwall.theory import compression as cp

    V, D = W.shape
    if D <= V:
        return cp.column_basis(W)
    return cp.column_basis(np.linalg.qr(W.T, mode="r").T)


def lm_head_record(G: Any, W: Any) -> dict[str, Any]:
    """Eq. 1 for the logit gradient G (tokens x V, read exactly in float64) through the head W (V x D):
    the destroyed share and the cosine of what survives (:func:`rankwall.theory.compression.compression`),
    and the rank of the recorded G certified from below (:func:`rankwall.checks.exact.gram_rank_lower_bound`)
    and at most min(tokens, V). (The exact cross-entropy gradient's rows sum to zero, so its rank is at
    most V - 1; the rounding of a float32 G can add one.)"""
    from rankwall.checks import exact
    from rankwall.theory import compression as cp

    G = np.asarray(G, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    nonzero = G[np.any(G != 0, axis=1)]
    Q, rank_W = _column_basis(W)
    record: dict[str, Any] = {
        "V": int(W.shape[0]),
        "D": int(W.shape[1]),
        "rank_W": int(rank_W),
        "tokens": int(G.shape[0]),
    }
    if nonzero.size == 0:
        return {**record, "destroyed": None, "cosine": None, "gradient_rank_lower": 0}
    shares = cp.compression([nonzero], Q).to_json()
    lower, margin, _ = exact.gram_rank_lower_bound(nonzero)
    return {
        **record,
        "destroyed": shares["destroyed_frequency_weighted"],
        "cosine": shares["cosine_frequency_weighted"],
        "destroyed_squared": shares["destroyed_squared_norm"],
        "destroyed_per_token": shares["destroyed_per_token_mean"],
        "cosine_per_token": shares["cosine_per_token_mean"],
        "pythagoras_residual": shares["pythagoras_residual"],
        "gradient_rank_lower": int(lower),
        "gradient_rank_upper": int(min(nonzero.shape)),
        "gradient_rank_margin": float(margin),
    }


# --------------------------------------------------------------------------- capture


@dataclass
class _Softmax:
    """One attention softmax seen in a recorded step, and the gradients that later reach it."""

    module: str
    scores: Any
    probabilities: Any
    grad_probabilities: Any = None
    grad_scores: Any = None


@dataclass
class _Captured:
    softmaxes: list[_Softmax] = field(default_factory=list)
    logits_grads: list[Any] = field(default_factory=list)
    fused_calls: int = 0


def _is_attention_softmax(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    x = args[0] if args else kwargs.get("input")
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    return getattr(x, "ndim", 0) == 4 and dim in (-1, 3) and bool(x.requires_grad)


def _capture_mode(captured: _Captured, names: list[str]) -> Any:
    """A ``TorchFunctionMode`` that records each attention softmax (input, output, and hooks that read
    their gradients) and counts fused attention calls. It calls every function unchanged."""
    import torch
    from torch.overrides import TorchFunctionMode

    softmaxes = {torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax, torch.special.softmax}
    fused = {torch.nn.functional.scaled_dot_product_attention}

    class Capture(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func in softmaxes and _is_attention_softmax(args, kwargs) and out.requires_grad:
                scores = args[0] if args else kwargs["input"]
                seen = _Softmax(names[-1] if names else "", scores.detach(), out.detach())
                scores.register_hook(lambda grad: setattr(seen, "grad_scores", grad.detach()))
                out.register_hook(lambda grad: setattr(seen, "grad_probabilities", grad.detach()))
                captured.softmaxes.append(seen)
            elif func in fused:
                captured.fused_calls += 1
            return out

    return Capture()


def _find_lm_head(model: Any, lm_head: Any) -> Any:
    """The module whose output is the logits: ``lm_head`` itself, or with ``"auto"`` a Hugging Face
    model's output embeddings, else a child named ``lm_head`` or ``head`` (None: no LM-head record)."""
    from torch import nn

    if lm_head is None or isinstance(lm_head, nn.Module):
        return lm_head
    if lm_head != "auto":
        raise InputError(f"lm_head: expected a module of the model, 'auto' or None, got {lm_head!r}")
    getter = getattr(model, "get_output_embeddings", None)
    found = getter() if callable(getter) else None
    for name in ("lm_head", "head"):
        found = found if found is not None else getattr(model, name, None)
    return found if isinstance(found, nn.Module) and hasattr(found, "weight") else None


# --------------------------------------------------------------------------- the monitor


class StepLog:
    """What a recorded step may add: ``log(loss=...)`` puts scalars into its record."""

    def __init__(self, recording: bool) -> None:
        self.recording = recording
        self.scalars: dict[str, float] = {}

    def log(self, **scalars: Any) -> None:
        """Scalars (a loss, a learning rate) for this step's record (kept only when it records)."""
        self.scalars.update({k: float(v) for k, v in scalars.items()})


class Monitor:
    """Record seed 002's attention quantities and Eq. 1 of the LM head while a model trains.

    ::

        with Monitor(model, every=40, path="run.jsonl") as monitor:
            for step in range(steps):
                with monitor.step(step) as log:
                    loss = loss_fn(model(x), y)
                    loss.backward()
                    log.log(loss=loss.item())
                optimizer.step()
                optimizer.zero_grad()

    ``every``: record at steps divisible by it (``steps``: an explicit set of steps instead);
    ``path``: the JSON Lines file (appended to; None keeps the records in :attr:`records` only);
    ``tensorboard``: a log folder for TensorBoard scalars (needs ``tensorboard``); ``lm_head``: the
    module that produces the logits (``"auto"``: found by name, None: skip); ``sample``: rows per head
    kept for the report's scatter; ``max_rows``: at most this many rows per head measured (drawn with
    ``seed``; None: all). A step that does not record runs the model untouched."""

    def __init__(
        self,
        model: Any,
        *,
        every: int = DEFAULT_EVERY,
        steps: Iterable[int] | None = None,
        path: str | Path | None = None,
        tensorboard: str | Path | None = None,
        lm_head: Any = "auto",
        sample: int = DEFAULT_SAMPLE,
        max_rows: int | None = None,
        seed: int = 0,
    ) -> None:
        from torch import nn

        if not isinstance(model, nn.Module):
            raise InputError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        for name, value, low in (("every", every, 1), ("sample", sample, 0), ("seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(f"{name}: {value!r} is out of range (need an integer >= {low})")
        if max_rows is not None and (not isinstance(max_rows, int) or max_rows < 1):
            raise InputError(f"max_rows: {max_rows!r} is out of range (need an integer >= 1 or None)")
        self.model, self.every, self.sample, self.max_rows, self.seed = model, every, sample, max_rows, seed
        self.steps = None if steps is None else frozenset(int(s) for s in steps)
        self.path = None if path is None else Path(path)
        self.tensorboard = tensorboard
        self.lm_head = _find_lm_head(model, lm_head)
        self.records: list[dict[str, Any]] = []
        self._writer: Any = None
        self._attached = False

    # -- attaching

    def attach(self) -> Monitor:
        """Open the outputs (the JSONL file, TensorBoard); the model itself is not touched."""
        if self.path is not None:
            from rankwall.checks.run.outputs import writable_folder

            writable_folder(self.path.parent if str(self.path.parent) else ".", "path")
            if self.path.is_dir():
                raise InputError(f"path: {self.path} is a folder, where the JSON Lines file is to be written")
        if self.tensorboard is not None:
            self._writer = _summary_writer(self.tensorboard)
        self._attached = True
        return self

    def detach(self) -> None:
        """Close the outputs. Every hook a recorded step registered is already gone."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._attached = False

    def __enter__(self) -> Monitor:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    # -- recording

    def records_step(self, step: int) -> bool:
        """Whether step ``step`` is recorded."""
        return step in self.steps if self.steps is not None else step % self.every == 0

    @property
    def violations(self) -> int:
        """Rows violated so far, over every check and record (expected: 0)."""
        return sum(r["violations"] for r in self.records)

    @contextlib.contextmanager
    def step(self, step: int) -> Iterator[StepLog]:
        """Around one step's forward and backward passes: when the step is recorded, watch the
        attention softmaxes and the logits, and after the block turn what reached them into a record."""
        if not self._attached:
            raise InputError("monitor: not attached (use `with Monitor(model) as monitor:` or monitor.attach())")
        log = StepLog(self.records_step(step))
        if not log.recording:
            yield log
            return
        captured = _Captured()
        with self._watching(captured):
            yield log
        self._emit(self._record(step, captured, log.scalars))

    @contextlib.contextmanager
    def _watching(self, captured: _Captured) -> Iterator[None]:
        names: list[str] = []
        handles = []

        def leave(module: Any, inputs: Any, output: Any) -> None:
            names.pop()  # a forward hook must return None, or it would replace the output

        for name, module in self.model.named_modules():
            handles.append(module.register_forward_pre_hook(lambda m, a, name=name: names.append(name)))
            handles.append(module.register_forward_hook(leave))
        if self.lm_head is not None:
            handles.append(self.lm_head.register_forward_hook(lambda m, a, out: _hook_logits(out, captured)))
        try:
            with _capture_mode(captured, names):
                yield
        finally:
            for handle in handles:
                handle.remove()

    def _record(self, step: int, captured: _Captured, scalars: dict[str, float]) -> dict[str, Any]:
        started = time.perf_counter()
        rng = np.random.default_rng([self.seed, step])
        heads, dtypes = self._attention(captured, rng)
        checks = {c: _merge_counts([h["checks"][c] for h in heads], c) for c in CHECKS}
        lm = None
        if captured.logits_grads and self.lm_head is not None:
            G = np.concatenate([_exact_numpy(g.reshape(-1, g.shape[-1])) for g in captured.logits_grads])
            lm = {
                "module": _module_name(self.model, self.lm_head),
                **lm_head_record(G, _exact_numpy(self.lm_head.weight)),
            }
        return {
            "schema": SCHEMA,
            "step": step,
            "scalars": scalars,
            "dtypes": sorted(dtypes),
            "attention": {
                "heads": heads,
                "rows": sum(h["rows"] for h in heads),
                "fused_attention_calls": captured.fused_calls,
                "fit": fit_from_sums(h["fit"] for h in heads),
            },
            "lm_head": lm,
            "checks": checks,
            "violations": sum(c["violated"] for c in checks.values()),
            "undecided": sum(c["undecided"] for c in checks.values()),
            "seconds": time.perf_counter() - started,
        }

    def _attention(self, captured: _Captured, rng: np.random.Generator) -> tuple[list[dict[str, Any]], set[str]]:
        """Per-head records of every attention layer seen, in the order of the forward pass (a module
        that ran in several forward passes of the step pools its rows); each layer's rows are checked
        in one call."""
        import torch

        layers: dict[str, list[_Softmax]] = {}
        for seen in captured.softmaxes:
            if seen.grad_probabilities is not None and seen.grad_scores is not None:
                layers.setdefault(seen.module, []).append(seen)
        heads, dtypes = [], set()
        for index, (module, calls) in enumerate(layers.items()):
            dtype = calls[0].probabilities.dtype
            dtypes.add(str(dtype).removeprefix("torch."))
            finfo = torch.finfo(dtype)
            arrays = [_rows_by_head(call) for call in calls]
            kept = [self._kept(a[0].shape[1], rng) for a in arrays]
            stacked = [
                np.concatenate([a[k][:, keep] for a, keep in zip(arrays, kept, strict=True)], axis=1) for k in range(5)
            ]
            count, per_head = stacked[0].shape[:2]
            flat = [a.reshape(count * per_head, *a.shape[2:]) for a in stacked]
            rows = check_attention_rows(*flat, finfo.eps / 2, finfo.tiny)
            for head in range(count):
                part = slice(head * per_head, (head + 1) * per_head)
                record = _head_record(rows, part, self.sample, rng)
                heads.append({"layer": index, "module": module, "head": head, **record})
        return heads, dtypes

    def _kept(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """The rows measured of ``rows`` (all, or ``max_rows`` of them drawn with the monitor's seed)."""
        if self.max_rows is None or rows <= self.max_rows:
            return np.arange(rows)
        return np.sort(rng.choice(rows, self.max_rows, replace=False))

    def _emit(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if self.path is not None:
            with self.path.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
        if self._writer is not None:
            _write_scalars(self._writer, record)


def _rows_by_head(seen: _Softmax) -> list[np.ndarray]:
    """``(scores, probabilities, grad_p, grad_z, position)`` of one softmax as (heads, rows, keys) float
    arrays (the values read exactly: a half-precision tensor is widened to float32) and each row's own
    position among the keys (query q of Q sits at key q + K - Q: with a cache the keys come first)."""
    B, H, Q, K = seen.scores.shape
    arrays = [
        _exact_numpy(t.permute(1, 0, 2, 3).reshape(H, B * Q, K))
        for t in (seen.scores, seen.probabilities, seen.grad_probabilities, seen.grad_scores)
    ]
    position = np.broadcast_to(np.tile(np.arange(Q) + K - Q, B), (H, B * Q))
    return [*arrays, position]


def _exact_numpy(t: Any) -> np.ndarray:
    """A CPU NumPy copy of a tensor's values, exactly (float16 and bfloat16 widened to float32)."""
    import torch

    t = t.detach().cpu()
    return (t if t.dtype in (torch.float32, torch.float64) else t.float()).numpy()


def _hook_logits(out: Any, captured: _Captured) -> None:
    logits = out[0] if isinstance(out, tuple) else out
    if getattr(logits, "requires_grad", False):
        logits.register_hook(lambda grad: captured.logits_grads.append(grad.detach()))


def _module_name(model: Any, module: Any) -> str:
    return next((name for name, m in model.named_modules() if m is module), type(module).__name__)


def _summary_writer(folder: str | Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise InputError("tensorboard: the tensorboard package is not installed (pip install tensorboard)") from None
    return SummaryWriter(log_dir=str(folder))


def _write_scalars(writer: Any, record: dict[str, Any]) -> None:
    """TensorBoard scalars of one record: per head m, gain, capacity, previous-token share; the LM head's
    destroyed share and cosine; the pooled fit; and the violation count."""
    step = record["step"]
    for head in record["attention"]["heads"]:
        tag = f"attention/layer{head['layer']}.head{head['head']}"
        for key in ("median_m", "median_gain", "capacity_at_median_m", "previous_token_share"):
            if head[key] is not None:
                writer.add_scalar(f"{tag}/{key}", head[key], step)
    for key, value in record["scalars"].items():
        writer.add_scalar(f"scalars/{key}", value, step)
    if record["lm_head"] is not None and record["lm_head"]["destroyed"] is not None:
        writer.add_scalar("lm_head/destroyed", record["lm_head"]["destroyed"], step)
        writer.add_scalar("lm_head/cosine", record["lm_head"]["cosine"], step)
    fit = record["attention"]["fit"]
    if fit["slope"] is not None:
        writer.add_scalar("attention/fit_slope", fit["slope"], step)
    writer.add_scalar("checks/violations", record["violations"], step)
    writer.flush()


# --------------------------------------------------------------------------- reading a run


def read_run(path: str | Path, argument: str = "RUN") -> list[dict[str, Any]]:
    """The records of a JSON Lines run, in order; a line that is not a record of :data:`SCHEMA` is an
    :class:`InputError` naming the file and the line."""
    from rankwall.checks.companion.data import read_text_file

    records = []
    for number, line in enumerate(read_text_file(path, argument).splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{argument}: {path} line {number} is not JSON ({error.msg})") from None
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            raise InputError(f"{argument}: {path} line {number} is not a {SCHEMA} record")
        records.append(record)
    if not records:
        raise InputError(f"{argument}: {path} holds no record")
    return records
