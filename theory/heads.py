r"""Output heads beyond softmax (seed 001; seed 000 §2.3, Eq. 10).

Each head maps a hidden state :math:`h \in \mathbb R^d` to log-probabilities over V tokens through
a shared embedding matrix :math:`W \in \mathbb R^{V \times d}`:

- *softmax*: :math:`\log\operatorname{softmax}(Wh)`;
- *mixture of softmaxes* (MoS, Yang et al. 2018): K latent states
  :math:`h_k = \tanh(P_k h)` and priors :math:`\pi = \operatorname{softmax}(Uh)`, mixed *after* the
  softmax, in log space: :math:`\log\sum_k \exp(\log\pi_k + \log\operatorname{softmax}(Wh_k))`
  (no :math:`+10^{-8}` clamp: the log-sum-exp never takes the log of a rounded zero);
- *mixture of contexts* (MoC): the same latents averaged *before* the softmax,
  :math:`\log\operatorname{softmax}(W\sum_k \pi_k h_k)`;
- *sigsoftmax* (Kanai et al. 2018): :math:`p \propto e^{z}\sigma(z)`, evaluated as
  :math:`z + \log\sigma(z) - \operatorname{lse}(z + \log\sigma(z))` with a stable
  :math:`\log\sigma`;
- *monotone piecewise linear*: :math:`p \propto \varepsilon + \max(z, 0)`.

Results. Over N contexts, the log-probability matrix of softmax and MoC is
:math:`HW^\top - z\mathbf 1^\top` (H the effective hidden states), of rank at most d + 1; MoS,
sigsoftmax and the piecewise-linear head apply a nonlinearity after the logits and reach far higher
rank. Yet for every head the Jacobian of the log-probabilities with respect to h is V x d, of rank
at most d: whatever the head, the gradient that reaches the backbone is d-dimensional (Eq. 10).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np

from rankwall.theory._softmax import log_softmax as log_softmax  # the shared one, under its old name
from rankwall.theory._softmax import log_softmax_rows
from rankwall.theory.validation import InputError, as_array, check_integer_in, check_real_floating, check_real_in

HEADS = ("softmax", "mos", "moc", "sigsoftmax", "piecewise-linear")

#: The floor of the piecewise-linear head (keeps every probability positive).
PIECEWISE_FLOOR = 1e-3


@dataclass(frozen=True)
class HeadParameters:
    """W (V x d), latent projections P (K x d x d), prior weights U (K x d)."""

    W: Any
    P: Any
    U: Any

    @property
    def d(self) -> int:
        return self.W.shape[1]


def construct_head_parameters(V: int, d: int, K: int, seed: int, *, scale: float = 1.0) -> HeadParameters:
    """Gaussian parameters (NumPy float64), scaled so logits are O(scale)."""
    V = check_integer_in(V, "V", 2, 1 << 22)
    d = check_integer_in(d, "d", 1, 4096)
    K = check_integer_in(K, "K", 1, 256)
    scale = check_real_in(scale, "scale", 0.0, 1e6)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    W = scale * rng.standard_normal((V, d)) / np.sqrt(d)
    P = 2 * rng.standard_normal((K, d, d)) / np.sqrt(d)
    U = 2 * rng.standard_normal((K, d)) / np.sqrt(d)
    return HeadParameters(W, P, U)


def _lse(xp: Any, x: Any, axis: int) -> Any:
    top = xp.max(x, axis=axis, keepdims=True)
    return top + xp.log(xp.sum(xp.exp(x - top), axis=axis, keepdims=True))


def _log_sigmoid(xp: Any, z: Any) -> Any:
    """:math:`\\log\\sigma(z) = -(\\max(-z, 0) + \\log(1 + e^{-|z|}))`, stable for every z."""
    return -(xp.maximum(-z, xp.zeros_like(z)) + xp.log1p(xp.exp(-xp.abs(z))))


def _hidden(h: Any) -> tuple[Any, Any]:
    """``(xp, h)`` for hidden states of a real floating dtype (an integer h would cast W to integers)."""
    xp, h = as_array(h, "h")
    check_real_floating(xp, h, "h")
    return xp, h


def latents(theta: HeadParameters, h: Any) -> tuple[Any, Any]:
    """``(h_k, log pi)``: latent states (..., K, d) and log priors (..., K) for hidden states (..., d)."""
    xp, h = _hidden(h)
    P = xp.asarray(theta.P, dtype=h.dtype, device=array_api_compat.device(h))
    U = xp.asarray(theta.U, dtype=h.dtype, device=array_api_compat.device(h))
    hk = xp.tanh(xp.sum(P * h[..., None, None, :], axis=-1))
    return hk, log_softmax_rows(xp, xp.sum(U * h[..., None, :], axis=-1))


def log_probabilities(head: str, theta: HeadParameters, h: Any) -> Any:
    """Log-probabilities (..., V) of a head for hidden states h (..., d), in h's namespace."""
    if head not in HEADS:
        raise InputError(f"head: unknown head {head!r} (choose from {', '.join(HEADS)})")
    xp, h = _hidden(h)
    if h.shape[-1] != theta.d:
        raise InputError(f"h: hidden size {h.shape[-1]} differs from W's {theta.d}")
    W = xp.asarray(theta.W, dtype=h.dtype, device=array_api_compat.device(h))
    if head in ("softmax", "sigsoftmax", "piecewise-linear"):
        z = xp.sum(W * h[..., None, :], axis=-1)
        if head == "softmax":
            return log_softmax_rows(xp, z)
        if head == "sigsoftmax":
            return log_softmax_rows(xp, z + _log_sigmoid(xp, z))
        weights = PIECEWISE_FLOOR + xp.maximum(z, xp.zeros_like(z))
        return xp.log(weights) - xp.log(xp.sum(weights, axis=-1, keepdims=True))
    hk, log_pi = latents(theta, h)
    if head == "moc":
        mixed = xp.sum(xp.exp(log_pi)[..., None] * hk, axis=-2)
        return log_softmax_rows(xp, xp.sum(W * mixed[..., None, :], axis=-1))
    components = log_softmax_rows(xp, xp.sum(W * hk[..., None, :], axis=-1))  # (..., K, V)
    return _lse(xp, log_pi[..., None] + components, -2)[..., 0, :]


def effective_hidden(head: str, theta: HeadParameters, h: Any) -> Any:
    """The single hidden state a softmax or MoC head feeds to ``W`` (its logits are W h_eff)."""
    xp, h = _hidden(h)
    if head == "softmax":
        return h
    if head == "moc":
        hk, log_pi = latents(theta, h)
        return xp.sum(xp.exp(log_pi)[..., None] * hk, axis=-2)
    raise InputError(f"head: {head!r} has no single effective hidden state")
