r"""A confident attention head is essential yet replaceable (seed 002), on SmolLM2-135M-Instruct.

Over ``windows`` windows of ``context`` predictions of held-out text (the shipped WikiText-2 test
split), one forward and backward pass of the unmodified model gives, for every head of every layer,
its attention rows p (recomputed in float64 from the model's scores) and the gradients of the mean
cross-entropy with respect to its probabilities :math:`g_p` and its scores :math:`g_z = J(p) g_p`.

1. *Choosing heads.* Per head, the median over query rows of :math:`m = \max_j p_j` and the share of
   rows (after each window's first) whose argmax key is the previous position. The ``heads`` heads
   with the largest product of the two are the confident previous-token heads; a baseline head is
   drawn with ``seed`` among the heads below the median of both.
2. *Interventions* on the head's output (its slice of the input of ``o_proj``): ``zero`` sets it to
   0, ``mean`` to its mean over every position of the text, and ``shift`` replaces its attention
   pattern by the constant shift-by-one pattern (query i reads the value of key i - 1, the first
   query its own), so the output is the previous position's value vector. Each is reported as the
   mean change of the per-token loss against the unmodified model (nats/token), with its standard
   error over the tokens.
3. *Gradient.* For each row :math:`\lVert g_z\rVert \le \lVert J\rVert_2 \lVert g_p\rVert` and
   :math:`m(1-m) \le \lVert J\rVert_2 \le 2m(1-m)`, so over the head's rows
   :math:`\lVert g_z\rVert_F \le (\sum_{\text{rows}} (2m(1-m))^2 \lVert g_p\rVert^2)^{1/2}`: a confident
   head's scores receive little gradient whatever reaches its probabilities.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.companion.data import read_corpus, read_text_file
from rankwall.checks.models.loading import DEFAULT_MODEL, LoadedModel, load_causal_lm
from rankwall.checks.models.spot import attention_rows, captured_attention, read_tokens
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs
from rankwall.theory.validation import InputError

NAME = "attention-heads"
SUMMARY = "confident previous-token heads of SmolLM2: ablated, mean-ablated, replaced by shift-by-one (seed 002)"

TEXT = "wikitext-2.test.txt"
WINDOWS = 2
CONTEXT = 256
HEADS = 3
INTERVENTIONS = ("zero", "mean", "shift")


def split_windows(ids: np.ndarray, windows: int, context: int) -> np.ndarray:
    """``windows`` consecutive, non-overlapping rows of ``context + 1`` ids (``context`` predictions each)."""
    if len(ids) < windows * (context + 1):
        raise InputError(f"--windows: {windows} windows of {context + 1} ids need more than the {len(ids)} given")
    return np.asarray(ids[: windows * (context + 1)], dtype=np.int64).reshape(windows, context + 1)


def _attention(model: Any, layer: int) -> Any:
    return model.model.layers[layer].self_attn


def _check_eager(model: Any) -> None:
    if getattr(model.config, "_attn_implementation", None) != "eager":
        raise InputError(
            "model: the attention probabilities are read from eager attention; load it with attn_implementation='eager'"
        )


@contextlib.contextmanager
def intervention(model: Any, layer: int, head: int, kind: str, mean: Any = None) -> Iterator[None]:
    """Inside the block, head ``head`` of layer ``layer`` outputs 0 (``zero``), ``mean`` at every
    position (``mean``), or the value vector of the previous position, the first position its own
    (``shift``: the attention pattern :math:`p_{i, i-1} = 1`)."""
    import torch

    if kind not in INTERVENTIONS:
        raise InputError(f"intervention: {kind!r} is not one of {', '.join(INTERVENTIONS)}")
    attention = _attention(model, layer)
    d = attention.head_dim
    if not 0 <= head < model.config.num_attention_heads:
        raise InputError(f"head: {head} is out of range (layer {layer} has {model.config.num_attention_heads} heads)")
    own = slice(head * d, (head + 1) * d)
    group = head // attention.num_key_value_groups  # the key/value head this head reads (repeat_kv)
    values: dict[str, Any] = {}
    handles = []
    if kind == "shift":
        handles.append(attention.v_proj.register_forward_hook(lambda module, i, o: values.__setitem__("v", o)))

    def replace(module: Any, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x = inputs[0].clone()
        if kind == "zero":
            x[..., own] = 0
        elif kind == "mean":
            x[..., own] = mean
        else:
            v = values["v"][..., group * d : (group + 1) * d]
            x[..., own] = torch.cat([v[:, :1], v[:, :-1]], dim=1)
        return (x, *inputs[1:])

    handles.append(attention.o_proj.register_forward_pre_hook(replace))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def token_losses(model: Any, windows: np.ndarray) -> np.ndarray:
    """The cross-entropy of every prediction of every window (float64 from the float32 model)."""
    import torch

    losses = []
    with torch.no_grad():
        for window in windows:
            ids = torch.as_tensor(window)[None, :]
            logits = model(input_ids=ids[:, :-1]).logits[0]
            losses.append(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none").double().numpy())
    return np.concatenate(losses)


def head_statistics(model: Any, windows: np.ndarray) -> dict[str, Any]:
    """One forward and backward pass of the mean loss per window: per layer and head, the rows of
    :func:`~rankwall.checks.models.spot.attention_rows` (each window's first row dropped from the
    previous-token share), the row norms of :math:`g_p` and :math:`g_z`, and the mean output of each
    head over every position (the input of ``o_proj``)."""
    import torch

    _check_eager(model)
    layers = model.config.num_hidden_layers
    N = windows.shape[0] * (windows.shape[1] - 1)
    per_window: list[list[dict[str, np.ndarray]]] = []
    outputs: list[list[Any]] = [[] for _ in range(layers)]
    handles = [
        _attention(model, layer).o_proj.register_forward_pre_hook(
            lambda module, inputs, layer=layer: outputs[layer].append(inputs[0].detach()[0])
        )
        for layer in range(layers)
    ]
    try:
        for window in windows:
            ids = torch.as_tensor(window)[None, :]
            with captured_attention() as records:
                logits = model(input_ids=ids[:, :-1]).logits[0]
                loss = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum") / N
                loss.backward()
            model.zero_grad(set_to_none=True)
            rows = []
            for scores, probabilities in records:
                row = attention_rows(scores, probabilities)
                row["g_p"] = np.linalg.norm(probabilities.grad[0].double().numpy(), axis=-1)
                row["g_z"] = np.linalg.norm(scores.grad[0].double().numpy(), axis=-1)
                row["previous_token"] = row["previous_token"][:, 1:]
                rows.append(row)
            per_window.append(rows)
    finally:
        for handle in handles:
            handle.remove()
    if len(per_window[0]) != layers:
        raise InputError(f"model: captured {len(per_window[0])} attention softmaxes for {layers} layers")
    stacked = {
        key: np.stack([np.concatenate([w[layer][key] for w in per_window], axis=1) for layer in range(layers)])
        for key in per_window[0][0]
    }
    d = _attention(model, 0).head_dim
    means = [torch.cat(o).mean(dim=0) for o in outputs]
    stacked["mean_output"] = [[m[h * d : (h + 1) * d] for h in range(model.config.num_attention_heads)] for m in means]
    return stacked


def head_table(stats: dict[str, Any]) -> list[dict[str, Any]]:
    r"""Per head: median m, previous-token share, the score gradient :math:`\lVert g_z\rVert_F`, the
    probability gradient :math:`\lVert g_p\rVert_F` and the bound
    :math:`(\sum (2m(1-m))^2 \lVert g_p\rVert^2)^{1/2} \ge \lVert g_z\rVert_F`."""
    layers, heads, _ = stats["m"].shape
    table = []
    for layer in range(layers):
        for head in range(heads):
            m, g_p, g_z = stats["m"][layer, head], stats["g_p"][layer, head], stats["g_z"][layer, head]
            table.append(
                {
                    "layer": layer,
                    "head": head,
                    "median_m": float(np.median(m)),
                    "previous_token_share": float(np.mean(stats["previous_token"][layer, head])),
                    "grad_scores_norm": float(np.linalg.norm(g_z)),
                    "grad_probabilities_norm": float(np.linalg.norm(g_p)),
                    "grad_scores_bound": float(np.linalg.norm(2 * m * (1 - m) * g_p)),
                    "median_jacobian_range": [float(np.median(m * (1 - m))), float(np.median(2 * m * (1 - m)))],
                    "jacobian_bound_violations": int(stats["bound_violation"][layer, head].sum()),
                }
            )
    return table


def choose_heads(table: list[dict[str, Any]], count: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``count`` heads with the largest median m x previous-token share, and a baseline drawn
    with ``seed`` among the heads below the median of both."""
    if count > len(table) - 1:
        raise InputError(f"--heads: {count} is more than the model's {len(table)} heads less the baseline")
    ranked = sorted(table, key=lambda h: -h["median_m"] * h["previous_token_share"])
    m_mid = np.median([h["median_m"] for h in table])
    share_mid = np.median([h["previous_token_share"] for h in table])
    chosen = ranked[:count]
    pool = [h for h in ranked[count:] if h["median_m"] < m_mid and h["previous_token_share"] < share_mid]
    pool = pool or ranked[count:]
    return chosen, pool[int(np.random.default_rng(seed).integers(len(pool)))]


def interventions(model: Any, windows: np.ndarray, head: dict[str, Any], mean: Any, base: np.ndarray) -> dict[str, Any]:
    """The mean change of the per-token loss under each intervention, with its standard error."""
    changes = {}
    for kind in INTERVENTIONS:
        with intervention(model, head["layer"], head["head"], kind, mean):
            delta = token_losses(model, windows) - base
        changes[kind] = {
            "loss_change": float(delta.mean()),
            "standard_error": float(delta.std(ddof=1) / np.sqrt(len(delta))),
        }
    return changes


def measure(
    model: Any, windows: np.ndarray, heads: int = HEADS, *, seed: int = 0, on_step: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Steps 1 to 3 of the module docstring on the id windows ``windows`` (rows of context + 1 ids)."""
    step = on_step or (lambda: None)
    stats = head_statistics(model, windows)
    step()
    table = head_table(stats)
    chosen, baseline = choose_heads(table, heads, seed)
    base = token_losses(model, windows)
    step()
    for role, head in [("chosen", h) for h in chosen] + [("baseline", baseline)]:
        head["role"] = role
        head["interventions"] = interventions(
            model, windows, head, stats["mean_output"][head["layer"]][head["head"]], base
        )
        step()
    return {
        "tokens": int(base.size),
        "loss": float(base.mean()),
        "chosen": chosen,
        "baseline": baseline,
        "heads": table,
    }


def run(
    loaded: LoadedModel,
    *,
    windows: int = WINDOWS,
    context: int = CONTEXT,
    heads: int = HEADS,
    seed: int = 0,
    on_step: Callable[[], None] | None = None,
    text: str | None = None,
    text_label: str = TEXT,
) -> dict[str, Any]:
    """:func:`measure` on the first ``windows`` x (``context`` + 1) tokens of ``text`` (named
    ``text_label`` in the record; the shipped WikiText-2 test split by default)."""
    started = time.perf_counter()
    if text is None:
        text, text_label = read_corpus(TEXT), TEXT
    ids = read_tokens(loaded, text, text_label, windows * (context + 1) - 1)
    record = {
        "model": loaded.source.name,
        "text": text_label,
        "windows": windows,
        "context": context,
        "seed": seed,
        **measure(loaded.model, split_windows(ids, windows, context), heads, seed=seed, on_step=on_step),
    }
    record["seconds"] = time.perf_counter() - started
    record["peak_memory_mb"] = peak_memory_mb()
    return record


def steps(heads: int) -> int:
    """How many times :func:`measure` calls ``on_step`` (for a progress bar)."""
    return heads + 3


def _label(head: dict[str, Any]) -> str:
    return f"L{head['layer']}.H{head['head']}"


def plot(record: dict[str, Any], path: Path) -> None:
    """Left: every head's median m against its previous-token share, the chosen and baseline heads
    marked. Middle: the loss change of each intervention. Right: score gradient against its bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    table = record["heads"]
    shown = record["chosen"] + [record["baseline"]]
    axes[0].scatter([h["median_m"] for h in table], [h["previous_token_share"] for h in table], s=10, color="grey")
    for h in shown:
        colour = "tab:red" if h["role"] == "chosen" else "tab:blue"
        axes[0].scatter(h["median_m"], h["previous_token_share"], s=40, color=colour)
        axes[0].annotate(_label(h), (h["median_m"], h["previous_token_share"]), fontsize=8)
    axes[0].set(xlabel="median top weight m", ylabel="previous-token share", title="heads (chosen red, baseline blue)")
    width = 0.8 / len(INTERVENTIONS)
    for i, kind in enumerate(INTERVENTIONS):
        x = np.arange(len(shown)) + (i - 1) * width
        y = [h["interventions"][kind]["loss_change"] for h in shown]
        e = [h["interventions"][kind]["standard_error"] for h in shown]
        axes[1].bar(x, y, width, yerr=e, label=kind)
    axes[1].set_xticks(np.arange(len(shown)), [f"{_label(h)}\n{h['role']}" for h in shown], fontsize=8)
    axes[1].axhline(0, color="grey", lw=0.5)
    axes[1].set(ylabel="loss change (nats/token)", title=f"interventions, {record['tokens']} tokens")
    axes[1].legend(fontsize=8)
    bound = [h["grad_scores_bound"] for h in table]
    axes[2].scatter(bound, [h["grad_scores_norm"] for h in table], s=10, color="grey")
    for h in shown:
        colour = "tab:red" if h["role"] == "chosen" else "tab:blue"
        axes[2].scatter(h["grad_scores_bound"], h["grad_scores_norm"], s=40, color=colour)
    low, high = min(bound), max(bound)
    axes[2].plot([low, high], [low, high], ":", color="grey", label="= bound")
    axes[2].set(xscale="log", yscale="log", xlabel="bound (sum (2m(1-m))^2 |g_p|^2)^1/2", ylabel="|d loss / d scores|")
    axes[2].set_title("gradient reaching each head's scores")
    axes[2].legend(fontsize=8)
    figure.suptitle(f"{record['model']}: {record['windows']} windows of {record['context']} tokens of {record['text']}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(record: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``attention_heads.json`` and ``attention_heads.png`` into ``out``."""
    return write_outputs(record, out, "attention_heads", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a Hugging Face model folder, a .gguf file, or smollm2")
    parser.add_argument(
        "--windows", type=integer_in(1, 64), default=WINDOWS, help=f"windows of text (default {WINDOWS})"
    )
    parser.add_argument(
        "--context", type=integer_in(2, 2048), default=CONTEXT, help=f"predictions per window (default {CONTEXT})"
    )
    parser.add_argument(
        "--heads", type=integer_in(1, 64), default=HEADS, help=f"confident heads to test (default {HEADS})"
    )
    parser.add_argument("--text", default=None, help=f"UTF-8 text file (default: the shipped {TEXT})")


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment attention-heads``: run, write JSON and PNG, print a table (or the JSON)."""
    text = None if args.text is None else read_text_file(args.text)  # checked before the model loads
    loaded = load_causal_lm(args.model)
    with progress_bar(err) as progress:
        task = progress.add_task("attention-heads", total=steps(args.heads))
        record = run(
            loaded,
            windows=args.windows,
            context=args.context,
            heads=args.heads,
            seed=args.seed,
            on_step=lambda: progress.advance(task),
            text=text,
            text_label=TEXT if args.text is None else str(args.text),
        )
    json_path, png_path = write(record, Path(args.out))
    if args.json:
        print(json.dumps(record, indent=2))
        return
    table = Table(title=f"{record['model']}: loss {record['loss']:.4f} nats/token on {record['tokens']} tokens")
    for column in (
        "head",
        "role",
        "median m",
        "prev. share",
        *(f"{k} (nats)" for k in INTERVENTIONS),
        "|g_z|",
        "bound",
    ):
        table.add_column(column, justify="right")
    for h in record["chosen"] + [record["baseline"]]:
        changes = [f"{h['interventions'][k]['loss_change']:+.4f}" for k in INTERVENTIONS]
        table.add_row(
            _label(h),
            h["role"],
            f"{h['median_m']:.3f}",
            f"{h['previous_token_share']:.3f}",
            *changes,
            f"{h['grad_scores_norm']:.2e}",
            f"{h['grad_scores_bound']:.2e}",
        )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}")
