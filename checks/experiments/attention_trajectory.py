r"""When a head commits (seed 002, "When the commitment happened"): its 816,128-parameter model trained afresh.

Seed 002's character-level Transformer (:mod:`rankwall.checks.models.tiny`: four blocks, four heads,
width 128, context 64; 816,128 parameters at V = 65) is trained on the shipped tinyshakespeare (the
first 90% of its characters; the last 10% are held out) for 1,200 steps under a fixed seed, with
:class:`rankwall.monitor.Monitor` recording every head on the training batch every 40 steps and the
held-out loss logged beside it. From the records:

1. *Which head commits, and when*: the head with the largest final median m; the step where its median
   m first reaches :data:`COMMIT_FROM` (the seed's crossing starts at 0.21) and the step where it first
   reaches :data:`COMMITTED` (0.9), with its previous-token share at both;
2. *Its routing gradient*: the record where its median realised gain peaks, and the median m there
   (where the gain turns over; the seed: 0.0358 near step 200, at m = 0.21), and the gain at the end;
3. *How long it holds*: the first record from which its median m stays within :data:`HOLD_WITHIN`
   (0.010) of its final value, the steps from there to the end, and the held-out loss over that span;
4. *The control head*: among the others, the head with the largest final previous-token share (the
   one that found the same rule), its final m and share, its share where the committed head's hold
   begins, and its final gain over the committed head's.

At the end, on held-out text (one batch of 6 x 8 sequences, the seed's survey: 48,384 rows with a
gradient): the log-log fit of the realised gain on :math:`2m(1-m)` over all rows, the heads ranked by
median gain, and the ablations, each the mean change of the held-out loss over :data:`DRAWS` draws of
:data:`COUNT` batches of :data:`SIZE` sequences, paired with the unmodified model, with its standard
deviation over the draws: zero the committed head, replace its attention by the fixed shift-by-one
pattern, zero the control head, and zero a same-layer head that follows no such rule (the seed's
control for the ablation). The final weights are saved (safetensors) with their sha256;
``--weights FILE`` re-runs the static analysis on them without training.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.companion.data import characters, read_corpus
from rankwall.checks.models import tiny
from rankwall.checks.run.outputs import cpu_seconds, peak_memory_mb, progress_bar, write_bytes, write_outputs
from rankwall.theory.validation import InputError

NAME = "attention-trajectory"
SUMMARY = "seed 002's 816k-parameter model trained afresh on tinyshakespeare, every head monitored every 40 steps"

STEPS = 1200
EVERY = 40
BATCH = 32
LEARNING_RATE = 1e-3
#: Held-out batches (of BATCH sequences) whose mean loss is logged at every record.
EVAL_BATCHES = 4
#: The final survey: one batch of 6 x 8 held-out sequences (seed 002: 6 batches of 8).
SURVEY_SEQUENCES = 48
#: Rows per head kept from the survey for the final scatter of gain against capacity.
SURVEY_SAMPLE = 256
#: The ablations (seed 002: draws=8, count=10, size=16).
DRAWS, COUNT, SIZE = 8, 10, 16
#: Rows per head kept in each record for the scatter of gain against capacity.
SAMPLE = 16
#: Median m where the crossing starts, where the head counts as committed, and how close to its final
#: value it must stay to hold (seed 002: 0.21 -> 0.97 between steps 200 and 400; within 0.010 after).
COMMIT_FROM, COMMITTED, HOLD_WITHIN = 0.2, 0.9, 0.01
#: Final previous-token share from which a head counts as having found the previous-token rule.
SAME_RULE = 0.5
#: Intra-op threads for the run (restored afterwards): the model's matrices are small, a fork/join on two
#: busy cores costs more than it gains, and one thread fixes the order of every reduction.
THREADS = 1


@contextlib.contextmanager
def threads(count: int = THREADS) -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def corpus() -> tuple[np.ndarray, np.ndarray, int]:
    """Training and held-out character ids of tinyshakespeare (90% / 10%) and the vocabulary size."""
    stream = characters(read_corpus("tinyshakespeare.txt"))
    split = int(0.9 * len(stream.ids))
    return stream.ids[:split], stream.ids[split:], stream.V


def train(
    model: Any,
    train_ids: np.ndarray,
    valid_ids: np.ndarray,
    *,
    steps: int,
    every: int,
    seed: int,
    batch: int = BATCH,
    learning_rate: float = LEARNING_RATE,
    jsonl: Path | None = None,
    on_step: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """AdamW on random training windows; the monitor records steps 0, every, 2 every, ... and the last,
    each with the training loss and the held-out loss. Returns the records."""
    import torch

    from rankwall.monitor import Monitor

    evaluation = tiny.fixed_batches(valid_ids, model.config.context, batch, EVAL_BATCHES, seed + 2)
    stream = tiny.batches(train_ids, model.config.context, batch, seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    recorded = {*range(0, steps + 1, every), steps}
    with Monitor(model, steps=recorded, path=jsonl, sample=SAMPLE, seed=seed) as monitor:
        for step in range(steps + 1):
            x, y = next(stream)
            valid = tiny.mean_loss(model, evaluation) if monitor.records_step(step) else None
            with monitor.step(step) as log:
                loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
                loss.backward()
                if log.recording:
                    log.log(loss=loss.item(), valid_loss=valid)
            if step < steps:  # the last record measures the final weights
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if on_step is not None:
                on_step()
    return monitor.records


def survey(model: Any, valid_ids: np.ndarray, seed: int, sequences: int = SURVEY_SEQUENCES) -> dict[str, Any]:
    """One monitored forward and backward pass over ``sequences`` held-out sequences (no update)."""
    import torch

    from rankwall.monitor import Monitor

    [(x, y)] = tiny.fixed_batches(valid_ids, model.config.context, sequences, 1, seed + 3)
    with Monitor(model, steps={0}, sample=SURVEY_SAMPLE, seed=seed) as monitor, monitor.step(0) as log:
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        log.log(loss=loss.item())
    model.zero_grad(set_to_none=True)
    return monitor.records[0]


def ablations(
    model: Any,
    valid_ids: np.ndarray,
    targets: dict[str, tuple[int, int, str]],
    seed: int,
    *,
    draws: int = DRAWS,
    count: int = COUNT,
    size: int = SIZE,
) -> dict[str, Any]:
    """Per intervention (name -> (layer, head, "zero" | "shift")): the held-out loss change against the
    unmodified model, paired on the same batches, its mean and standard deviation over ``draws`` draws
    of ``count`` batches of ``size`` sequences."""
    deltas: dict[str, list[float]] = {name: [] for name in targets}
    baselines = []
    for draw in range(draws):
        evaluation = tiny.fixed_batches(valid_ids, model.config.context, size, count, seed + 100 + draw)
        base = tiny.mean_loss(model, evaluation)
        baselines.append(base)
        for name, (layer, head, kind) in targets.items():
            with model.blocks[layer].attention.intervene(head, kind):
                deltas[name].append(tiny.mean_loss(model, evaluation) - base)
    result: dict[str, Any] = {"baseline": float(np.mean(baselines)), "draws": draws, "count": count, "size": size}
    for name, (layer, head, kind) in targets.items():
        d = np.array(deltas[name])
        result[name] = {
            "layer": layer,
            "head": head,
            "intervention": kind,
            "delta": float(d.mean()),
            "sd": float(d.std(ddof=1)) if draws > 1 else None,
        }
    return result


# --------------------------------------------------------------------------- reading the records


def series(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per head (``"layer.head"``) its median m, median gain and previous-token share at each record,
    and the logged losses."""
    heads: dict[str, dict[str, list]] = {}
    for record in records:
        for h in record["attention"]["heads"]:
            entry = heads.setdefault(f"{h['layer']}.{h['head']}", {"median_m": [], "median_gain": [], "previous": []})
            entry["median_m"].append(h["median_m"])
            entry["median_gain"].append(h["median_gain"])
            entry["previous"].append(h["previous_token_share"])
    return {
        "steps": [r["step"] for r in records],
        "loss": [r["scalars"].get("loss") for r in records],
        "valid_loss": [r["scalars"].get("valid_loss") for r in records],
        "heads": heads,
    }


def _first(steps: list[int], values: list[float], predicate: Callable[[float], bool]) -> int | None:
    return next((i for i, v in enumerate(values) if predicate(v)), None)


def choose_heads(final: dict[str, tuple[float, float | None]]) -> tuple[str, str]:
    """``(committed, control)`` from each head's final (median m, previous-token share): the committed
    head is the most confident of the heads that found the previous-token rule (share >= SAME_RULE;
    the most confident head of all when none did), the control the other head with the largest
    previous-token share (the one that found the same rule, when one did)."""
    share = {k: v[1] or 0.0 for k, v in final.items()}
    rule = [k for k in final if share[k] >= SAME_RULE] or list(final)
    committed = max(rule, key=lambda k: final[k][0])
    control = max((k for k in final if k != committed), key=lambda k: share[k])
    return committed, control


def commitment(trajectory: dict[str, Any]) -> dict[str, Any]:
    """The committed head (:func:`choose_heads` at the last record): its crossing window, the peak of its
    routing gradient and the m there, how long it then holds; and the control head."""
    steps, heads = trajectory["steps"], trajectory["heads"]
    name, control = choose_heads({k: (h["median_m"][-1], h["previous"][-1]) for k, h in heads.items()})
    h, c = heads[name], heads[control]
    start = _first(steps, h["median_m"], lambda m: m >= COMMIT_FROM)
    end = _first(steps, h["median_m"], lambda m: m >= COMMITTED)
    peak = int(np.argmax(h["median_gain"]))
    final_m = h["median_m"][-1]
    outside = [i for i, m in enumerate(h["median_m"]) if abs(m - final_m) > HOLD_WITHIN]
    hold = outside[-1] + 1 if outside else 0
    early = min(3, len(steps) - 1)  # step 120 of a default run (seed 002: "for the first 120 steps")

    def at(key: str, i: int | None) -> float | None:
        return None if i is None else h[key][i]

    return {
        "head": name,
        "previous_token_head": (h["previous"][-1] or 0.0) >= SAME_RULE,
        "early": {"step": steps[early], "median_m": h["median_m"][early], "previous": h["previous"][early]},
        "committed": end is not None,
        "window": [None if start is None else steps[start], None if end is None else steps[end]],
        "m_at_window": [at("median_m", start), at("median_m", end)],
        "previous_at_window": [at("previous", start), at("previous", end)],
        "peak_gain": h["median_gain"][peak],
        "peak_step": steps[peak],
        "m_at_peak": h["median_m"][peak],
        "final_m": final_m,
        "final_gain": h["median_gain"][-1],
        "final_previous": h["previous"][-1],
        "hold_from": steps[hold],
        "hold_steps": steps[-1] - steps[hold],
        "valid_loss_over_hold": [trajectory["valid_loss"][hold], trajectory["valid_loss"][-1]],
        "control": {
            "head": control,
            "found_the_same_rule": (c["previous"][-1] or 0.0) >= SAME_RULE,
            "final_m": c["median_m"][-1],
            "final_previous": c["previous"][-1],
            "previous_over_hold": [c["previous"][hold], c["previous"][-1]],
            "final_gain_over_committed": c["median_gain"][-1] / h["median_gain"][-1] if h["median_gain"][-1] else None,
        },
    }


def _same_layer_other(heads: list[dict[str, Any]], layer: int, exclude: set[int]) -> int:
    """The head of ``layer`` outside ``exclude`` with the smallest previous-token share."""
    candidates = [h for h in heads if h["layer"] == layer and h["head"] not in exclude]
    return min(candidates, key=lambda h: h["previous_token_share"] or 0.0)["head"]


def static(
    model: Any,
    valid_ids: np.ndarray,
    seed: int,
    *,
    heads: tuple[str, str] | None = None,
    sequences: int = SURVEY_SEQUENCES,
    draws: int = DRAWS,
    count: int = COUNT,
    size: int = SIZE,
) -> dict[str, Any]:
    """The survey of the final model (fit, ranking by gain, the most confident head and its gain ratios)
    and the ablations of ``heads`` = (committed, control) (by default :func:`choose_heads` on the survey):
    zero the committed head, shift-by-one in its place, zero the control, and zero the head of the
    committed head's layer with the smallest previous-token share."""
    record = survey(model, valid_ids, seed, sequences)
    found = {f"{h['layer']}.{h['head']}": h for h in record["attention"]["heads"]}
    committed, control = heads or choose_heads(
        {k: (h["median_m"], h["previous_token_share"]) for k, h in found.items()}
    )
    top = max(found.values(), key=lambda h: h["median_m"])
    others = sorted(h["median_gain"] for h in found.values() if h is not top)
    layer, head = map(int, committed.split("."))
    control_layer, control_head = map(int, control.split("."))
    exclude = {head} | ({control_head} if control_layer == layer else set())
    quiet = min(
        (h for h in found.values() if h["layer"] == layer and h["head"] not in exclude),
        key=lambda h: h["previous_token_share"] or 0.0,
    )["head"]
    targets = {
        "zero": (layer, head, "zero"),
        "shift": (layer, head, "shift"),
        "zero_control": (control_layer, control_head, "zero"),
        "zero_same_layer_head": (layer, quiet, "zero"),
    }
    keys = ("layer", "head", "median_m", "median_gain", "share_m_above_0.9", "previous_token_share")
    return {
        "rows": record["attention"]["rows"],
        "fit": record["attention"]["fit"],
        "checks": record["checks"],
        "violations": record["violations"],
        "undecided": record["undecided"],
        "ranking": [{k: h[k] for k in keys} for h in sorted(found.values(), key=lambda h: h["median_gain"])],
        "committed": committed,
        "control": control,
        "most_confident": f"{top['layer']}.{top['head']}",
        "gain_ratio_to_next_lowest": others[0] / top["median_gain"],
        "gain_ratio_to_softest": others[-1] / top["median_gain"],
        "sample": [{"capacity": h["sample"]["capacity"], "gain": h["sample"]["gain"]} for h in found.values()],
        "ablations": ablations(model, valid_ids, targets, seed, draws=draws, count=count, size=size),
    }


# --------------------------------------------------------------------------- the run


def save_weights(model: Any, path: Path) -> str:
    """The model's parameters as safetensors at ``path`` (under a temporary name, then renamed); their sha256."""
    from safetensors.torch import save

    data = save({k: v.detach().contiguous() for k, v in model.state_dict().items()})
    write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def load_weights(path: Path, V: int, expected: str | None = None) -> tuple[Any, str]:
    """A model with the weights of ``path`` (checked against ``expected`` when given) and their sha256."""
    from safetensors.torch import load

    if not path.is_file():
        raise InputError(f"--weights: {path} is not a file")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if expected is not None and digest != expected:
        raise InputError(f"--weights: {path} has sha256 {digest[:16]}..., expected {expected[:16]}...")
    model = tiny.make_tiny(tiny.TinyConfig(V=V))
    try:
        model.load_state_dict(load(data))
    except (RuntimeError, ValueError) as error:
        raise InputError(f"--weights: {path} does not hold this model's weights ({error})") from None
    return model, digest


def analysed(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the run reports from the monitor's records: the per-head series, the commitment, the totals."""
    trajectory = series(records)
    return {
        "trajectory": trajectory,
        "commitment": commitment(trajectory),
        "monitor": {
            "records": len(records),
            "violations": sum(r["violations"] for r in records),
            "undecided": sum(r["undecided"] for r in records),
            "rows": sum(r["attention"]["rows"] for r in records),
        },
    }


def run(
    out: Path,
    *,
    steps: int = STEPS,
    every: int = EVERY,
    seed: int = 0,
    batch: int = BATCH,
    weights: Path | None = None,
    records: Path | None = None,
    static_sizes: dict[str, int] | None = None,
    on_step: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Train (or load ``weights``, with ``records`` the monitor's JSON Lines of the run that made them),
    monitor, survey and ablate; the record of the run. A training run writes the monitor's JSON Lines to
    ``out/attention_trajectory.jsonl`` and the weights to ``.safetensors`` beside it."""
    from rankwall.monitor import read_run

    started, cpu = time.perf_counter(), cpu_seconds()
    train_ids, valid_ids, V = corpus()
    config = tiny.TinyConfig(V=V)
    result: dict[str, Any] = {
        "V": V,
        "parameters": tiny.parameter_count(config),
        "seed_parameters": tiny.SEED_PARAMETERS,
        "uniform_loss": math.log(V),
        "steps": steps,
        "every": every,
        "batch": batch,
        "learning_rate": LEARNING_RATE,
        "seed": seed,
        "threads": THREADS,
    }
    with threads():
        if weights is None:
            model = tiny.make_tiny(config, seed)
            jsonl = out / "attention_trajectory.jsonl"
            jsonl.unlink(missing_ok=True)
            recorded = train(
                model,
                train_ids,
                valid_ids,
                steps=steps,
                every=every,
                seed=seed,
                batch=batch,
                jsonl=jsonl,
                on_step=on_step,
            )
            digest = save_weights(model, out / "attention_trajectory.safetensors")
            result["weights"] = {"file": "attention_trajectory.safetensors", "sha256": digest}
        else:
            model, digest = load_weights(weights, V)
            result["weights"] = {"file": weights.name, "sha256": digest}
            recorded = None if records is None else read_run(records, "--records")
        if recorded is not None:
            result.update(analysed(recorded))
            result["steps"] = recorded[-1]["step"]
        chosen = None if recorded is None else (result["commitment"]["head"], result["commitment"]["control"]["head"])
        result["final"] = static(model, valid_ids, seed, heads=chosen, **(static_sizes or {}))
    result["seconds"] = time.perf_counter() - started
    result["cpu_seconds"] = cpu_seconds() - cpu
    result["peak_memory_mb"] = peak_memory_mb()
    return result


# --------------------------------------------------------------------------- output


def plot(result: dict[str, Any], path: Path) -> None:
    """Panels: the committed and control heads' median m, previous-token share and median gain against
    step (others in grey; the commit window and the hold shaded), gain against m along the committed
    head's path, the held-out loss, and the final survey's gain against 2m(1 - m) with its fit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 3, figsize=(16, 8))
    final = result["final"]
    if "trajectory" in result:
        _plot_trajectory(axes, result)
    else:
        for ax in axes.flat[:5]:
            ax.set_visible(False)
    ax = axes[1, 2]
    for h in final["sample"]:
        ax.scatter(h["capacity"], h["gain"], s=3, alpha=0.4, linewidths=0)
    fit = final["fit"]
    grid = np.logspace(-5, np.log10(0.5), 40)
    ax.plot(grid, grid, ":", color="grey", label="gain = 2m(1 - m)")
    ax.plot(
        grid,
        fit["constant"] * grid ** fit["slope"],
        color="tab:red",
        label=f"{fit['constant']:.3f} (2m(1 - m))^{fit['slope']:.2f}, {fit['rows']:,} rows",
    )
    ax.set(xscale="log", yscale="log", xlabel="2m(1 - m)", ylabel="realised gain", title="final model, held-out rows")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.15))
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)


def _plot_trajectory(axes: Any, result: dict[str, Any]) -> None:
    t, c = result["trajectory"], result["commitment"]
    steps = t["steps"]
    chosen = {c["head"]: "committed" if c["committed"] else "previous-token head", c["control"]["head"]: "control"}
    for ax, key, label in (
        (axes[0, 0], "median_m", "median m"),
        (axes[0, 1], "previous", "previous-token share"),
        (axes[0, 2], "median_gain", "median realised gain"),
    ):
        for name, h in t["heads"].items():
            values = np.array([np.nan if v is None else v for v in h[key]], dtype=float)
            if name in chosen:
                ax.plot(steps, values, marker=".", label=f"head {name} ({chosen[name]})")
            else:
                ax.plot(steps, values, color="0.8", linewidth=0.8)
        if None not in c["window"]:
            ax.axvspan(*c["window"], color="tab:blue", alpha=0.1)
        ax.set(xlabel="step", title=label)
    axes[0, 2].set_yscale("log")
    axes[0, 2].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    h = t["heads"][c["head"]]
    axes[1, 0].plot(h["median_m"], h["median_gain"], marker=".")
    axes[1, 0].axvline(c["m_at_peak"], color="tab:red", linestyle=":")
    axes[1, 0].set(
        xlabel="median m",
        ylabel="median gain",
        yscale="log",
        title=f"head {c['head']}: gain peaks at m = {c['m_at_peak']:.2f}",
    )
    axes[1, 1].plot(steps, t["valid_loss"], marker=".", label="held-out")
    axes[1, 1].plot(steps, t["loss"], marker=".", alpha=0.5, label="training batch")
    if c["hold_from"] is not None:
        axes[1, 1].axvspan(c["hold_from"], steps[-1], color="tab:green", alpha=0.1)
    axes[1, 1].set(
        xlabel="step", ylabel="loss (nats)", title=f"loss; head {c['head']} holds from step {c['hold_from']}"
    )
    axes[1, 1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``attention_trajectory.json`` and ``.png`` into ``out``."""
    return write_outputs(result, out, "attention_trajectory", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=integer_in(1, 1_000_000), default=STEPS, help="training steps")
    parser.add_argument("--every", type=integer_in(1, 1_000_000), default=EVERY, help="record every this many steps")
    parser.add_argument("--batch", type=integer_in(1, 4096), default=BATCH, help="sequences per training batch")
    parser.add_argument(
        "--survey", type=integer_in(1, 4096), default=SURVEY_SEQUENCES, help="held-out sequences of the final survey"
    )
    parser.add_argument("--draws", type=integer_in(1, 1000), default=DRAWS, help="draws per ablation")
    parser.add_argument(
        "--count", type=integer_in(1, 1000), default=COUNT, help=f"batches of {SIZE} held-out sequences per draw"
    )
    parser.add_argument(
        "--weights", default=None, help="a .safetensors of this model: skip training, survey and ablate it"
    )
    parser.add_argument(
        "--records", default=None, help="with --weights: the run's attention_trajectory.jsonl, to read its trajectory"
    )


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment attention-trajectory``: train, monitor, survey, ablate; JSON, PNG, table."""
    weights = None if args.weights is None else Path(args.weights)
    records = None if args.records is None else Path(args.records)
    if records is not None and weights is None:
        raise InputError("--records: needs --weights (the weights the recorded run ended with)")
    with progress_bar(err) as progress:
        task = progress.add_task("attention-trajectory: training", total=0 if weights else args.steps + 1)
        result = run(
            Path(args.out),
            steps=args.steps,
            every=args.every,
            seed=args.seed,
            batch=args.batch,
            weights=weights,
            records=records,
            static_sizes={"sequences": args.survey, "draws": args.draws, "count": args.count},
            on_step=lambda: progress.advance(task),
        )
    json_path, png_path = write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    _print(result, out)
    out.print(f"wrote {json_path} and {png_path}")


def _print(result: dict[str, Any], out: Console) -> None:
    table = Table(title=f"seed 002's model ({result['parameters']:,} parameters): rankwall's run beside the seed's")
    for column in ("quantity", "seed 002", "this run"):
        table.add_column(column, justify="right" if column != "quantity" else "left")
    final, ablation = result["final"], result["final"]["ablations"]
    rows = []
    if "commitment" in result:
        c = result["commitment"]
        rows += [
            (
                "committed head (a previous-token head)",
                "0.1 (yes)",
                f"{c['head']} ({'yes' if c['previous_token_head'] else 'no'})",
            ),
            ("commit window (steps)", "200 .. 400", " .. ".join("-" if v is None else str(v) for v in c["window"])),
            ("median m across it", "0.21 -> 0.97", _arrow(c["m_at_window"], ".2f")),
            ("previous-token share across it", "0.52 -> 1.00", _arrow(c["previous_at_window"], ".2f")),
            (
                "peak gain (step, m)",
                "0.0358 (200, 0.21)",
                f"{c['peak_gain']:.4f} ({c['peak_step']}, {c['m_at_peak']:.2f})",
            ),
            ("final gain", "0.0028", f"{c['final_gain']:.4f}"),
            ("holds within 0.01 for (steps)", "800", str(c["hold_steps"])),
            ("held-out loss over the hold", "2.03 -> 1.68", _arrow(c["valid_loss_over_hold"], ".2f")),
            (
                "control head, final m / share",
                "0.76 / 0.988",
                f"{c['control']['head']}: {c['control']['final_m']:.2f} / {c['control']['final_previous']:.3f}",
            ),
            ("control's gain over committed", "10x", f"{c['control']['final_gain_over_committed']:.1f}x"),
        ]
    fit = final["fit"]
    rows += [
        (
            "gain ~ C (2m(1-m))^b over rows",
            "b 1.03, C 0.128",
            f"b {fit['slope']:.2f}, C {fit['constant']:.3f}, {fit['rows']:,} rows",
        ),
        ("zero the head (nats)", "+1.1252 (sd 0.0210)", _delta(ablation["zero"])),
        ("shift-by-one in its place", "+0.0013 (sd 0.0005)", _delta(ablation["shift"])),
        ("zero the control head", "-", _delta(ablation["zero_control"])),
        ("zero a same-layer head", "+0.0029 (sd 0.0006)", _delta(ablation["zero_same_layer_head"])),
        ("monitor violations", "-", str(result.get("monitor", {}).get("violations", final["violations"]))),
    ]
    for row in rows:
        table.add_row(*row)
    out.print(table)
    out.print(
        f"weights sha256 {result['weights']['sha256']}; {result['seconds']:.0f} s, {result['cpu_seconds']:.0f} s CPU"
    )


def _arrow(pair: list[Any], spec: str) -> str:
    return " -> ".join("-" if v is None else format(v, spec) for v in pair)


def _delta(entry: dict[str, Any]) -> str:
    sd = "" if entry["sd"] is None else f" (sd {entry['sd']:.4f})"
    return f"{entry['layer']}.{entry['head']}: {entry['delta']:+.4f}{sd}"
