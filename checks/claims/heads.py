"""Claims ``heads.*``: log-probability rank of alternative heads, and the rank of their Jacobian
with respect to the hidden state (seed 001; seed 000 §2.3, Eq. 10)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from checks import tolerance
from checks.strategies import head_instances
from checks.verdict import REGISTRY, Claim, Instance, Judgement, Measurement, Relation
from theory import heads as hd

SEED_000, SEED_001 = "seed 000", "seed 001"
U = 2.0**-53


def contexts(instance: Instance) -> tuple[hd.HeadParameters, np.ndarray]:
    p = instance.params
    theta = hd.construct_head_parameters(p["V"], p["d"], p["K"], p["seed"], scale=p["scale"])
    H = np.random.default_rng(p["seed"] + 1).standard_normal((p["N"], p["d"]))
    return theta, H


def certified_log_probability_rank(instance: Instance) -> tuple[int, float]:
    """Singular values of the log-probability matrix above its Weyl margin."""
    theta, H = contexts(instance)
    L = hd.log_probabilities(instance.params["head"], theta, H)
    logit_bound = float(np.abs(theta.W).sum(axis=1).max()) * max(float(np.abs(H).max()), 1.0)
    sigma = np.linalg.svd(L, compute_uv=False)
    margin = tolerance.head_log_probability_error(L, logit_bound, instance.params["K"], U)
    margin += tolerance.svd_rank_margin(L.shape, U, 0.0, float(sigma[0]))
    return int(np.sum(sigma > margin)), margin


def measure_bottleneck(instance: Instance, backend: Any, factor: Fraction, claimed_above: bool = False) -> Measurement:
    """Softmax and MoC: certified lower bound on the rank against d + 1 (the factorization
    [H_eff, -z][W, 1]^T has d + 1 columns, which is the structural upper bound)."""
    lower, margin = certified_log_probability_rank(instance)
    d = instance.params["d"]
    certificate = {"certified_rank_lower_bound": lower, "weyl_margin": margin, "structural_upper_bound": d + 1}
    if claimed_above:  # the mutant: rank >= d + 2
        return Measurement(float(d + 2), float(lower), 0.0, "certified rank lower bound", certificate, True)
    return Measurement(float(lower), float(d + 1), 0.0, "certified rank lower bound (SVD + Weyl)", certificate, True)


def judge_bottleneck(instance: Instance, factor: Fraction, claimed_above: bool = False) -> Judgement:
    m = measure_bottleneck(instance, None, factor, claimed_above)
    d = instance.params["d"]
    method = "structural factorization [H_eff, -z][W, 1]^T (d + 1 columns)"
    if claimed_above:
        return Judgement(m.lhs, float(d + 1), -1, method, certificate=m.certificate)
    return Judgement(m.lhs, m.rhs, 1 if m.lhs <= m.rhs else -1, method, certificate=m.certificate)


def measure_mos(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    lower, margin = certified_log_probability_rank(instance)
    d = instance.params["d"]
    return Measurement(
        float(d + 2), float(lower), 0.0, "certified rank lower bound (SVD + Weyl)", {"weyl_margin": margin}, True
    )


def judge_mos(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_mos(instance, None, factor)
    return Judgement(m.lhs, m.rhs, 1 if m.rhs >= m.lhs else None, m.method)


def measure_jacobian(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    """Rank of d(log p)/dh (V x d) by torch autograd, as a certified lower bound, against d."""
    import torch

    theta, H = contexts(instance)
    h = torch.tensor(H[0], dtype=torch.float64)
    J = torch.autograd.functional.jacobian(lambda x: hd.log_probabilities(instance.params["head"], theta, x), h)
    J = J.numpy()
    sigma = np.linalg.svd(J, compute_uv=False)
    margin = tolerance.svd_rank_margin(J.shape, U, float(np.linalg.norm(J)), float(sigma[0]))
    lower = int(np.sum(sigma > margin))
    d = instance.params["d"]
    return Measurement(
        float(lower),
        float(d),
        0.0,
        "certified rank lower bound of the autograd Jacobian",
        {"shape": list(J.shape)},
        True,
    )


def judge_jacobian(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_jacobian(instance, None, factor)
    return Judgement(m.lhs, m.rhs, 1 if m.lhs <= m.rhs else -1, "shape (V x d): rank <= d")


def _witnesses(V: int, heads: tuple[str, ...], Ks: tuple[int, ...] = (1, 3)) -> list[Instance]:
    V = min(V, 400)
    return [
        Instance("head", {"head": head, "N": 120, "V": V, "d": d, "K": K, "seed": d + K, "scale": 3.0})
        for head in heads
        for d in (2, 8)
        for K in Ks
        if d + 2 <= min(V, 120)
    ]


def _claim(name: str, **fields: Any) -> Claim:
    fields.setdefault("array_api", False)
    fields.setdefault("bound", None)
    fields.setdefault("random_instances", lambda V, n, seed: [])
    return Claim(id=name, **fields)


bottleneck = _claim(
    "heads.softmax-moc-rank",
    source=f"{SEED_001}, 'The trap' (mixture of contexts) and Corollary 1",
    title="Softmax and mixture-of-contexts heads cannot exceed rank d + 1",
    statement="rank(log P) ≤ d + 1 over any set of contexts, for P = softmax(W h) and P = softmax(W Σ_k π_k h_k)",
    domain="Gaussian heads, K = 1..8 latents, logit scale 0.3 to 10",
    relation=Relation.AT_MOST,
    measure=measure_bottleneck,
    judge_exactly=judge_bottleneck,
    witnesses=lambda V: _witnesses(V, ("softmax", "moc")),
    strategy=lambda: head_instances(("softmax", "moc")),
)
mos = _claim(
    "heads.nonlinear-heads-exceed",
    source=f"{SEED_001}, 'Mixture of softmaxes' (MoS has no rank ceiling); Kanai et al. (sigsoftmax)",
    title="Mixtures of softmaxes and nonlinear heads break the d + 1 ceiling",
    statement="certified rank(log P) ≥ d + 2 for MoS (K ≥ 2), sigsoftmax and the monotone piecewise-linear head",
    domain="generic Gaussian heads, N, V ≥ d + 2, logit scale 1 to 10 (a generic statement, not a universal one)",
    relation=Relation.AT_MOST,
    measure=measure_mos,
    judge_exactly=judge_mos,
    witnesses=lambda V: [
        i
        for i in _witnesses(V, ("mos", "sigsoftmax", "piecewise-linear"), Ks=(2, 4))
        if i.params["head"] == "mos" or i.params["K"] == 2
    ],
    strategy=lambda: head_instances(("mos", "sigsoftmax", "piecewise-linear"), K_min=2, scale_min=1.0),
)
jacobian = _claim(
    "heads.jacobian-rank",
    source=f"{SEED_000}, §2.3 and Eq. 10",
    title="Whatever the head, the gradient to the backbone is d-dimensional",
    statement="rank(∂ log p / ∂h) ≤ d for every head (the Jacobian is V × d)",
    domain="all five heads",
    relation=Relation.AT_MOST,
    measure=measure_jacobian,
    judge_exactly=judge_jacobian,
    witnesses=lambda V: _witnesses(V, hd.HEADS, Ks=(3,)),
    strategy=lambda: head_instances(hd.HEADS),
)
bottleneck.with_mutant(
    "moc-exceeds-d-plus-1",
    statement="MoC log-probabilities reach rank > d + 1  (false: MoC is a softmax of one mixed state)",
    measure=lambda i, b, f: measure_bottleneck(i, b, f, claimed_above=True),
    judge_exactly=lambda i, f: judge_bottleneck(i, f, claimed_above=True),
    witnesses=lambda V: _witnesses(V, ("moc",)),
    strategy=lambda: head_instances(("moc",)),
)

for _claim_object in (bottleneck, mos, jacobian):
    REGISTRY.register(_claim_object)
