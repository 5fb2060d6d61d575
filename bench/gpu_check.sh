#!/usr/bin/env bash
# Issue 31's GPU check for a lent GPU (under 6 minutes): old vs new batching against a reference step of the same
# shape, eager, then the new settings compiled. Results: bench/results/gpu_throughput_compare.json (copied to
# $OUT when set). PEAK_TFLOPS: dense bf16 peak of the GPU (default from its name: A100 312, H100/H200 989).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD:$PWD/training_code"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in
  *A100*) default_peak=312 ;;
  *H100*|*H200*) default_peak=989 ;;
  *) default_peak="" ;;
esac
peak=${PEAK_TFLOPS:-$default_peak}
[ -n "$peak" ] || { echo "error: unknown GPU '$name': set PEAK_TFLOPS (dense bf16 TFLOP/s)"; exit 2; }
timeout 150 "$PYTHON" -m bench.gpu_throughput --peak-tflops "$peak" --compare --steps 30 --warmup 10
cp bench/results/gpu_throughput_compare.json bench/results/gpu_throughput_compare_eager.json
timeout 180 "$PYTHON" -m bench.gpu_throughput --peak-tflops "$peak" --compare --steps 30 --warmup 10 --compile
if [ -n "${OUT:-}" ]; then cp bench/results/gpu_throughput_compare*.json "$OUT"/; fi
