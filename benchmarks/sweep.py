"""Sweep of ``rankwall verify`` over vocabulary sizes, serial and on a local Dask cluster.

Default mode: for each size, runs ``rankwall verify PATTERN --V N --json`` as a child process,
serially and with ``--workers W`` (``--serial``: serially only; ``--each``: one child process per
matched claim, so that each claim's own peak is measured), and prints the wall-clock seconds,
the peak resident memory of the largest process (the command or one of its workers: ``ru_maxrss``
from ``wait4``, which covers the processes it waited for), the bytes per vocabulary entry that peak
implies beyond :data:`rankwall.checks.run.runner.PROCESS_BASE_BYTES`, whether the two JSON outputs agree
with the seconds left out, and the load average before and after.

``--measure N``: in this process, checks every instance of the claims at V = N after a warm-up at
V = 64 and prints the peak memory before and after
(:func:`rankwall.checks.run.outputs.peak_memory_mb`) and the bytes per vocabulary entry they imply,
the figure behind :data:`rankwall.checks.run.runner.BYTES_PER_ENTRY`.

Usage: python benchmarks/sweep.py [PATTERN] [--V N ...] [--workers W | --serial] [--each] [--measure N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

DEFAULT_PATTERN = "softmax-jacobian.*"


def timed_run(argv: list[str]) -> tuple[float, float, int, str]:
    """Seconds, peak MiB of the largest process, exit code and stdout of ``argv``."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = child.stdout.read() if child.stdout is not None else ""
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss / 2**10, child.returncode, out


def without_seconds(text: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in json.loads(text)]


def sweep(pattern: str, sizes: list[int], workers: int | None) -> list[dict[str, Any]]:
    """One record per size: seconds, peak MiB, bytes per entry and exit code, serial and (unless
    ``workers`` is None) on ``workers`` workers."""
    from rankwall.checks.run.runner import PROCESS_BASE_BYTES

    records = []
    for V in sizes:
        base = ["rankwall", "verify", pattern, "--V", str(V), "--json"]
        load = os.getloadavg()[0]
        runs = {"serial": timed_run(base)}
        if workers is not None:
            runs[f"workers-{workers}"] = timed_run([*base, "--workers", str(workers)])
        outputs = [without_seconds(out) if out else None for *_, out in runs.values()]
        record: dict[str, Any] = {"V": V, "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}
        if workers is not None:
            record["same_json"] = outputs[0] is not None and outputs[0] == outputs[1]
        for name, (seconds, peak, code, _) in runs.items():
            per_entry = (peak * 2**20 - PROCESS_BASE_BYTES) / V
            record[name] = {"seconds": round(seconds, 1), "peak_mib": round(peak), "exit": code}
            record[name]["bytes_per_entry"] = round(per_entry)
        record["largest_V"] = sorted({r["largest_V"] for r in outputs[0] or []}, key=lambda v: (v is None, v))
        records.append(record)
    return records


def measure(pattern: str, V: int) -> dict[str, Any]:
    """Peak MiB before and after checking every instance of the claims at V, and bytes per entry."""
    import rankwall.checks.claims  # noqa: F401  (registers the claims)
    from rankwall.checks.cli.commands.common import NUMPY_ONLY, matched_claims
    from rankwall.checks.engine.backends import resolve
    from rankwall.checks.run.outputs import peak_memory_mb

    claims = matched_claims([pattern])
    backend = resolve(*NUMPY_ONLY)

    def check_all(size: int) -> None:
        for claim in claims:
            for instance in claim.witnesses(size) + claim.random_instances(size, 16, 0):
                claim.check(instance, backend)

    check_all(64)
    base = peak_memory_mb()
    started = time.perf_counter()
    check_all(V)
    peak = peak_memory_mb()
    return {
        "V": V,
        "base_mib": round(base, 1),
        "peak_mib": round(peak, 1),
        "seconds": round(time.perf_counter() - started, 1),
        "bytes_per_entry": round((peak - base) * 2**20 / V),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pattern", nargs="?", default=DEFAULT_PATTERN)
    parser.add_argument("--V", type=int, nargs="+", default=[2**17, 2**20], dest="V")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--serial", action="store_true", help="the serial run only (no Dask cluster)")
    parser.add_argument("--each", action="store_true", help="one run per matched claim")
    parser.add_argument("--measure", type=int, default=None, metavar="N")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    workers = None if args.serial else args.workers
    if args.measure:
        result: Any = measure(args.pattern, args.measure)
    elif args.each:
        import rankwall.checks.claims  # noqa: F401  (registers the claims)
        from rankwall.checks.cli.commands.common import matched_claims

        result = [{"claim": c.id, **r} for c in matched_claims([args.pattern]) for r in sweep(c.id, args.V, workers)]
    else:
        result = sweep(args.pattern, args.V, workers)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for record in result if isinstance(result, list) else [result]:
        print(record, file=sys.stdout)


if __name__ == "__main__":
    main()
