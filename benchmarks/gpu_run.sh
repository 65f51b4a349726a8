#!/usr/bin/env bash
# One prepared GPU run, from the checkout, with no network: `rankwall verify 'softmax-jacobian.*'
# --V 131072` on PyTorch/CUDA and on CuPy, each in float64 and float32, then the spectral-norm
# throughput benchmark on each; JSON verdicts, timings and rows/s go to ${OUT:-out}/
# (benchmarks/gpu_run.py says what each file holds). It finishes within 8 minutes (--deadline).
#
#   bash benchmarks/gpu_run.sh [--dry-run] [--V N] [--examples N] [--rows N] [--deadline S]
#
# --dry-run runs the same steps on the CPU (PyTorch/CPU for CUDA, NumPy for CuPy where CuPy is
# absent) and writes the same JSON; tests/test_gpu_run.py runs it.
#
# A GPU machine here has Python 3.12, torch for CUDA 13, CuPy (cupy-cuda13x, the `gpu` extra),
# NumPy, SciPy, Hypothesis, rich, networkx and matplotlib, but not python-flint or
# array-api-compat. Their wheels come from benchmarks/wheels/ (ignored by git), downloaded once on
# a machine that has the registry:
#
#   python -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#     --abi cp312 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d benchmarks/wheels python-flint array-api-compat
#
# They are installed with `pip --no-index` into a folder on PYTHONPATH (nothing is downloaded),
# and the project goes on the path through a shim folder of links (rankwall/*.py, theory/,
# checks/), so nothing is built either.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-out}"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The project: rankwall from rankwall/*.py, rankwall.theory from theory/, rankwall.checks from checks/.
mkdir -p "$work/shim/rankwall"
for module in "$root"/rankwall/*.py; do ln -s "$module" "$work/shim/rankwall/"; done
ln -s "$root/theory" "$work/shim/rankwall/theory"
ln -s "$root/checks" "$work/shim/rankwall/checks"
export PYTHONPATH="$work/shim:$work/site${PYTHONPATH:+:$PYTHONPATH}"

# The missing packages, from the wheels folder only.
if ! "$python" -c "import flint, array_api_compat" 2>/dev/null; then
  if ! ls benchmarks/wheels/*.whl >/dev/null 2>&1; then
    echo "python-flint or array-api-compat is missing and benchmarks/wheels/ holds no wheels:" \
      "download them with the command in this script's header" >&2
    exit 2
  fi
  "$python" -m pip install --quiet --no-index --no-deps --target "$work/site" benchmarks/wheels/*.whl
fi
"$python" -c "import rankwall.checks.cli" # the path is right before anything runs

mkdir -p "$out"
export PYTHONUNBUFFERED=1
"$python" benchmarks/gpu_run.py "$out" "$@"
