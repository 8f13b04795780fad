#!/usr/bin/env bash
# The GPU checks of issues 30 and 31 as one prepared run (a machine with an NVIDIA GPU).
#
#   bash tests/gpu/gpu_session.sh OUT_DIR
#
# 1. real CUDA fixtures recorded with plain torch.profiler (tests/gpu/capture_fixtures.py);
# 2. `neuron-explorer record` of tests/gpu/gpt_block.py eager, CUDA-graph replay and
#    torch.compile, each against its unprofiled wall time; eager once more with pruning off;
# 3. analyze / whatif on the eager trace; tests/gpu/cuda_check.py; eager with --exact-lines and
#    tests/gpu/exact_lines_check.py (operator syntax and its kernels at their lines);
# 4. figures from the traces (tests/gpu/summarize.py) into OUT_DIR/summary.json.
# Every step has its own time limit and the run goes on after a failed step.
set -u
OUT=${1:?OUT_DIR}
mkdir -p "$OUT"
W=$(mktemp -d)
mkdir -p "$W/fixtures"
export PYTHONUNBUFFERED=1
DEADLINE=$(( $(date +%s) + ${BUDGET_S:-420} ))  # steps past it are skipped, so the files still come back
PY=${PY:-python3}
NE="$PY -m neuron_explorer"
log() { echo "== $(date +%T) $*"; }
timed() {  # timed LIMIT NAME CMD...: run, print its wall time and exit status
    local limit=$1 name=$2; shift 2
    local left=$(( DEADLINE - $(date +%s) ))
    if [ "$left" -lt 20 ]; then echo "$name: skipped (session deadline)" | tee -a "$W/walls.txt"; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    local t0 rc; t0=$(date +%s%N)
    timeout "$limit" "$@"; rc=$?
    echo "$name: rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$W/walls.txt"
}
{
log "device"; nvidia-smi -L; $PY -c 'import torch,sys;print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.get_device_name())'
log "fixtures"; timed 200 fixtures $PY tests/gpu/capture_fixtures.py "$W/fixtures" ${FIXTURES:-cuda_graph whatif_mm compiled}
G=tests/gpu/gpt_block.py
log "eager"; timed 60 plain_eager $PY $G --steps 8
timed 120 record_eager $NE record -o "$W/eager.parquet" $G --steps 8
timed 120 record_eager_noprune env NEURON_EXPLORER_NO_PRUNE=1 $NE record -o "$W/eager_noprune.parquet" $G --steps 8
log "graph"; timed 60 plain_graph $PY $G --mode graph --steps 8
timed 120 record_graph $NE record -o "$W/graph.parquet" $G --mode graph --steps 8
log "analyze"; timed 60 analyze_eager $NE analyze "$W/eager.parquet" --format json -o "$W/eager_analysis.json"
timed 60 whatif_eager $NE whatif "$W/eager.parquet" --format json > "$W/eager_whatif.json"
timed 60 info_graph $NE info "$W/graph.parquet"
log "cuda_check"; timed 120 cuda_check $PY tests/gpu/cuda_check.py "$W"
log "exact_lines"; timed 120 record_eager_exact $NE record --exact-lines -o "$W/eager_exact.parquet" $G --steps 8
timed 60 exact_lines_check $PY tests/gpu/exact_lines_check.py "$W/eager.parquet" "$W/eager_exact.parquet"
log "compile"; timed 120 plain_compile $PY $G --mode compile --steps 6
timed 200 record_compile $NE record -o "$W/compile.parquet" $G --mode compile --steps 6
log "summary"; timeout 90 $PY tests/gpu/summarize.py "$W" > "$OUT/summary.json"
cat "$OUT/summary.json"
cat "$W/walls.txt"
} > "$OUT/log.txt" 2>&1
cp "$W/walls.txt" "$OUT/" 2>/dev/null
# what comes back: the fixtures and the small traces (at most 16 MiB a file)
find "$W" -name '*.parquet' -size +12M -delete
tar -C "$W" -czf "$OUT/work.tar.gz" . 2>/dev/null
ls -la "$OUT"
tail -c 3000 "$OUT/log.txt"
