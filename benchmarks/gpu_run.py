"""The steps of ``benchmarks/gpu_run.sh``: ``rankwall verify`` on each GPU backend and dtype, then the
spectral-norm throughput benchmark on each, all within one deadline, into JSON files under OUT.

Writes ``OUT/verify-NAME.json`` (the verdicts of each run, as ``rankwall verify --json`` prints them)
and ``OUT/gpu_run.json``: the device, and per run its backend, device, dtype, exit code, seconds and
counts of statuses, and per backend the benchmark's rows per second of ``spectral_norm`` at
V = 131,072 with its passes of the memory bound. ``--dry-run`` runs the same steps on this CPU:
PyTorch/CPU in place of CUDA, NumPy in place of CuPy where CuPy is absent.

Exit code: 0 when every step ran and no claim was violated (inconclusive verdicts, such as a CUDA
eigensolver that fails on a low-rank float32 matrix, are reported, not failures); 1 when a claim
was violated; 4 when a step crashed, timed out or wrote no JSON.

Usage: python benchmarks/gpu_run.py OUT [--dry-run] [--V N] [--examples N] [--rows N] [--deadline S]
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PATTERN = "softmax-jacobian.*"
DTYPES = ("float64", "float32")


def steps(dry_run: bool) -> list[tuple[str, str, str | None]]:
    """``(name, backend, device)`` for each backend the run covers; an empty device is the default."""
    torch = ("torch-cpu", "torch", "cpu") if dry_run else ("torch-cuda", "torch", "cuda")
    has_cupy = importlib.util.find_spec("cupy") is not None
    cupy = ("cupy", "cupy", None) if has_cupy and not dry_run else ("numpy-for-cupy", "numpy", None)
    if not dry_run and not has_cupy:
        return [torch]  # CuPy is missing: install rankwall[gpu] (cupy-cuda13x) to cover it
    return [torch, cupy]


def run_step(argv: list[str], seconds_left: float) -> tuple[int, float, str, str]:
    """Exit code (124 on timeout), seconds, stdout and the tail of stderr of ``argv``."""
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=max(seconds_left, 1), cwd=ROOT)
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        code, out, err = 124, "", f"timed out after {expired.timeout:.0f} s"
    return code, time.perf_counter() - started, out, err[-2000:]


def describe_device(dry_run: bool) -> str:
    if dry_run:
        return "dry run on the CPU"
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    except ImportError:
        return "torch is not installed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--V", type=int, default=131072, dest="V")
    parser.add_argument("--examples", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--deadline", type=float, default=450.0, help="seconds for all the steps together")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ends = time.perf_counter() + args.deadline
    python = sys.executable
    report: dict[str, Any] = {"device": describe_device(args.dry_run), "dry_run": args.dry_run, "V": args.V}
    report["runs"], report["throughput"], worst = [], [], 0
    for name, backend, device in steps(args.dry_run):
        where = ["--device", device] if device else []
        for dtype in DTYPES:
            label = f"{name}-{dtype}"
            argv = [python, "-m", "rankwall.checks.cli", "verify", PATTERN, "--V", str(args.V)]
            argv += ["--examples", str(args.examples), "--json", "--backend", backend, *where, "--dtype", dtype]
            code, seconds, out, err = run_step(argv, ends - time.perf_counter())
            record: dict[str, Any] = {"name": label, "backend": backend, "device": device, "dtype": dtype}
            record |= {"exit": code, "seconds": round(seconds, 1)}
            try:
                verdicts = json.loads(out)
                (args.out / f"verify-{label}.json").write_text(json.dumps(verdicts, indent=1))
                record["counts"] = dict(collections.Counter(v["status"] for v in verdicts))
                inconclusive = [v for v in verdicts if v["status"] == "inconclusive"]
                record["inconclusive"] = [{"claim": v["claim"], "method": v["method"]} for v in inconclusive]
            except json.JSONDecodeError:
                record["stderr"] = err
                code = 4
            worst = max(worst, {0: 0, 3: 0, 1: 1}.get(code, 4))
            report["runs"].append(record)
            outcome = record.get("counts", err[-200:])
            print(f"{label:<24} exit {record['exit']}  {seconds:6.1f} s  {outcome}", flush=True)
        bench = [python, "benchmarks/softmax_jacobian.py", "--backend", backend, *where]
        bench += ["--rows", str(args.rows), "--no-dense", "--only", "--json"]
        code, seconds, out, err = run_step(bench, ends - time.perf_counter())
        try:
            result = json.loads(out)
            runs = result["throughput"]
            report["throughput"].append({"name": name, "seconds": round(seconds, 1), "runs": runs})
            for t in runs:
                print(f"{name:<24} spectral_norm {t['rows_per_second']:.0f} rows/s ({t['backend']}/{t['dtype']})")
        except (json.JSONDecodeError, KeyError):
            report["throughput"].append({"name": name, "exit": code, "stderr": err})
            worst = 4
    report["exit"] = worst
    (args.out / "gpu_run.json").write_text(json.dumps(report, indent=1))
    return worst


if __name__ == "__main__":
    sys.exit(main())
