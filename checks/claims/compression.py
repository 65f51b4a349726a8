"""Claims ``compression.*``: Eq. 1 (the share of the logit gradient destroyed by the head), its
Ky Fan ceiling, and the first-order efficiency of the update that reaches the logits (§3.4)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from checks import tolerance
from checks.strategies import compression_instances
from checks.verdict import REGISTRY, Claim, Instance, Judgement, Measurement, Relation
from theory import compression as cp

SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
U = 2.0**-53


def gradient(instance: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(G, W, Q): the frequency-weighted logit gradient of a batch, the head, a basis of col W.
    The head is random, low rank, or (``aligned``) spanned by G's top right singular vectors."""
    p = instance.params
    W = cp.construct_head(p["V"], p["D"], p["seed"], rank=p.get("rank"))
    H, targets = cp.construct_batch(p["tokens"], W.shape[1], p["V"], p["seed"] + 1, scale=p.get("scale", 1.0))
    G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
    if p.get("aligned"):
        W = np.linalg.svd(G, full_matrices=False)[2][: p["D"]].T
    Q, _ = cp.column_basis(W)
    return G, W, Q


def measure_pythagoras(instance: Instance, backend: Any, factor: Fraction, power: int = 2) -> Measurement:
    G, _, Q = gradient(instance)
    result = cp.compression([G], Q)
    lhs = result.destroyed**power + result.cosine**power
    tol = tolerance.gamma(G.shape[1] + Q.shape[1] + 8, U) * 4
    certificate = {"destroyed": result.destroyed, "cosine": result.cosine, "rank_W": result.rank}
    return Measurement(lhs, 1.0, tol, "float64 QR projection, lost and kept summed apart", certificate)


def judge_pythagoras(instance: Instance, factor: Fraction, power: int = 2) -> Judgement:
    """r^2 + c^2 = 1 is Pythagoras for an orthogonal projector, exactly; r + c = 1 only when one
    of them is 0. The float sides are far from each other only in the second case."""
    m = measure_pythagoras(instance, None, factor, power)
    if power == 2:
        return Judgement(m.lhs, m.rhs, None, "float64 (outside its rounding bound: undecided)")
    r, c = m.certificate["destroyed"], m.certificate["cosine"]
    sign = -1 if (r > 4 * m.tolerance and c > 4 * m.tolerance) else None  # r + c > 1 when both are positive
    return Judgement(m.lhs, m.rhs, sign, "r + c > 1 whenever r, c > 0 (since r^2 + c^2 = 1)")


def measure_ky_fan(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    G, _, Q = gradient(instance)
    result = cp.compression([G], Q)
    sigma = np.linalg.svd(G, compute_uv=False)
    ceiling = float(np.sum(sigma[: result.rank] ** 2) / np.sum(sigma**2)) * float(factor)
    tol = tolerance.svd_rank_margin(G.shape, U, 0.0, 1.0) * 8 + tolerance.gamma(G.shape[1] + 8, U) * 4
    return Measurement(result.cosine**2, ceiling, tol, "float64 QR projection vs SVD share", {"rank_W": result.rank})


def judge_ky_fan(instance: Instance, factor: Fraction) -> Judgement:
    """A head whose columns span all of R^V keeps everything (Pi = I): equality, exactly.
    Otherwise a margin inside the rounding bound is left undecided (no exact SVD route)."""
    m = measure_ky_fan(instance, None, factor)
    if m.certificate["rank_W"] == instance.params["V"] and factor == 1:
        return Judgement(1.0, 1.0, 0, "structural (col W = R^V, so the projector is the identity)")
    return Judgement(m.lhs, m.rhs, None, "float64 (inside its rounding bound: undecided)")


def measure_ky_fan_attained(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    m = measure_ky_fan(instance, backend, factor)
    return Measurement(m.lhs, m.rhs, m.tolerance, m.method, m.certificate)


def measure_efficiency(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    """First-order loss decrease rates, per unit of logit-update norm: along -G it is ||G||_F
    (steepest descent); along the direction the H-update produces, -GWW^T, it is
    <G, GWW^T> / ||GWW^T||_F (Cauchy-Schwarz bounds it by ||G||_F)."""
    G, W, _ = gradient(instance)
    induced = G @ W @ W.T
    along_induced = float(np.sum(G * induced) / np.linalg.norm(induced))
    along_gradient = float(np.linalg.norm(G))
    tol = tolerance.gamma(G.shape[1] + W.shape[1] + 8, U) * 4 * along_gradient
    certificate = {"efficiency": along_induced / along_gradient}
    return Measurement(
        along_induced, along_gradient * float(factor), tol, "float64 directional derivatives", certificate
    )


def judge_efficiency(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_efficiency(instance, None, factor)
    return Judgement(m.lhs, m.rhs, None, "float64 (inside its rounding bound: undecided)")


def _witnesses(V: int, aligned: bool = False) -> list[Instance]:
    """Random and low-rank heads (aligned ones for the attained claim) at vocabulary size V."""
    V = min(V, 4096)
    heads = ((min(32, V - 1) or 1, None), (min(128, V - 1) or 1, min(16, V - 1) or 1), (min(8, V - 1) or 1, None))
    return [
        Instance(
            "batch-gradient",
            {"V": V, "D": D, "rank": rank, "tokens": 96, "seed": D + s, "scale": scale, "aligned": aligned},
        )
        for D, rank in heads
        for s, scale in ((0, 1.0), (1, 10.0))
    ]


def _claim(name: str, **fields: Any) -> Claim:
    fields.setdefault("array_api", False)
    fields.setdefault("random_instances", lambda V, n, seed: [])
    fields.setdefault("witnesses", _witnesses)
    fields.setdefault("strategy", compression_instances)
    return Claim(id=name, **fields)


pythagoras = _claim(
    "compression.pythagoras",
    source=f"{SEED_000}, Eq. 1 (§2.4, §3.3)",
    title="What the head destroys and what survives add up in squares",
    statement="r² + c² = 1 for r = ‖G − GΠ‖_F/‖G‖_F (destroyed in ker Wᵀ) and c = ‖GΠ‖_F/‖G‖_F (surviving)",
    domain="G the frequency-weighted cross-entropy logit gradient of a batch; W random, low rank, or aligned",
    relation=Relation.EQUAL,
    bound=None,
    measure=measure_pythagoras,
    judge_exactly=judge_pythagoras,
)
ky_fan_attained = _claim(
    "compression.ky-fan-attained",
    source="rankwall (equality case of compression.ky-fan)",
    title="A head aligned with the gradient's top singular subspace keeps the best share",
    statement="c² = Σ_{i ≤ D} σ_i(G)² / ‖G‖_F² when col W is spanned by G's top D right singular vectors",
    domain="aligned heads W = (top D right singular vectors of G)",
    relation=Relation.EQUAL,
    bound=None,
    measure=measure_ky_fan_attained,
    judge_exactly=lambda i, f: Judgement(0.0, 0.0, None, "float64 (outside its rounding bound: undecided)"),
    witnesses=lambda V: _witnesses(V, aligned=True),
    strategy=lambda: compression_instances(aligned=True),
)
ky_fan = _claim(
    "compression.ky-fan",
    source="rankwall (links Eq. 1 to Prop. A.6 through Ky Fan's maximum principle)",
    title="No head keeps more than the best rank-D share of the gradient",
    statement="c² ≤ Σ_{i ≤ rank W} σ_i(G)² / ‖G‖_F², with equality when col W is G's top right singular subspace",
    domain="as for compression.pythagoras",
    relation=Relation.AT_MOST,
    bound="upper",
    measure=measure_ky_fan,
    judge_exactly=judge_ky_fan,
)
efficiency = _claim(
    "compression.update-efficiency",
    source=f"{SEED_000}, §3.4 (Figure 6, to first order)",
    title="The update that reaches the logits descends no faster than the logit gradient",
    statement="⟨G, GWWᵀ⟩/‖GWWᵀ‖_F ≤ ‖G‖_F: per unit of logit-update norm, the H-update's loss decrease is at most "
    "that along −G",
    domain="as for compression.pythagoras",
    relation=Relation.AT_MOST,
    bound="upper",
    measure=measure_efficiency,
    judge_exactly=judge_efficiency,
)
pythagoras.with_mutant(
    "r-plus-c-is-1",
    statement="r + c = 1  (false: r² + c² = 1, so r + c > 1 whenever both are positive)",
    measure=lambda i, b, f: measure_pythagoras(i, b, f, power=1),
    judge_exactly=lambda i, f: judge_pythagoras(i, f, power=1),
)

for _claim_object in (pythagoras, ky_fan, ky_fan_attained, efficiency):
    REGISTRY.register(_claim_object)
