r"""Anatomy of the update-efficiency ratio (seed 000, §3.4 and Figure 6): kernel times anisotropy.

Moving the logits Z by a step of norm :math:`\varepsilon` along a unit direction D changes the batch
loss by :math:`-\varepsilon\langle G, D\rangle + O(\varepsilon^2)`. Along :math:`-G` the rate is
:math:`e_G = \lVert G\rVert_F`; along the hidden-state update :math:`-GWW^\top` it is
:math:`e_H = \lVert GW\rVert_F^2 / \lVert GWW^\top\rVert_F`. With the thin SVD
:math:`W = \sum_i \sigma_i u_i r_i^\top`, :math:`\Pi = \sum_i u_i u_i^\top` and the energies
:math:`w_i = \lVert G u_i\rVert^2` of the gradient along :math:`u_i`,

.. math:: \frac{e_G}{e_H}
          = \underbrace{\frac{\lVert G\rVert_F}{\lVert G\Pi\rVert_F}}_{\text{kernel } = 1/c}
            \cdot
            \underbrace{\frac{\sqrt{\sum_i w_i\sigma_i^4\,\sum_i w_i}}{\sum_i w_i\sigma_i^2}}_{\text{anisotropy}}.

The kernel part is the whole ratio of an isotropic head (:math:`WW^\top = s^2\Pi`); the anisotropy
part is :math:`\sqrt{1 + \operatorname{Var}_w(\sigma^2)/\operatorname{E}_w(\sigma^2)^2} \ge 1`, the
spread of :math:`\sigma_i^2` under the gradient's energies. The factors come from
:func:`rankwall.theory.compression.efficiency_split`; the run reports them for random Gaussian heads,
low-rank heads W = AB, an isotropic control, and SmolLM2-135M's tied head on its own logit gradient
(spot check forward code, WikiText-2 validation text), beside the measured ratio of the loss
decreases at a small step (:func:`rankwall.theory.compression.loss_change_along`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs
from rankwall.theory import compression as cp
from rankwall.theory.validation import InputError

NAME = "efficiency-anatomy"
SUMMARY = "the update-efficiency ratio split into kernel (1/c) and anisotropy of W (seed 000, Figure 6)"

V_SYNTHETIC = 4096
TOKENS = 512
DIMENSIONS = (16, 64, 256)
#: Width of the low-rank heads W = AB (rank D <= WIDTH).
WIDTH = 256
MODEL_TOKENS = 256
#: Step sizes (fractions of the logit norm) at which the loss decreases are measured: the first
#: tests the first-order split, the second is the smallest step of the spot check's Figure 6.
FRACTIONS = (1e-6, 1e-4)
SPOT_TEXT = "wikitext-2.valid.txt"


def anatomy(H: np.ndarray, W: np.ndarray, targets: np.ndarray) -> dict[str, Any]:
    """The split of the first-order ratio for hidden states H, head W and targets, the measured
    ratio of the loss decreases at each of :data:`FRACTIONS`, where the head update's energy
    :math:`\\sum_i w_i\\sigma_i^4` sits, and the cosine of the top direction :math:`u_1` with the
    all-ones vector (to which every row of G is orthogonal)."""
    G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
    split = cp.efficiency_split(G, W)
    sigma, energies = split.singular_values, split.energies
    changes = cp.loss_change_along(H, W, targets, FRACTIONS)
    measured = [g / h for g, h in zip(changes["logit gradient"], changes["hidden-state update"], strict=True)]
    hidden = energies * sigma**4
    return {
        "V": int(W.shape[0]),
        "width": int(W.shape[1]),
        "rank": split.rank,
        "tokens": int(G.shape[0]),
        "total": split.total,
        "kernel": split.kernel,
        "anisotropy": split.anisotropy,
        "product_relative_error": abs(split.kernel * split.anisotropy / split.total - 1),
        "cosine": 1 / split.kernel,
        "measured_ratio": dict(zip([str(f) for f in FRACTIONS], measured, strict=True)),
        "sigma_max_over_median": float(sigma[0] / np.median(sigma)),
        "top_direction_share_of_gradient": float(energies[0] / energies.sum()),
        "top_direction_share_of_head_update": float(hidden[0] / hidden.sum()),
        "top_direction_cosine_with_ones": float(abs(split.top_direction.sum()) / np.sqrt(W.shape[0])),
    }


def isotropic_head(V: int, D: int, seed: int, scale: float = 3.0) -> np.ndarray:
    """``scale`` times a V x D matrix with orthonormal columns (all singular values equal)."""
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((V, D)))
    return scale * Q


def synthetic_heads(V: int, dimensions: tuple[int, ...], seed: int) -> list[tuple[str, int, np.ndarray]]:
    """(kind, D, W): Gaussian V x D heads, low-rank V x WIDTH heads of rank D (D < WIDTH), and one
    isotropic control at the largest D."""
    heads = [("random Gaussian", D, cp.construct_head(V, D, seed)) for D in dimensions]
    heads += [("low-rank W = AB", D, cp.construct_head(V, WIDTH, seed, rank=D)) for D in dimensions if D < WIDTH]
    heads.append(("isotropic control", dimensions[-1], isotropic_head(V, dimensions[-1], seed)))
    return heads


def head_count(dimensions: tuple[int, ...]) -> int:
    """How many heads :func:`synthetic_heads` builds (for a progress bar)."""
    return len(dimensions) + sum(D < WIDTH for D in dimensions) + 1


def smollm2(tokens: int, text: str | None = None, text_label: str = SPOT_TEXT) -> dict[str, Any]:
    """SmolLM2-135M's tied head on the logit gradient of its first ``tokens`` predictions of ``text``
    (named ``text_label``; the WikiText-2 validation text by default), hidden states from the spot
    check's forward pass."""
    from rankwall.checks.companion.data import read_corpus
    from rankwall.checks.models import spot
    from rankwall.checks.models.loading import load_causal_lm

    if text is None:
        text, text_label = read_corpus(SPOT_TEXT), SPOT_TEXT
    loaded = load_causal_lm("smollm2")
    ids = spot.read_tokens(loaded, text, text_label, tokens)
    H, _, _ = spot.forward_backward(loaded, ids, context=tokens)
    return {"kind": "SmolLM2-135M (tied)", "D": int(loaded.head.shape[1]), **anatomy(H, loaded.head, ids[1:])}


def run(
    *,
    V: int = V_SYNTHETIC,
    tokens: int = TOKENS,
    dimensions: tuple[int, ...] = DIMENSIONS,
    model_tokens: int | None = MODEL_TOKENS,
    seed: int = 0,
    on_head: Callable[[], None] | None = None,
    text_file: str | Path | None = None,
) -> dict[str, Any]:
    """Every synthetic head (on a synthetic batch of ``tokens`` Zipfian targets), then SmolLM2 on
    ``model_tokens`` tokens of ``text_file`` (a UTF-8 file, read first; the WikiText-2 validation text
    by default), skipped when ``model_tokens`` is None."""
    from rankwall.checks.companion.data import read_text_file

    if text_file is not None and model_tokens is None:
        raise InputError("--text: applies to the SmolLM2 row, which --no-model skips")
    started = time.perf_counter()
    text = None if text_file is None else read_text_file(text_file)
    rows = []
    for kind, D, W in synthetic_heads(V, dimensions, seed):
        H, targets = cp.construct_batch(tokens, W.shape[1], V, seed + 1)
        rows.append({"kind": kind, "D": D, **anatomy(H, W, targets)})
        if on_head is not None:
            on_head()
    if model_tokens is not None:
        rows.append(smollm2(model_tokens, text, SPOT_TEXT if text_file is None else str(text_file)))
        if on_head is not None:
            on_head()
    return {
        "fractions": list(FRACTIONS),
        "heads": rows,
        "seconds": time.perf_counter() - started,
        "peak_memory_mb": peak_memory_mb(),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """log10 of each head's ratio as a stacked bar: kernel (1/c) then anisotropy; a dot marks the
    measured ratio at the smallest step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads = result["heads"]
    labels = [f"{h['kind']}, D = {h['D']}" for h in heads]
    y = np.arange(len(heads))
    kernel = np.log10([h["kernel"] for h in heads])
    anisotropy = np.log10([h["anisotropy"] for h in heads])
    figure, ax = plt.subplots(figsize=(9, 0.45 * len(heads) + 1.5))
    ax.barh(y, kernel, color="tab:blue", label="kernel part 1/c")
    ax.barh(y, anisotropy, left=kernel, color="tab:orange", label="anisotropy part")
    measured = [np.log10(h["measured_ratio"][str(result["fractions"][0])]) for h in heads]
    ax.plot(measured, y, "k.", label=f"measured at step {result['fractions'][0]:g} x |Z|")
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="log10 of the update-efficiency ratio e_G / e_H", title="Figure 6's ratio: kernel x anisotropy")
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``efficiency_anatomy.json`` and ``efficiency_anatomy.png`` into ``out``."""
    return write_outputs(result, out, "efficiency_anatomy", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--V",
        type=integer_in(WIDTH, 1 << 20),
        default=V_SYNTHETIC,
        help=f"synthetic vocabulary (default {V_SYNTHETIC})",
    )
    parser.add_argument(
        "--tokens", type=integer_in(1, 100_000), default=TOKENS, help=f"synthetic tokens (default {TOKENS})"
    )
    parser.add_argument(
        "--model-tokens",
        type=integer_in(1, 8192),
        default=MODEL_TOKENS,
        help=f"SmolLM2 tokens (default {MODEL_TOKENS})",
    )
    parser.add_argument("--no-model", action="store_true", help="skip SmolLM2 (synthetic heads only)")
    parser.add_argument("--text", default=None, help=f"UTF-8 text file for SmolLM2 (default: the shipped {SPOT_TEXT})")


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment efficiency-anatomy``: run, write JSON and PNG, print a table (or the JSON)."""
    model_tokens = None if args.no_model else args.model_tokens
    total = head_count(DIMENSIONS) + (model_tokens is not None)
    with progress_bar(err) as progress:
        task = progress.add_task("efficiency-anatomy: heads", total=total)
        result = run(
            V=args.V,
            tokens=args.tokens,
            model_tokens=model_tokens,
            seed=args.seed,
            on_head=lambda: progress.advance(task),
            text_file=args.text,
        )
    json_path, png_path = write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title="Update-efficiency ratio e_G / e_H = kernel (1/c) x anisotropy")
    for column in ("head", "V", "D", "1/c", "anisotropy", "total", f"measured at {FRACTIONS[0]:g}"):
        table.add_column(column, justify="right")
    for h in result["heads"]:
        table.add_row(
            h["kind"],
            f"{h['V']:,}",
            str(h["D"]),
            f"{h['kernel']:.2f}",
            f"{h['anisotropy']:.2f}",
            f"{h['total']:.2f}",
            f"{h['measured_ratio'][str(FRACTIONS[0])]:.2f}",
        )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}")
