r"""Softmax, MoC and MoS language models trained on the shipped text (seed 001's evidence, in miniature).

Seed 001 reports, for language models trained on PTB: perplexity improves from softmax to a mixture of
softmaxes (MoS), the expected pairwise KL divergence between the next-token distributions of two
contexts is 4.763 (softmax), 4.864 (mixture of contexts, MoC) and 5.284 (MoS), and perplexity is best
at K = 15 components and worse at K = 20, where the rank of log P has saturated.

Here each model is the project's small Transformer (:mod:`rankwall.checks.models.tiny`, two blocks)
under one of the heads of :mod:`rankwall.theory.heads`, trained on the words of tinyshakespeare (the
1,023 most frequent and an unknown token: V = 1,024, far above the head's d = :data:`WIDTH`):

- *softmax*: :math:`\log\operatorname{softmax}(Wh)`, at matched parameters: its width is the smallest
  that gives it at least as many parameters as the MoS model of :data:`K_MAIN` components;
- *MoC* and *MoS* with K latents :math:`h_k = \tanh(P_k h)` and priors :math:`\operatorname{softmax}(Uh)`,
  mixed before and after the softmax (the same parameters, so the two are matched exactly).

On held-out text: the perplexity; over :data:`CONTEXTS` held-out contexts the certified rank of
:math:`\log P` (the head evaluated in float64 on the model's own hidden states; lower end from the
Gram eigenvalues with a Weyl margin and the rounding of the evaluation,
:func:`rankwall.checks.engine.tolerance.head_log_probability_error`; upper end d + 1 for softmax, MoC and MoS
with K = 1 by their factorization, min(N, V) for MoS), its numerical ranks, and the expected KL
divergence between the distributions of two distinct contexts. Then the K sweep of MoS
(:data:`K_SWEEP`; longer sweeps run on Dask with ``--workers`` or ``--scheduler``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in, numbers_in
from rankwall.checks.cli.commands.common import cluster, cluster_options, on_cluster
from rankwall.checks.companion.data import read_corpus, words
from rankwall.checks.models import tiny
from rankwall.checks.run.outputs import cpu_seconds, peak_memory_mb, progress_bar, write_outputs
from rankwall.theory import heads as hd
from rankwall.theory.validation import InputError

NAME = "mos-lm"
SUMMARY = (
    "softmax, MoC and MoS word-level language models: perplexity, certified rank of log P, pairwise KL, K (seed 001)"
)

WIDTH = 32
BLOCKS, HEADS_PER_BLOCK, CONTEXT = 2, 2, 32
BATCH = 16
STEPS = 400
#: Words kept (the rest map to one unknown token): V = WORDS + 1.
WORDS = 1023
LEARNING_RATE = 3e-3
K_MAIN = 4
K_SWEEP = (1, 2, 4, 8, 16, 24)
#: Held-out batches (of BATCH windows) for the perplexity.
EVAL_BATCHES = 16
#: Held-out contexts (rows of log P) for the rank and the pairwise KL.
CONTEXTS = 256
#: Relative thresholds of the (uncertified) numerical ranks.
THRESHOLDS = (1e-3, 1e-6)


def make_lm(head: str, V: int, width: int, K: int, seed: int) -> Any:
    """The backbone of :func:`rankwall.checks.models.tiny.make_tiny` (its head Linear is W) and, for MoC
    and MoS, the latent projections P (K x d x d) and prior weights U (K x d)."""
    import torch
    from torch import nn

    config = tiny.TinyConfig(V=V, width=width, layers=BLOCKS, heads=HEADS_PER_BLOCK, context=CONTEXT)

    class MixtureLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head_kind, self.K = head, K
            self.backbone = tiny.make_tiny(config, seed)
            if head != "softmax":
                generator = torch.Generator().manual_seed(seed + 5)
                self.P = nn.Parameter(torch.randn(K, width, width, generator=generator) / math.sqrt(width))
                self.U = nn.Parameter(torch.randn(K, width, generator=generator) / math.sqrt(width))

        def log_probabilities(self, h: Any) -> Any:
            """The head of :func:`rankwall.theory.heads.log_probabilities`, in torch."""
            W = self.backbone.head.weight
            if self.head_kind == "softmax":
                return torch.log_softmax(h @ W.T, dim=-1)
            hk = torch.tanh(torch.einsum("kij,...j->...ki", self.P, h))
            log_pi = torch.log_softmax(torch.einsum("ki,...i->...k", self.U, h), dim=-1)
            if self.head_kind == "moc":
                return torch.log_softmax((log_pi.exp()[..., None] * hk).sum(-2) @ W.T, dim=-1)
            return torch.logsumexp(log_pi[..., None] + torch.log_softmax(hk @ W.T, dim=-1), dim=-2)

        def forward(self, x: Any) -> Any:
            return self.log_probabilities(self.backbone.hidden(x))

        def parameters_theory(self) -> hd.HeadParameters:
            """The head's parameters as float64 NumPy (P and U empty for softmax)."""
            W = self.backbone.head.weight.detach().double().numpy()
            if self.head_kind == "softmax":
                return hd.HeadParameters(W, np.zeros((1, width, width)), np.zeros((1, width)))
            return hd.HeadParameters(W, self.P.detach().double().numpy(), self.U.detach().double().numpy())

    return MixtureLM()


def parameter_count(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def matched_width(V: int, K: int) -> int:
    """The smallest width (a multiple of the heads per block) at which the softmax model has at least as
    many parameters as the MoS model of width WIDTH and K components."""
    target = parameter_count(make_lm("mos", V, WIDTH, K, 0))
    width = WIDTH
    while parameter_count(make_lm("softmax", V, width, 1, 0)) < target:
        width += HEADS_PER_BLOCK
    return width


def corpus() -> tuple[np.ndarray, np.ndarray, int]:
    stream = words(read_corpus("tinyshakespeare.txt"), keep=WORDS)
    split = int(0.9 * len(stream.ids))
    return stream.ids[:split], stream.ids[split:], stream.V


def log_probability_rank(head: str, theta: hd.HeadParameters, H: np.ndarray) -> dict[str, Any]:
    """Certified rank of log P (N contexts x V) of the head evaluated in float64 on hidden states H (read
    exactly), with its numerical ranks, and the expected KL divergence between two distinct contexts."""
    from rankwall.checks import exact
    from rankwall.checks.engine import tolerance

    L = np.asarray(hd.log_probabilities(head, theta, H))
    N, V = L.shape
    latent = np.sqrt(theta.d) if head != "softmax" else float(np.max(np.linalg.norm(H, axis=1)))
    bound = float(np.max(np.linalg.norm(theta.W, axis=1))) * latent  # |w_v . h_k| <= |w_v| |h_k|
    error = tolerance.head_log_probability_error(L, bound, theta.P.shape[0], tolerance.unit_roundoff(np.float64))
    lower, margin, sigma = exact.gram_rank_lower_bound(L, entry_error=error)
    single = head in ("softmax", "moc") or theta.P.shape[0] == 1  # one softmax of W h_eff: [H_eff, -lse][W, 1]^T
    upper = min(N, V, theta.d + 1) if single else min(N, V)
    P = np.exp(L)
    entropy_term = np.sum(P * L, axis=1)
    kl = entropy_term[:, None] - P @ L.T  # KL(P_c || P_c') = sum_v P_c (log P_c - log P_c')
    return {
        "contexts": N,
        "rank_lower": int(lower),
        "rank_upper": int(upper),
        "margin": margin,
        "numerical_rank": {f"{t:.0e}": int(np.sum(sigma / sigma[0] > t)) for t in THRESHOLDS},
        "expected_pairwise_kl": float((kl.sum() - np.trace(kl)) / (N * (N - 1))),
    }


def train_and_measure(head: str, K: int, width: int, steps: int, seed: int) -> dict[str, Any]:
    """One language model: train (AdamW), then held-out perplexity, rank of log P and pairwise KL. Its
    ``cpu_seconds`` are the calling thread's (torch runs on it alone), so they stay the model's own when
    a Dask worker runs several models at once."""
    import torch

    torch.set_num_threads(1)
    started, cpu = time.perf_counter(), time.thread_time()
    train_ids, valid_ids, V = corpus()
    model = make_lm(head, V, width, K, seed)
    stream = tiny.batches(train_ids, CONTEXT, BATCH, seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    for _ in range(steps):
        x, y = next(stream)
        loss = -model(x).gather(-1, y[..., None]).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    evaluation = tiny.fixed_batches(valid_ids, CONTEXT, BATCH, EVAL_BATCHES, seed + 2)
    with torch.no_grad():
        nll = float(np.mean([float(-model(x).gather(-1, y[..., None]).mean()) for x, y in evaluation]))
        [(x, _)] = tiny.fixed_batches(valid_ids, CONTEXT, CONTEXTS, 1, seed + 3)
        H = model.backbone.hidden(x)[:, -1].double().numpy()  # the last position of each held-out window
    return {
        "head": head,
        "K": K if head != "softmax" else 1,
        "width": width,
        "parameters": parameter_count(model),
        "steps": steps,
        "valid_loss": nll,
        "perplexity": math.exp(nll),
        **log_probability_rank(head, model.parameters_theory(), H),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.thread_time() - cpu,
    }


def jobs(V: int, k_sweep: tuple[int, ...], steps: int, seed: int) -> list[tuple[str, int, int, int, int]]:
    """(head, K, width, steps, seed) of every model: the matched comparison at K_MAIN, then the MoS sweep."""
    main = [("softmax", 1, matched_width(V, K_MAIN)), ("moc", K_MAIN, WIDTH), ("mos", K_MAIN, WIDTH)]
    sweep = [("mos", K, WIDTH) for K in k_sweep if K != K_MAIN]
    return [(head, K, width, steps, seed) for head, K, width in main + sweep]


def run(
    *,
    k_sweep: tuple[int, ...] = K_SWEEP,
    steps: int = STEPS,
    seed: int = 0,
    client: Any = None,
    on_model: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Every model, serially or as one Dask task each (``client``); the records in job order. The run's
    ``cpu_seconds`` are this process's (on Dask, the models' own are in their records)."""
    started, cpu = time.perf_counter(), cpu_seconds()
    V = corpus()[2]
    todo = jobs(V, k_sweep, steps, seed)
    if client is None:
        records = []
        for job in todo:
            records.append(train_and_measure(*job))
            if on_model is not None:
                on_model()
    else:
        records = client.gather(client.map(train_and_measure, *zip(*todo, strict=True), pure=False))
    return {
        "V": V,
        "width": WIDTH,
        "K_main": K_MAIN,
        "records": records,
        "seconds": time.perf_counter() - started,
        "cpu_seconds": cpu_seconds() - cpu,
        "peak_memory_mb": peak_memory_mb(),
    }


def sweep(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The MoS records by K (the matched comparison's MoS included)."""
    return sorted((r for r in result["records"] if r["head"] == "mos"), key=lambda r: r["K"])


def plot(result: dict[str, Any], path: Path) -> None:
    """Perplexity and the numerical rank of log P against K for MoS, with softmax and MoC marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(12, 4))
    mos = sweep(result)
    Ks = [r["K"] for r in mos]
    axes[0].plot(Ks, [r["perplexity"] for r in mos], marker="o", label="MoS")
    for r in result["records"]:
        if r["head"] != "mos":
            axes[0].plot(
                [r["K"]],
                [r["perplexity"]],
                marker="s",
                linestyle="none",
                label=f"{'softmax (width ' + str(r['width']) + ')' if r['head'] == 'softmax' else 'MoC'}",
            )
    axes[0].set(xscale="log", xlabel="K", ylabel="held-out perplexity", title="perplexity")
    for threshold in THRESHOLDS:
        key = f"{threshold:.0e}"
        axes[1].plot(Ks, [r["numerical_rank"][key] for r in mos], marker="o", label=f"MoS, sigma/sigma_1 > {key}")
    axes[1].plot(Ks, [r["rank_lower"] for r in mos], marker="^", label="MoS, certified lower end")
    axes[1].axhline(result["width"] + 1, color="grey", linestyle=":", label="d + 1 (softmax, MoC)")
    axes[1].set(xscale="log", xlabel="K", ylabel=f"rank of log P ({mos[0]['contexts']} contexts)", title="rank")
    for ax in axes:
        ax.minorticks_off()
        ax.set_xticks(Ks, [str(k) for k in Ks])
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    return write_outputs(result, out, "mos_lm", plot)


_k_values = numbers_in(int, 1, 256, what="K")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=integer_in(1, 1_000_000), default=STEPS, help="training steps per model")
    parser.add_argument(
        "--K", type=_k_values, default=K_SWEEP, dest="K", help="the MoS sweep (one Dask task per model on a cluster)"
    )
    cluster_options(parser)


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment mos-lm``: train every model, measure, write JSON and PNG, print a table."""
    if K_MAIN not in args.K:
        raise InputError(f"--K: the sweep must include the comparison's K = {K_MAIN}")
    if on_cluster(args):
        with cluster(args) as client:
            result = run(k_sweep=args.K, steps=args.steps, seed=args.seed, client=client)
    else:
        with progress_bar(err) as progress:
            task = progress.add_task("mos-lm: training", total=len(args.K) + 2)
            result = run(k_sweep=args.K, steps=args.steps, seed=args.seed, on_model=lambda: progress.advance(task))
    json_path, png_path = write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"language models on tinyshakespeare words, V = {result['V']:,}, d = {result['width']}")
    for column in ("head", "K", "width", "parameters", "perplexity", "rank log P", "num. rank 1e-3", "pairwise KL"):
        table.add_column(column, justify="right")
    for r in result["records"]:
        table.add_row(
            r["head"],
            str(r["K"]),
            str(r["width"]),
            f"{r['parameters']:,}",
            f"{r['perplexity']:.2f}",
            f"{r['rank_lower']}..{r['rank_upper']}",
            str(r["numerical_rank"]["1e-03"]),
            f"{r['expected_pairwise_kl']:.3f}",
        )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}; {result['seconds']:.0f} s, {result['cpu_seconds']:.0f} s CPU")
