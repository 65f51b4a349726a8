r"""Spot checks of the theory on a real model's own logits, head and attention (``rankwall spot``).

On N tokens of real text, with the model's final hidden states H (float32 forward, then float64),
its head W and the next tokens t:

- *Eq. 1* (seed 000, §3.3): the logit gradient :math:`G = (\operatorname{softmax}(HW^\top) - E_t)/N`
  of the mean cross-entropy, and the share of its norm in :math:`\ker W^\top` with the cosine of
  what survives, in the three labelled variants of :mod:`rankwall.theory.compression`;
- *Figure 7*: the certified rank of the first n rows of G for n = 16, 32, ..., N and the singular
  components that hold 70% and 99.9% of its norm;
- *Figure 6* (§3.4): the change of the batch loss when the logits move by a fraction of their norm
  along :math:`-G` and along :math:`-GWW^\top` (the move a step on H makes);
- *seed 002*, for every attention head: from the attention probabilities p (recomputed in float64
  from the model's scores), the gradient reaching them :math:`g_p` and the autograd gradient of the
  scores :math:`g_z`: the median largest probability m, the gain
  :math:`\lVert J(p) g_p\rVert / \lVert g_p\rVert` against :math:`2m(1-m)` (pooled log-log slope
  and constant), the share of rows with m > 0.9, the row sums of :math:`g_z` against the float32
  rounding bound, and the rows where :math:`m(1-m) \le \lVert J\rVert \le 2m(1-m)` or
  gain :math:`\le \lVert J \rVert` fails (expected: none);
- *seed 001, Corollary 1*: the certified rank of the model's own log P (both ends, D + 1 for a
  softmax head) and the hidden size read off its centred outputs, beside a random head and the head
  with a bias (:mod:`rankwall.checks.models.logprob_rank`);
- the unargmaxable tokens of the head (:func:`rankwall.theory.expressivity.argmaxable`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rankwall.checks import exact
from rankwall.checks.engine import tolerance
from rankwall.checks.experiments.batch_rank import components_for
from rankwall.checks.models import logprob_rank
from rankwall.checks.models.loading import LoadedModel

# output_folder moved to outputs (argmax's --certificates uses it too); spot.output_folder stays its name here.
from rankwall.checks.run.outputs import output_folder as output_folder
from rankwall.checks.run.outputs import peak_memory_mb, write_outputs
from rankwall.theory import compression as cp
from rankwall.theory import expressivity as ex
from rankwall.theory import softmax_jacobian as sj
from rankwall.theory.validation import InputError

#: Fractions of the logit norm along which the Figure 6 loss changes are measured.
UPDATE_FRACTIONS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
#: What the paper reports for Eq. 1 across GPT-2, Pythia, Llama 3, OLMo 2 and Qwen 3 (Fig. 4).
PAPER_DESTROYED = (0.95, 0.99)
PAPER_COSINE = (0.1, 0.3)
F32 = 2.0**-24
#: Float32 autograd forms g_z = p * (g_p - s) with s = sum_j p_j g_p,j, from probabilities that sum
#: to 1 within gamma_{n+2}. Then |sum_j g_z,j| <= |sum p g - s| + |s| |1 - sum p| + the rounding of
#: each product and of the final sum <= (3 gamma_n + gamma_{n+2} + 2 gamma_2) S <= 6 gamma_{n+2} S,
#: S = sum_j p_j |g_p,j|: a row sum below that is zero to float32 rounding.
ROW_SUM_FACTOR = 6
F64 = tolerance.unit_roundoff(np.float64)


def read_tokens(loaded: LoadedModel, text: str, label: str, tokens: int) -> np.ndarray:
    """The first ``tokens + 1`` token ids of ``text`` (N predictions need N + 1 ids)."""
    return token_ids(loaded.tokenizer, text, label, tokens)


def token_ids(tokenizer: Any, text: str, label: str, tokens: int) -> np.ndarray:
    """The first ``tokens + 1`` ids of ``text`` under ``tokenizer`` (N predictions need N + 1 ids); a
    text that holds fewer is an :class:`InputError` naming ``--text``."""
    # Tokenize a prefix that is long enough (a token is rarely more than 16 characters here).
    length = min(len(text), 16 * (tokens + 1) + 1024)
    ids = np.asarray(tokenizer(text[:length])["input_ids"], dtype=np.int64)
    if len(ids) < tokens + 1:
        raise InputError(f"--text: {label} holds {len(ids)} tokens, fewer than --tokens {tokens} + 1")
    return ids[: tokens + 1]


#: What :func:`spot` does, in order, as it names each step to ``on_step`` (the two optional ones last
#: in their place: the rank of log P and the unargmaxable tokens).
STEPS = (
    "forward and backward passes",
    "rank of the model's log-probabilities",
    "Eq. 1: projecting the logit gradient",
    "Figure 7: rank of the logit gradient",
    "Figure 6: update efficiency",
    "unargmaxable tokens of the head",
)


def steps(*, argmax: bool = True, log_probability_rank: bool = True) -> list[str]:
    """The steps :func:`spot` announces with these options, in order."""
    skipped = {STEPS[1]} if not log_probability_rank else set()
    skipped |= {STEPS[5]} if not argmax else set()
    return [step for step in STEPS if step not in skipped]


@contextlib.contextmanager
def captured_attention() -> Iterator[list[tuple[Any, Any]]]:
    """Record ``(scores, probabilities)`` of every 4-D softmax in the forward pass (the attention
    softmax of eager attention), both retaining their gradients."""
    import torch

    original = torch.nn.functional.softmax
    records: list[tuple[Any, Any]] = []

    def recording(x: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(x, *args, **kwargs)
        if x.ndim == 4 and x.requires_grad:
            x.retain_grad()
            out.retain_grad()
            records.append((x, out))
        return out

    torch.nn.functional.softmax = recording
    try:
        yield records
    finally:
        torch.nn.functional.softmax = original


def attention_rows(scores: Any, probabilities: Any) -> dict[str, np.ndarray]:
    """Per-row quantities of one layer's attention, shape (heads, rows)."""
    heads, n = scores.shape[1], scores.shape[-1]
    z = scores.detach().double().numpy().reshape(heads * n, n)
    g_p = probabilities.grad.double().numpy().reshape(heads * n, n)
    g_z = scores.grad.double().numpy().reshape(heads * n, n)
    rows = sj.softmax_rows(z)
    m = np.asarray(rows.top)
    norm_J = np.asarray(sj.spectral_norm(rows))
    incoming = np.linalg.norm(g_p, axis=1)
    outgoing = np.linalg.norm(np.asarray(sj.jvp(rows, g_p)), axis=1)
    gain = np.divide(outgoing, incoming, out=np.zeros_like(outgoing), where=incoming > 0)
    # Rounding of the float64 Jacobian quantities: gamma_{n+4} relative to m or to ||J||.
    slack = tolerance.gamma(n + 4, F64)
    lower, upper = m * (1 - m), 2 * m * (1 - m)
    bound_violation = (norm_J < lower * (1 - slack) - slack) | (norm_J > upper * (1 + slack) + slack)
    gain_violation = gain > norm_J * (1 + slack) + slack
    # Row sums of the autograd score gradient, against the row's own scale S = sum_j p_j |g_p,j|.
    p32 = probabilities.detach().double().numpy().reshape(heads * n, n)
    scale = (p32 * np.abs(g_p)).sum(axis=1)
    row_sum = np.divide(np.abs(g_z.sum(axis=1)), scale, out=np.zeros_like(scale), where=scale > 0)
    shaped = {
        "m": m,
        "gain": gain,
        "capacity": upper,
        "row_sum": row_sum,
        "row_sum_within_rounding": row_sum <= ROW_SUM_FACTOR * tolerance.gamma(n + 2, F32),
        "bound_violation": bound_violation,
        "gain_violation": gain_violation,
        "previous_token": (np.asarray(rows.top_index) == (np.arange(heads * n) % n) - 1),
    }
    return {k: v.reshape(heads, n) for k, v in shaped.items()}


def forward_backward(
    loaded: LoadedModel,
    ids: np.ndarray,
    context: int,
    on_window: Callable[[], None] | None = None,
    on_logits: Callable[[np.ndarray], None] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray], float]:
    """Run the model over windows of ``context`` predictions: the final hidden states (float64),
    per-layer attention rows (layers, heads, all rows) and the float32 mean loss. ``on_logits`` receives
    each window's float32 logits (a NumPy copy), as the model computed them."""
    import torch

    N = len(ids) - 1
    hidden: list[np.ndarray] = []
    per_layer: list[list[dict[str, np.ndarray]]] = []
    total_loss = 0.0
    for start in range(0, N, context):
        window = torch.as_tensor(ids[start : min(start + context, N) + 1])[None, :]
        inputs, targets = window[:, :-1], window[0, 1:]
        with captured_attention() as records:
            state = loaded.model.model(input_ids=inputs).last_hidden_state
            logits = loaded.model.get_output_embeddings()(state)[0]
            loss = torch.nn.functional.cross_entropy(logits, targets, reduction="sum") / N
            loss.backward()
        loaded.model.zero_grad(set_to_none=True)
        total_loss += float(loss.detach())
        hidden.append(state.detach()[0].double().numpy())
        if on_logits is not None:
            on_logits(logits.detach().numpy().copy())
        per_layer.append([attention_rows(s, p) for s, p in records])
        if on_window is not None:
            on_window()
    layers = len(per_layer[0])
    attention = {
        key: np.stack([np.concatenate([w[layer][key] for w in per_layer], axis=1) for layer in range(layers)])
        for key in per_layer[0][0]
    }
    return np.concatenate(hidden), attention, total_loss


def gradient_rank(G: np.ndarray, sizes: list[int]) -> list[dict[str, Any]]:
    """Figure 7: certified rank and the components holding 70% and 99.9% of the norm of G[:n]."""
    rows = []
    for n in sizes:
        block = G[:n]
        rank, _, sigma = exact.weyl_rank_lower_bound(block, F64, forming_norm=float(np.linalg.norm(block)))
        rows.append(
            {
                "tokens": n,
                "certified_rank": rank,
                "components_70": components_for(sigma, 0.7),
                "components_99.9": components_for(sigma, 0.999),
            }
        )
    return rows


def attention_summary(attention: dict[str, np.ndarray]) -> dict[str, Any]:
    """Seed 002's table: per head, and pooled over every row of every head."""
    layers, heads, _ = attention["m"].shape
    per_head = []
    for layer in range(layers):
        for head in range(heads):
            a = {k: v[layer, head] for k, v in attention.items()}
            per_head.append(
                {
                    "layer": layer,
                    "head": head,
                    "median_m": float(np.median(a["m"])),
                    "median_gain": float(np.median(a["gain"])),
                    "share_m_above_0.9": float(np.mean(a["m"] > 0.9)),
                    "previous_token_share": float(np.mean(a["previous_token"])),
                }
            )
    gain, capacity = attention["gain"].ravel(), attention["capacity"].ravel()
    usable = (gain > 0) & (capacity > 0)
    slope, intercept = np.polyfit(np.log(capacity[usable]), np.log(gain[usable]), 1)
    return {
        "rows": int(attention["m"].size),
        "median_m": float(np.median(attention["m"])),
        "share_m_above_0.9": float(np.mean(attention["m"] > 0.9)),
        "gain_vs_capacity_log_slope": float(slope),
        "gain_vs_capacity_constant": float(np.exp(intercept)),
        "row_sum_median": float(np.median(attention["row_sum"])),
        "row_sum_max": float(np.max(attention["row_sum"])),
        "rows_summing_to_zero_within_float32_rounding": int(attention["row_sum_within_rounding"].sum()),
        "jacobian_bound_violations": int(attention["bound_violation"].sum()),
        "gain_above_norm_violations": int(attention["gain_violation"].sum()),
        "heads": per_head,
    }


def spot(
    loaded: LoadedModel,
    text: str,
    tokens: int = 1024,
    *,
    context: int = 512,
    argmax: bool = True,
    text_label: str = "text",
    on_step: Callable[[str], None] | None = None,
    log_probability_rank: bool = True,
    ids: np.ndarray | None = None,
) -> dict[str, Any]:
    """Every spot check on ``tokens`` predictions of ``text`` (named ``text_label`` in the
    record); returns a JSON-ready record. ``log_probability_rank`` certifies the rank of the model's
    log P (:mod:`rankwall.checks.models.logprob_rank`; a minute and a half at 1,024 tokens).
    ``on_step`` hears the name of each step of :func:`steps` as it starts; ``ids`` are the text's
    :func:`token_ids` when the caller has them already."""
    step = on_step or (lambda description: None)
    started = time.perf_counter()
    if ids is None:
        ids = read_tokens(loaded, text, text_label, tokens)
    step(STEPS[0])
    logits: list[np.ndarray] = []
    H, attention, model_loss = forward_backward(loaded, ids, context, on_logits=logits.append)
    W = loaded.head
    ranks = None
    if log_probability_rank:  # first, while the memory the later steps take is still free
        step(STEPS[1])
        ranks = logprob_rank.log_probability_rank(H, W, loaded.head_bias, np.concatenate(logits)).to_json()
    del logits
    targets = ids[1:]
    step(STEPS[2])
    Q, rank = cp.column_basis(W)
    G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
    eq1 = cp.compression([G], Q)
    step(STEPS[3])
    sizes = sorted({min(tokens, 1 << k) for k in range(4, 1 + int(np.log2(max(tokens, 16))) + 1)} | {tokens})
    rank_rows = gradient_rank(G, sizes)
    del G
    step(STEPS[4])
    curves = cp.loss_change_along(H, W, targets, UPDATE_FRACTIONS)
    record: dict[str, Any] = {
        "model": loaded.source.name,
        "text": text_label,
        "tokens": tokens,
        "V": int(W.shape[0]),
        "D": int(W.shape[1]),
        "tied_head": loaded.tied,
        "head_rank": rank,
        "loss_float32_model": model_loss,
        "loss_float64": cp.cross_entropy(H @ W.T, targets),
        "eq1": {
            "destroyed": eq1.destroyed,
            "cosine": eq1.cosine,
            "destroyed_squared": eq1.destroyed_squared,
            "destroyed_per_token": eq1.destroyed_per_token,
            "cosine_per_token": eq1.cosine_per_token,
            "paper_destroyed_range": list(PAPER_DESTROYED),
            "paper_cosine_range": list(PAPER_COSINE),
        },
        "gradient_rank": rank_rows,
        "update_efficiency": {"fractions": list(UPDATE_FRACTIONS), **curves},
        "attention": attention_summary(attention),
    }
    if ranks is not None:
        record["log_probability_rank"] = ranks
    if argmax:
        step(STEPS[5])
        argmax_started = time.perf_counter()
        decided = ex.argmaxable(W)
        record["unargmaxable"] = np.flatnonzero(decided["never"]).tolist()
        record["argmax_undecided"] = np.flatnonzero(~decided["argmaxable"] & ~decided["never"]).tolist()
        record["argmax_methods"] = {
            str(m): int(n) for m, n in zip(*np.unique(decided["method"], return_counts=True), strict=True)
        }
        record["argmax_seconds"] = time.perf_counter() - argmax_started
    record["seconds"] = time.perf_counter() - started
    record["peak_memory_mb"] = peak_memory_mb()
    return record


def plot(record: dict[str, Any], path: Path) -> None:
    """Four panels: Figure 7 (rank and components), Figure 6 (loss change), Eq. 1 beside the
    paper's range, and each attention head's median gain against its capacity 2m(1 - m)."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(19, 4.2))
    ranks = record["gradient_rank"]
    n = [r["tokens"] for r in ranks]
    # The reference first, wide and pale, under the data: a full-rank curve runs along it, visibly.
    axes[0].plot(n, n, "-", color="grey", linewidth=7, alpha=0.3, solid_capstyle="butt", label="rank = tokens")
    axes[0].plot(n, [r["certified_rank"] for r in ranks], "o-", label="certified rank")
    axes[0].plot(n, [r["components_99.9"] for r in ranks], "s--", label="components for 99.9%")
    axes[0].plot(n, [r["components_70"] for r in ranks], "^--", label="components for 70%")
    axes[0].set(xscale="log", yscale="log", xlabel="tokens", title="logit gradient (Fig. 7)")
    ticks = token_ticks(n)
    axes[0].set_xticks(ticks, [str(t) for t in ticks])
    axes[0].xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    axes[0].legend(fontsize=8)
    eff = record["update_efficiency"]
    for name in ("logit gradient", "hidden-state update"):
        axes[1].plot(eff["fractions"], [-x for x in eff[name]], "o-", label=f"along {name}")
    axes[1].set(xscale="log", yscale="log", xlabel="update norm / logit norm", ylabel="loss decrease")
    axes[1].set_title("update efficiency (Fig. 6)")
    axes[1].legend(fontsize=8)
    eq1 = record["eq1"]
    # The model's shares beside the paper's ranges, each a bar of its own: nothing drawn over anything.
    where = np.arange(2)
    measured = [eq1["destroyed"], eq1["cosine"]]
    axes[2].bar(where - 0.2, measured, width=0.38, color=["tab:red", "tab:green"], label=record["model"].split()[0])
    low, high = zip(PAPER_DESTROYED, PAPER_COSINE, strict=True)
    axes[2].bar(
        where + 0.2,
        np.subtract(high, low),
        bottom=low,
        width=0.38,
        color="none",
        edgecolor=["tab:red", "tab:green"],
        hatch="///",
        label="paper's range (Fig. 4)",
    )
    for x, value in zip(where - 0.2, measured, strict=True):
        axes[2].annotate(f"{value:.3f}", (x, value), ha="center", va="bottom", fontsize=8)
    axes[2].set_xticks(where, ["destroyed", "cosine"])
    axes[2].set(ylim=(0, 1.12), title=f"Eq. 1, D = {record['D']}, V = {record['V']}")
    axes[2].legend(fontsize=8, loc="upper right")
    heads = record["attention"]["heads"]
    capacity = [2 * h["median_m"] * (1 - h["median_m"]) for h in heads]
    axes[3].scatter(capacity, [h["median_gain"] for h in heads], s=10)
    axes[3].plot([1e-4, 0.5], [1e-4, 0.5], ":", color="grey", label="gain = 2m(1 - m)")
    axes[3].set(xscale="log", yscale="log", xlabel="2m(1 - m) at the median m", ylabel="median gain")
    axes[3].set_title("attention heads (seed 002)")
    axes[3].legend(fontsize=8)
    fig.suptitle(f"{record['model']}: {record['tokens']} tokens of {Path(record['text']).name}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def token_ticks(sizes: list[int]) -> list[int]:
    """Where to label the tokens axis of Figure 7: the sizes measured (powers of two, then the run's
    own size), less a power of two that sits within half an octave below the last size, whose label
    would run into it."""
    ticks = sorted(set(sizes))
    if len(ticks) >= 2 and math.log2(ticks[-1] / ticks[-2]) < 0.5:
        del ticks[-2]
    return ticks


def write(record: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """``spot.json`` and ``spot.png`` in ``out``."""
    return write_outputs(record, out, "spot", plot)
