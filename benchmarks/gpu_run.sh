#!/usr/bin/env bash
# One prepared GPU run: `rankwall verify --V 131072` on torch/CUDA and on CuPy (float64 and
# float32), then the spectral-norm throughput benchmark on the GPU. Prints timings; writes the
# JSON verdicts to ${OUT:-out}/. The softmax-jacobian claims compute on the requested backend;
# the other families compute in NumPy whatever the backend (the JSON names the backend used).
# Needs a CUDA device; CuPy is optional (install cupy-cuda12x, or carry its wheel) and is
# skipped with a message when missing.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-out}"
mkdir -p "$out"
python -c "import rankwall.checks" 2>/dev/null || python -m pip install -q -e . || exit 2
status=0
run() {
  local name=$1; shift
  local started=$(date +%s.%N)
  rankwall verify --V 131072 --examples 8 --json "$@" > "$out/verify-$name.json"
  local code=$?
  local seconds=$(python -c "import time; print(f'{time.time() - $started:.1f}')")
  local summary=$(python -c "import json,collections; d=json.load(open('$out/verify-$name.json')); print(dict(collections.Counter(v['status'] for v in d)))" 2>/dev/null)
  printf '%-22s exit %s  %6s s  %s\n' "$name" "$code" "$seconds" "$summary"
  [ "$code" -eq 0 ] || status=1
}
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  && { run torch-cuda-float64 --backend torch --device cuda --dtype float64
       run torch-cuda-float32 --backend torch --device cuda --dtype float32
       python benchmarks/softmax_jacobian.py --backend torch --device cuda --rows 1024; } \
  || echo "torch sees no CUDA device: skipped"
python -c "import cupy" 2>/dev/null \
  && { run cupy-float64 --backend cupy --dtype float64
       run cupy-float32 --backend cupy --dtype float32
       python benchmarks/softmax_jacobian.py --backend cupy --rows 1024; } \
  || echo "cupy is not installed: skipped"
exit $status
