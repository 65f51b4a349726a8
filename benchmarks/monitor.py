"""Benchmark of rankwall.monitor's overhead on a training step of seed 002's small model.

Trains seed 002's model (816,128 parameters, batch 32 x 64 characters of tinyshakespeare, AdamW, one
intra-op thread) for --steps steps three times from the same seed, in one run and alternating so that
the machine's load falls on all three alike: without the monitor (the baseline), with the monitor at its
default settings (a record every rankwall.monitor.DEFAULT_EVERY steps), and with a record at every step.
Prints per variant the wall and CPU seconds per step and the ratio to the baseline, the cost of one
record, and whether the final parameters are bit-identical to the baseline's.

Usage: python benchmarks/monitor.py [--steps N] [--every N] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def trainer(every: int | None, steps: int):
    """A generator that runs one training step per ``next()`` and yields (wall, cpu) of that step;
    ``every`` None: no monitor."""
    import torch

    from rankwall.checks.experiments.attention_trajectory import BATCH, LEARNING_RATE, corpus
    from rankwall.checks.models import tiny
    from rankwall.monitor import Monitor

    train_ids, _, V = corpus()
    model = tiny.make_tiny(tiny.TinyConfig(V=V), 0)
    stream = tiny.batches(train_ids, model.config.context, BATCH, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    monitor = Monitor(model, every=every).attach() if every is not None else None
    for step in range(steps):
        x, y = next(stream)
        wall, started = time.perf_counter(), cpu()
        if monitor is None:
            torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        else:
            with monitor.step(step):
                torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        yield time.perf_counter() - wall, cpu() - started
    yield [p.detach().clone() for p in model.parameters()], monitor


def main() -> None:
    import torch

    from rankwall.monitor import DEFAULT_EVERY

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2 * DEFAULT_EVERY + 1)
    parser.add_argument("--every", type=int, default=DEFAULT_EVERY)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    variants = {"baseline": None, f"monitor every {args.every} (default)": args.every, "monitor every step": 1}
    runs = {name: trainer(every, args.steps) for name, every in variants.items()}
    times = {name: [] for name in variants}
    for _ in range(args.steps):  # interleaved: one step of each in turn
        for name, run in runs.items():
            times[name].append(next(run))
    final = {name: next(run) for name, run in runs.items()}
    base_params = final["baseline"][0]
    base = np.array(times["baseline"])
    report = {"steps": args.steps, "variants": {}}
    for name in variants:
        t = np.array(times[name])
        params, monitor = final[name]
        entry = {
            "wall_per_step": float(t[:, 0].mean()),
            "cpu_per_step": float(t[:, 1].mean()),
            "wall_ratio": float(t[:, 0].sum() / base[:, 0].sum()),
            "cpu_ratio": float(t[:, 1].sum() / base[:, 1].sum()),
            "bit_identical_to_baseline": all(torch.equal(a, b) for a, b in zip(params, base_params, strict=True)),
        }
        if monitor is not None:
            entry["records"] = len(monitor.records)
            entry["seconds_per_record"] = float(np.mean([r["seconds"] for r in monitor.records]))
            entry["violations"] = monitor.violations
        report["variants"][name] = entry
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"seed 002's model, {args.steps} training steps per variant, interleaved, one thread")
    print(f"{'variant':36s} {'wall s/step':>11s} {'CPU s/step':>10s} {'wall ratio':>10s} {'CPU ratio':>9s}  identical")
    for name, e in report["variants"].items():
        print(
            f"{name:36s} {e['wall_per_step']:11.4f} {e['cpu_per_step']:10.4f} {e['wall_ratio']:10.3f} "
            f"{e['cpu_ratio']:9.3f}  {e['bit_identical_to_baseline']}"
        )
    for name, e in report["variants"].items():
        if "records" in e:
            print(f"{name}: {e['records']} records, {e['seconds_per_record']:.3f} s each, {e['violations']} violations")


if __name__ == "__main__":
    main()
