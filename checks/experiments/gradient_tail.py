r"""Prop. A.6 on a real model, at more tokens than 2D (seed 000, §2.4 and App. A.3.1).

No update of rank at most 2D comes closer to the logit gradient G of a batch than the tail of its
singular values, :math:`t = (\sum_{i > 2D}\sigma_i(G)^2)^{1/2}` (:mod:`rankwall.theory.updates`,
Theorem UP.3). A batch of n tokens gives n rows, so :math:`\operatorname{rank} G \le n` and t is
identically zero while :math:`n \le 2D`: the bound can be non-vacuous only past 2D tokens (1,152 on
SmolLM2-135M, whose spot check records batches of at most 1,024). Here the model's final hidden
states on n > 2D tokens give :math:`G = (\operatorname{softmax}(HW^\top) - E_t)/n`, and for leading
blocks of n rows:

- the certified rank of G (a lower bound, from the eigenvalues of the Gram matrix :math:`GG^\top`
  above a Weyl margin, :func:`rankwall.checks.exact.gram_rank_lower_bound`);
- the relative tail :math:`t/\lVert G\rVert_F` from the computed singular values, and a certified
  lower bound on it: each exact :math:`\sigma_i^2 \ge \hat\sigma_i^2 - m^2` (m the Gram margin), over
  an upper bound on :math:`\lVert G\rVert_F` (a sum of nV rounded squares, Higham's
  :math:`\gamma_{nV}`);
- the components that hold 70% and 99.9% of the norm (as Figure 7(b) counts them).

Every token has frequency 1/n, so :math:`G = (P - \tilde N)/n` and the relative tail is that of
:math:`P - \tilde N` (Theorem UP.2 (3) with :math:`f_{\min} = f_{\max}`): the seed's form of A.6.
Beside it, the same measures at the largest n for a random Gaussian head of the same shape with
Gaussian hidden states and Zipfian targets.
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

from rankwall.checks import exact
from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.companion.data import read_corpus, read_text_file
from rankwall.checks.engine import tolerance
from rankwall.checks.experiments.batch_rank import components_for
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs
from rankwall.theory import compression as cp
from rankwall.theory.validation import check_integer_in

NAME = "gradient-tail"
SUMMARY = "Prop. A.6's residual bound on SmolLM2 past 2D tokens, beside a random head (seed 000, §2.4)"
TEXT = "wikitext-2.valid.txt"
TOKENS = 2048
#: Tokens per forward pass (as ``rankwall spot``, so the first 1,024 rows are the spot check's).
CONTEXT = 512
MODEL_HEAD, RANDOM_HEAD = "model head", "random Gaussian head"
F64 = tolerance.unit_roundoff(np.float64)


def tail_row(G: np.ndarray, D: int) -> dict[str, Any]:
    """Prop. A.6's bound for one gradient block G (n x V): its certified rank, the tail of its singular
    values beyond 2D relative to its norm (computed, and a certified lower bound), and the components
    holding 70% and 99.9% of the norm. The tail is exactly 0 when n <= 2D."""
    D = check_integer_in(D, "D", 1)
    rank, margin, sigma = exact.gram_rank_lower_bound(G)
    squared = float(np.sum(G * G))
    norm = np.sqrt(squared)
    upper_norm = np.sqrt(squared / (1 - tolerance.gamma(G.size, F64)))
    tail = sigma[2 * D :]
    certified_tail = np.sqrt(np.sum(np.maximum(tail**2 - margin**2, 0.0)))
    return {
        "tokens": int(G.shape[0]),
        "two_D": 2 * D,
        "certified_rank": rank,
        "margin": margin,
        "tail_beyond_2D": float(np.sqrt(np.sum(tail**2)) / norm) if norm else 0.0,
        "tail_beyond_2D_lower": float(certified_tail / upper_norm) if norm else 0.0,
        "sigma_2D_plus_1": float(sigma[2 * D]) / norm if sigma.size > 2 * D and norm else 0.0,
        "components_70": components_for(sigma, 0.7),
        "components_99.9": components_for(sigma, 0.999),
    }


def batch_sizes(tokens: int, D: int) -> list[int]:
    """Half the tokens, exactly 2D (where the tail is still zero) and all of them."""
    return sorted({n for n in (tokens // 2, 2 * D, tokens) if 1 <= n <= tokens})


def hidden_states(loaded: Any, ids: np.ndarray, context: int = CONTEXT) -> tuple[np.ndarray, float]:
    """The model's final hidden states (float32 forward, returned as float64) on windows of ``context``
    predictions, and its float32 mean loss. Forward only: no gradient is taken."""
    import torch

    N = len(ids) - 1
    hidden, total = [], 0.0
    with torch.no_grad():
        for start in range(0, N, context):
            window = torch.as_tensor(ids[start : min(start + context, N) + 1])[None, :]
            state = loaded.model.model(input_ids=window[:, :-1]).last_hidden_state
            logits = loaded.model.get_output_embeddings()(state)[0]
            total += float(torch.nn.functional.cross_entropy(logits, window[0, 1:], reduction="sum")) / N
            hidden.append(state[0].double().numpy())
    return np.concatenate(hidden), total


def gradient(H: np.ndarray, W: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """:math:`(\\operatorname{softmax}(HW^\\top) - E_t)/n`, the logit gradient of the mean cross-entropy."""
    return np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))


def run(
    model: str = "smollm2",
    tokens: int = TOKENS,
    seed: int = 0,
    on_step: Callable[[str], None] | None = None,
    text_file: str | Path | None = None,
) -> dict[str, Any]:
    """Load ``model``, take its final hidden states on ``tokens`` predictions of ``text_file`` (the
    shipped WikiText-2 validation split by default, read before the model loads), and measure Prop.
    A.6's bound on leading blocks of its logit gradient, beside a random head of its shape."""
    from rankwall.checks.models import spot
    from rankwall.checks.models.loading import load_causal_lm

    step = on_step or (lambda description: None)
    started = time.perf_counter()
    label, text = (TEXT, read_corpus(TEXT)) if text_file is None else (str(text_file), read_text_file(text_file))
    step("loading the model")
    loaded = load_causal_lm(model)
    ids = spot.read_tokens(loaded, text, label, tokens)
    W, name, tied = loaded.head, loaded.source.name, loaded.tied
    V, D = W.shape
    step("forward passes")
    H, model_loss = hidden_states(loaded, ids)
    del loaded
    gc.collect()
    targets = ids[1:]
    step("the model's logit gradient")
    G = gradient(H, W, targets)
    rows = [tail_row(G[:n], D) for n in batch_sizes(tokens, D)]
    loss = cp.cross_entropy(H @ W.T, targets)
    del G, H
    gc.collect()
    step("a random head of the same shape")
    H_random, targets_random = cp.construct_batch(tokens, D, V, seed)
    random_row = tail_row(gradient(H_random, cp.construct_head(V, D, seed), targets_random), D)
    return {
        "model": name,
        "text": label,
        "tokens": tokens,
        "V": int(V),
        "D": int(D),
        "tied_head": tied,
        "seed": seed,
        "loss_float32_model": model_loss,
        "loss_float64": loss,
        "heads": {MODEL_HEAD: rows, RANDOM_HEAD: [random_row]},
        "seconds": time.perf_counter() - started,
        "peak_memory_mb": peak_memory_mb(),
    }


def plot(record: dict[str, Any], path: Path) -> None:
    """The relative tail beyond 2D against the batch size (the model's blocks and the random head),
    with the threshold n = 2D below which it is zero."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    for name, marker in ((MODEL_HEAD, "o-"), (RANDOM_HEAD, "s")):
        rows = record["heads"][name]
        axis.plot([r["tokens"] for r in rows], [r["tail_beyond_2D"] for r in rows], marker, label=name)
    axis.axvline(2 * record["D"], color="grey", linestyle=":", label="n = 2D")
    top = max(r["tail_beyond_2D"] for rows in record["heads"].values() for r in rows)
    axis.set(
        xlabel="tokens n in the batch",
        ylabel="tail beyond 2D / ‖G‖_F",
        ylim=(0, 1.3 * top or 1.0),
        title=f"Prop. A.6 on {record['model'][:21]}, D = {record['D']}",
    )
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(record: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``gradient_tail.json`` and ``gradient_tail.png`` into ``out``."""
    return write_outputs(record, out, "gradient_tail", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=integer_in(16, 65536), default=TOKENS, help=f"predictions (default {TOKENS})")
    parser.add_argument(
        "--model", default="smollm2", help="a Hugging Face model folder, a .gguf file, or smollm2 (the default)"
    )
    parser.add_argument("--text", default=None, help=f"UTF-8 text file (default: the shipped {TEXT})")


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment gradient-tail``: run, write JSON and PNG, print a table (or the JSON)."""
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
    table = Table(title=f"gradient-tail: Prop. A.6 on {record['model']}, 2D = {2 * record['D']}")
    for column in ("head", "tokens", "certified rank", "tail / ‖G‖", "certified ≥", "70%", "99.9%"):
        table.add_column(column, justify="right")
    for name, rows in record["heads"].items():
        for r in rows:
            table.add_row(
                name,
                str(r["tokens"]),
                str(r["certified_rank"]),
                f"{r['tail_beyond_2D']:.4f}",
                f"{r['tail_beyond_2D_lower']:.4f}",
                str(r["components_70"]),
                str(r["components_99.9"]),
            )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}")
