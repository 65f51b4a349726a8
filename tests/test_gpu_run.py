"""benchmarks/gpu_run.sh, the prepared GPU run, cannot rot: its --dry-run runs the same steps on the
CPU (PyTorch/CPU for CUDA, NumPy for CuPy where CuPy is absent) and writes the same JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_dry_run_exits_0_and_writes_verdicts_timings_and_rates(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    argv = ["bash", "benchmarks/gpu_run.sh", "--dry-run", "--V", "64", "--examples", "0", "--rows", "2"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "gpu_run.json").read_text())
    assert report["dry_run"] and report["exit"] == 0 and report["V"] == 64
    names = [r["name"] for r in report["runs"]]
    assert names == [f"{b}-{d}" for b in ("torch-cpu", "numpy-for-cupy") for d in ("float64", "float32")]
    for run in report["runs"]:
        verdicts = json.loads((tmp_path / f"verify-{run['name']}.json").read_text())
        assert run["exit"] == 0 and run["seconds"] > 0 and sum(run["counts"].values()) == len(verdicts) > 0
        assert {v["dtype"] for v in verdicts} == {run["dtype"]} and {v["backend"] for v in verdicts} == {run["backend"]}
    rates = [t for entry in report["throughput"] for t in entry["runs"]]
    assert {t["backend"] for t in rates} >= {"torch", "numpy"} and all(t["rows_per_second"] > 0 for t in rates)


def test_the_gpu_extra_is_the_cupy_for_cuda_13():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["gpu"] == ["cupy-cuda13x>=13"]
