#!/usr/bin/env bash
# One lent-GPU session's measurements, as one prepared command (the device tool's `run`), every step with its
# own time limit so one slow step cannot take the rest, all of it inside ~7 minutes:
#   in the background, the claims with a trained check at --full sizes, one `tverify run` per claim, on the
#   CPU and on CUDA at once (bench_gpu --part claims --modes full --each; two processes);
#   in the foreground, pytest -m cuda, the FlexAttention modules of tests/test_attention_modern.py checked on
#   CPU and CUDA (bench_gpu --part flex), and the survey's FlexAttention entries on CPU and CUDA
#   (bench_gpu --part survey).
# Expects the wheels the device image lacks in .whl/ (cvxpy and its solvers, latex2mathml, pylatexenc;
# python 3.12). Logs go to /tmp/g and come back as $OUT/gpu.tgz; summaries are printed.
set -u
OUT=${OUT:-/tmp/gpu_out}; G=/tmp/g; mkdir -p "$OUT" "$G"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$G/install.log" 2>&1 || { echo "wheel install failed"; tail -5 "$G/install.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TVERIFY_NO_PROGRESS=1
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc;
  python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name(0))"; } > "$G/machine.txt" 2>&1
cat "$G/machine.txt"
CLAIMS_S=${CLAIMS_S:-390}
for dev in cpu cuda; do
  timeout "$CLAIMS_S" python3 -m benchmarks.bench_gpu --part claims --device $dev --modes full --no-mutants --each \
    --out "$G/claims-$dev/claims.json" > "$G/claims-$dev.log" 2>&1 &
done
timeout 120 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m cuda tests/test_hopfield.py tests/test_icl.py \
  tests/test_attention_modern.py > "$G/pytest_cuda.txt" 2>&1; echo "pytest -m cuda rc=$?"; tail -3 "$G/pytest_cuda.txt"
timeout 170 python3 -m benchmarks.bench_gpu --part flex --device both --out "$G/flex/flex.json" > "$G/flex.log" 2>&1
echo "flex rc=$?"; cut -c1-700 "$G/flex.log"
timeout 100 python3 -m benchmarks.bench_gpu --part survey --device both --out "$G/survey/survey.json" > "$G/survey.log" 2>&1
echo "survey rc=$?"; cut -c1-900 "$G/survey.log"
wait
for dev in cpu cuda; do echo "claims $dev:"; cut -c1-400 "$G/claims-$dev.log"; done
tar -czf "$OUT/gpu.tgz" -C /tmp g 2>/dev/null; ls -la "$OUT"
