r"""Signs of the logit gradient that survive its projection on col W (seed 000, §3.3, Figure 5).

For one token with next-token probabilities p and target t, the cross-entropy logit gradient is
:math:`g = p - e_t` (a row of :math:`P - \tilde N`): :math:`g_t = p_t - 1 < 0` and :math:`g_j = p_j > 0`
elsewhere. The backbone receives only :math:`g_\Pi = gQQ^\top`, its projection on col W (Q an
orthonormal basis, :func:`rankwall.theory.compression.column_basis`). Per token we measure

- whether :math:`g_\Pi` keeps the sign of g at the target coordinate;
- the share of the top-k coordinates of p (the target left out, k = 10, 100) and of the tail (every
  other coordinate) where :math:`g_\Pi` keeps the sign of g (there: :math:`(g_\Pi)_j > 0`);
- the mean of :math:`\Pi_{jt} = \langle Q_j, Q_t\rangle` over the top-k coordinates j: through it the
  target's large negative coefficient leaks into :math:`(g_\Pi)_j`, with the sign of :math:`-\Pi_{jt}`;
- the target's share of the norm, :math:`|g_t|/\lVert g\rVert` and its square, before and after
  the projection, and the squared-norm shares of the top-k and of the tail.

Two facts bound the target's share. Before: :math:`|g_t| = \sum_{j\ne t} p_j \ge \lVert p_{-t}\rVert`,
so :math:`g_t^2/\lVert g\rVert^2 \ge 1/2`. After: :math:`(g_\Pi)_t = \langle \Pi e_t, g_\Pi\rangle`,
so :math:`|(g_\Pi)_t|/\lVert g_\Pi\rVert \le \lVert \Pi e_t\rVert = \lVert Q_t\rVert` (the square root
of the target's leverage). Nothing orders the share after against the share before: it is 1 when
:math:`\operatorname{col} W = \operatorname{span}(e_t)` and 0 when :math:`e_t \perp \operatorname{col} W`.

Baselines: the same rows g projected on the column space of a random Gaussian head of the same
V and D (:func:`rankwall.theory.compression.construct_head`), and chance (a sign kept with
probability 1/2).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.companion.data import read_corpus, read_text_file
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs
from rankwall.theory import compression as cp
from rankwall.theory.validation import InputError, as_real_array

NAME = "sign-agreement"
SUMMARY = "signs of the logit gradient kept by its projection on col W, against a random head (seed 000, Figure 5)"
TEXT = "wikitext-2.valid.txt"
TOKENS = 512
#: Tokens per forward pass.
CONTEXT = 512
TOP_K = (10, 100)
CHANCE = 0.5
MODEL_HEAD, RANDOM_HEAD = "model head", "random Gaussian head"
#: Relative slack on the leverage bound |(g_Pi)_t| / ||g_Pi|| <= ||Q_t|| for float64 rounding.
BOUND_SLACK = 1e-9


def block_statistics(
    g: np.ndarray, targets: np.ndarray, Q: np.ndarray, top_k: tuple[int, ...]
) -> dict[str, np.ndarray]:
    """Per-token statistics of rows g (b x V, each p - e_t up to a positive factor) and their
    projections g Q Q^T: sign agreement at the target, over the top-k coordinates of p (target
    excluded) and over the tail, the mean coupling Pi_jt = <Q_j, Q_t> over the top-k, and the norm
    shares of target, top-k and tail before and after."""
    b, V = g.shape
    largest = max(top_k)
    rows = np.arange(b)
    projected = (g @ Q) @ Q.T
    agree = np.sign(projected) == np.sign(g)
    others = g.copy()
    others[rows, targets] = -np.inf
    top = np.argpartition(-others, largest - 1, axis=1)[:, :largest]
    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(others, top, axis=1), axis=1), axis=1)
    del others
    stats: dict[str, np.ndarray] = {
        "target_agrees": agree[rows, targets],
        "tail_agreement": (agree.sum(axis=1) - agree[rows, targets] - agree[rows[:, None], top].sum(axis=1))
        / (V - 1 - largest),
        "leverage_sqrt": np.linalg.norm(Q[targets], axis=1),
    }
    coupling = np.einsum("bkd,bd->bk", Q[top], Q[targets])
    for k in top_k:
        stats[f"top_{k}_agreement"] = agree[rows[:, None], top[:, :k]].mean(axis=1)
        stats[f"top_{k}_coupling"] = coupling[:, :k].mean(axis=1)
    for when, x in (("before", g), ("after", projected)):
        squared = np.einsum("ij,ij->i", x, x)
        safe = np.where(squared > 0, squared, 1.0)
        target = x[rows, targets] ** 2
        stats[f"target_share_{when}"] = np.sqrt(target / safe) * (squared > 0)
        stats[f"target_share_squared_{when}"] = target / safe * (squared > 0)
        top_mass = (x[rows[:, None], top] ** 2).sum(axis=1)
        stats[f"top_{largest}_share_squared_{when}"] = top_mass / safe * (squared > 0)
        stats[f"tail_share_squared_{when}"] = np.clip(squared - target - top_mass, 0, None) / safe * (squared > 0)
    stats["kept_norm"] = np.sqrt(np.einsum("ij,ij->i", projected, projected) / np.einsum("ij,ij->i", g, g))
    return stats


def summarize(stats: dict[str, np.ndarray], top_k: tuple[int, ...]) -> dict[str, Any]:
    """Means over tokens of :func:`block_statistics`, and the checks of the two bounds."""
    largest = max(top_k)
    mean = {key: float(np.mean(value)) for key, value in stats.items()}
    return {
        "target_sign_agreement": mean["target_agrees"],
        "top_k_sign_agreement": {str(k): mean[f"top_{k}_agreement"] for k in top_k},
        "top_k_target_coupling": {str(k): mean[f"top_{k}_coupling"] for k in top_k},
        "tail_sign_agreement": mean["tail_agreement"],
        "target_share": {w: mean[f"target_share_{w}"] for w in ("before", "after")},
        "target_share_squared": {w: mean[f"target_share_squared_{w}"] for w in ("before", "after")},
        f"top_{largest}_share_squared": {w: mean[f"top_{largest}_share_squared_{w}"] for w in ("before", "after")},
        "tail_share_squared": {w: mean[f"tail_share_squared_{w}"] for w in ("before", "after")},
        "kept_norm": mean["kept_norm"],
        "target_leverage_sqrt": mean["leverage_sqrt"],
        "tokens_target_share_after_above_before": int(
            np.sum(stats["target_share_after"] > stats["target_share_before"])
        ),
        "tokens_below_half_squared_share_before": int(np.sum(stats["target_share_squared_before"] < 0.5 - BOUND_SLACK)),
        "tokens_above_leverage_bound": int(
            np.sum(stats["target_share_after"] > stats["leverage_sqrt"] * (1 + BOUND_SLACK) + BOUND_SLACK)
        ),
    }


def sign_agreement(
    H: Any,
    W: Any,
    targets: Any,
    bases: dict[str, np.ndarray],
    top_k: tuple[int, ...] = TOP_K,
) -> dict[str, dict[str, Any]]:
    """The logit gradient of the model (H, W) on ``targets``, streamed in blocks, projected on each
    basis of ``bases`` (name -> V x r orthonormal Q); one summary per basis."""
    H, W = as_real_array(H, "H"), as_real_array(W, "W")
    V = W.shape[0]
    top_k = tuple(int(k) for k in top_k)
    if not top_k or min(top_k) < 1 or max(top_k) > V - 2:
        raise InputError(f"top_k: {top_k} needs values in [1, V - 2 = {V - 2}]")
    for name, Q in bases.items():
        if Q.ndim != 2 or Q.shape[0] != V:
            raise InputError(f"bases: {name!r} has shape {Q.shape}, expected (V={V}, r)")
    targets = np.asarray(targets)
    collected: dict[str, list[dict[str, np.ndarray]]] = {name: [] for name in bases}
    start = 0
    for block in cp.logit_gradient_blocks(H, W, targets):
        mine = targets[start : start + block.shape[0]]
        for name, Q in bases.items():
            collected[name].append(block_statistics(block, mine, Q, top_k))
        start += block.shape[0]
    return {
        name: summarize({key: np.concatenate([s[key] for s in parts]) for key in parts[0]}, top_k)
        for name, parts in collected.items()
    }


def run(
    model: str = "smollm2",
    tokens: int = TOKENS,
    seed: int = 0,
    on_step: Callable[[str], None] | None = None,
    text_file: str | Path | None = None,
) -> dict[str, Any]:
    """Load ``model``, take its final hidden states on ``tokens`` predictions of ``text_file`` (a UTF-8
    file, read before the model loads; the shipped WikiText-2 validation split by default), and
    measure sign agreement through its head and through a random Gaussian head of the same shape."""
    from rankwall.checks.models import spot
    from rankwall.checks.models.loading import load_causal_lm

    step = on_step or (lambda description: None)
    started = time.perf_counter()
    label, text = (TEXT, read_corpus(TEXT)) if text_file is None else (str(text_file), read_text_file(text_file))
    step("loading the model")
    loaded = load_causal_lm(model)
    step("forward pass")
    ids = spot.read_tokens(loaded, text, label, tokens)
    H, attention, model_loss = spot.forward_backward(loaded, ids, CONTEXT)
    W, targets, name, tied = loaded.head, ids[1:], loaded.source.name, loaded.tied
    del attention, loaded  # only H and W are needed from here on
    gc.collect()
    V, D = W.shape
    if max(TOP_K) > V - 2:
        raise InputError(f"--model: its vocabulary V = {V} is too small for the top-{max(TOP_K)} coordinates")
    step("column bases of the heads")
    Q, rank = cp.column_basis(W)
    Q_random, random_rank = cp.column_basis(cp.construct_head(V, D, seed))
    step("projecting the logit gradient")
    heads = sign_agreement(H, W, targets, {MODEL_HEAD: Q, RANDOM_HEAD: Q_random})
    return {
        "model": name,
        "text": label,
        "tokens": tokens,
        "V": int(V),
        "D": int(D),
        "tied_head": tied,
        "head_rank": rank,
        "random_head_rank": random_rank,
        "seed": seed,
        "loss_float32_model": model_loss,
        "loss_float64": cp.cross_entropy(H @ W.T, targets),
        "top_k": list(TOP_K),
        "chance_sign_agreement": CHANCE,
        "heads": heads,
        "seconds": time.perf_counter() - started,
        "peak_memory_mb": peak_memory_mb(),
    }


def plot(record: dict[str, Any], path: Path) -> None:
    """Two panels: sign agreement (target, top-k, tail) for both heads against chance, and the
    squared-norm shares of target, top-k and tail before and after the projection."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    names = [MODEL_HEAD, RANDOM_HEAD]
    labels = ["target", *(f"top {k}" for k in record["top_k"]), "tail"]
    width = 0.38
    for i, name in enumerate(names):
        h = record["heads"][name]
        values = [h["target_sign_agreement"], *h["top_k_sign_agreement"].values(), h["tail_sign_agreement"]]
        left.bar(np.arange(len(labels)) + (i - 0.5) * width, values, width, label=name)
    left.axhline(record["chance_sign_agreement"], color="grey", linestyle=":", label="chance")
    left.set_xticks(np.arange(len(labels)), labels)
    left.set(ylim=(0, 1.05), ylabel="share of signs kept by g Π", title="sign agreement (Fig. 5)")
    left.legend(fontsize=8)
    largest = max(record["top_k"])
    parts = [
        ("target", "target_share_squared"),
        (f"top {largest}", f"top_{largest}_share_squared"),
        ("tail", "tail_share_squared"),
    ]
    bars = [("g", MODEL_HEAD, "before"), ("g Π, model", MODEL_HEAD, "after"), ("g Π, random", RANDOM_HEAD, "after")]
    bottom = np.zeros(len(bars))
    for label, key in parts:
        values = np.array([record["heads"][name][key][when] for _, name, when in bars])
        right.bar([b[0] for b in bars], values, bottom=bottom, label=label)
        bottom += values
    right.set(ylim=(0, 1.05), ylabel="mean share of ‖·‖²", title="where the squared norm lies")
    right.legend(fontsize=8)
    figure.suptitle(
        f"{record['model']}: {record['tokens']} tokens of {record['text']}, V = {record['V']}, D = {record['D']}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(record: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``sign_agreement.json`` and ``sign_agreement.png`` into ``out``."""
    return write_outputs(record, out, "sign_agreement", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=integer_in(16, 65536), default=TOKENS, help=f"predictions (default {TOKENS})")
    parser.add_argument(
        "--model", default="smollm2", help="a Hugging Face model folder, a .gguf file, or smollm2 (the default)"
    )
    parser.add_argument("--text", default=None, help=f"UTF-8 text file (default: the shipped {TEXT})")


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment sign-agreement``: run, write JSON and PNG, print a table (or the JSON)."""
    with progress_bar(err) as progress:
        task = progress.add_task(NAME, total=4)

        def step(description: str) -> None:
            progress.update(task, description=description)
            progress.advance(task)

        record = run(args.model, args.tokens, seed=args.seed, on_step=step, text_file=args.text)
    json_path, png_path = write(record, Path(args.out))
    if args.json:
        print(json.dumps(record, indent=2))
        return
    table = Table(title=f"sign-agreement: g = p - e_t and g Π on col W, {record['model']}, {record['tokens']} tokens")
    table.add_column("")
    for name in (MODEL_HEAD, RANDOM_HEAD, "chance"):
        table.add_column(name, justify="right")
    heads = [record["heads"][MODEL_HEAD], record["heads"][RANDOM_HEAD]]
    chance = f"{CHANCE:.3f}"
    table.add_row("sign kept: target", *(f"{h['target_sign_agreement']:.3f}" for h in heads), chance)
    for k in record["top_k"]:
        table.add_row(f"sign kept: top {k}", *(f"{h['top_k_sign_agreement'][str(k)]:.3f}" for h in heads), chance)
    table.add_row("sign kept: tail", *(f"{h['tail_sign_agreement']:.3f}" for h in heads), chance)
    table.add_row("|g_t| / ‖g‖", *(f"{h['target_share']['before']:.3f}" for h in heads), "")
    table.add_row("|(gΠ)_t| / ‖gΠ‖", *(f"{h['target_share']['after']:.3f}" for h in heads), "")
    table.add_row("‖Q_t‖ (bound on the above)", *(f"{h['target_leverage_sqrt']:.3f}" for h in heads), "")
    table.add_row("tail share of ‖gΠ‖²", *(f"{h['tail_share_squared']['after']:.3f}" for h in heads), "")
    table.add_row("‖gΠ‖ / ‖g‖", *(f"{h['kept_norm']:.3f}" for h in heads), "")
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}")
