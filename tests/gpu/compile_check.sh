#!/usr/bin/env bash
# The torch.compile checks of issue 30 on a GPU, as one short run (a machine with an NVIDIA GPU):
# the GPT block of tests/gpu/gpt_block.py under torch.compile, unprofiled then recorded (both
# compiling cold), and the figures of tests/gpu/summarize.py (compile spans, share of compiled
# kernel time carrying Inductor's lines, events, record/plain ratio) with their PASS/FAIL lines.
#
#   bash tests/gpu/compile_check.sh OUT_DIR
set -u
OUT=${1:?OUT_DIR}
W=$(mktemp -d)
PY=${PY:-python3}
G=tests/gpu/gpt_block.py
timed() {  # timed LIMIT NAME CMD...
    local limit=$1 name=$2; shift 2
    local t0 rc; t0=$(date +%s%N)
    timeout "$limit" "$@"; rc=$?
    echo "$name: rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$W/walls.txt"
}
$PY -c 'import torch,sys;print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())'
export TORCHINDUCTOR_CACHE_DIR=$W/cache_plain
timed 100 plain_compile $PY $G --mode compile --steps 6
export TORCHINDUCTOR_CACHE_DIR=$W/cache_record
timed 150 record_compile $PY -m neuron_explorer record -o "$W/compile.parquet" $G --mode compile --steps 6
timeout 60 $PY tests/gpu/summarize.py "$W" > "$OUT/summary.json"
$PY - "$OUT/summary.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
c = d.get("compile.parquet", {})
for k in ("events", "steps", "compile_spans", "compiled_region_kernels", "compiled_region_kernel_time_with_compiled_lines",
          "compiled_lines_named", "kernel_time_by_precision", "metadata_compiled_lines", "metadata_steps_from", "capture_fallback", "error"):
    print(k, c.get(k))
print("walls", d.get("walls"))
for k, v in d.get("checks", {}).items():
    if "compile" in k:
        print(v, "-", k)
PYEOF
cp "$W/compile.parquet" "$OUT/" 2>/dev/null
