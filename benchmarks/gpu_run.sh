#!/usr/bin/env bash
# One lent-GPU session's measurements, as one prepared command (the device tool's `run`):
#   pytest -m cuda, FlexAttention modules checked on CPU and CUDA (bench_gpu --part flex), and the claims
#   with a trained check at default sizes on CPU and CUDA (bench_gpu --part claims --modes default).
# Expects the wheels the device image lacks in .whl/ (cvxpy and its solvers, latex2mathml, pylatexenc;
# python 3.12) and writes under $OUT. Every step has its own time limit so one slow step cannot take the rest.
set -u
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/install.log" 2>&1 || { echo "wheel install failed"; tail -5 "$OUT/install.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TVERIFY_NO_PROGRESS=1
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc;
  python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name(0))"; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m cuda tests/test_hopfield.py tests/test_icl.py \
  > "$OUT/pytest_cuda.txt" 2>&1; echo "pytest -m cuda rc=$?"; tail -3 "$OUT/pytest_cuda.txt"
timeout 170 python3 -m benchmarks.bench_gpu --part flex --device both --out "$OUT/flex.json" > "$OUT/flex.log" 2>&1
echo "flex rc=$?"; grep -c '"module"' "$OUT/flex.log"
timeout 250 python3 -m benchmarks.bench_gpu --part claims --device both --modes default --no-mutants \
  --out "$OUT/claims.json" > "$OUT/claims.log" 2>&1
echo "claims rc=$?"; cut -c1-300 "$OUT/claims.log" | tail -4
