#!/usr/bin/env bash
# `make test` and `make report` from fresh clones, with the machine's speed measured in the same run
# (issue 46): the 2-core machines of the CI kind differ by about 2x, so a time means something only
# beside the time a FIXED commit takes on the same machine at the same moment.
#
#   benchmarks/suite_speed.sh [REF_COMMIT] [WORK_DIR]
#
# A fresh clone of HEAD: `make install` (the venv from nothing, pip's cache warm) and `make test` timed apart
# (a fresh clone's `make test` is the two together); then REF_COMMIT (default 1b9a1ba, the commit issue 46
# measured: its `make test` tier took 484 s of tests on a slow machine of the kind, 231 s on a fast one) is
# cloned and installed (not timed) and its `make test` timed; then HEAD's `make report` (venv present). Run it on a quiet machine: nothing else computing.
# Prints one line per phase (wall seconds, user+sys CPU seconds of the whole process tree) and writes the
# logs into WORK_DIR (default a new temporary folder).
set -euo pipefail
REF=${1:-1b9a1ba}
WORK=${2:-$(mktemp -d /tmp/suite-speed.XXXXXX)}
SRC=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
HEAD_COMMIT=$(git -C "$SRC" rev-parse --short HEAD)
mkdir -p "$WORK"

timed() {  # timed LABEL DIR CMD...: one line "LABEL: W s wall, C s CPU"
  local label=$1 dir=$2; shift 2
  local t0 t1 c0 c1
  t0=$(date +%s.%N)
  ( cd "$dir" && /usr/bin/time -f "%U %S" -o "$WORK/$label.cpu" "$@" >"$WORK/$label.log" 2>&1 ) || echo "$label: FAILED (exit $?), see $WORK/$label.log"
  t1=$(date +%s.%N)
  read -r u s < <(tail -1 "$WORK/$label.cpu")  # GNU time writes "Command exited with non-zero status" first
  printf '%s: %.0f s wall, %.0f s CPU\n' "$label" "$(echo "$t1 - $t0" | bc)" "$(echo "$u + $s" | bc)" | tee -a "$WORK/summary.txt"
}

echo "machine: $(nproc) cores, $(uname -m); load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$WORK/summary.txt"
git clone -q "$SRC" "$WORK/head"
timed "HEAD $HEAD_COMMIT make install (fresh clone)" "$WORK/head" make install
timed "HEAD $HEAD_COMMIT make test (venv present)" "$WORK/head" make test
grep -E "passed|failed" "$WORK/HEAD $HEAD_COMMIT make test (venv present).log" | tail -1 | tee -a "$WORK/summary.txt"
git clone -q "$SRC" "$WORK/ref" && git -C "$WORK/ref" checkout -q "$REF"
(cd "$WORK/ref" && make install >"$WORK/ref-install.log" 2>&1)
timed "reference $REF make test (venv present)" "$WORK/ref" make test
grep -E "passed|failed" "$WORK/reference $REF make test (venv present).log" | tail -1 | tee -a "$WORK/summary.txt"
timed "HEAD $HEAD_COMMIT make report (venv present)" "$WORK/head" make report
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); logs in $WORK" | tee -a "$WORK/summary.txt"
