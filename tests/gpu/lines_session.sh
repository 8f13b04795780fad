#!/usr/bin/env bash
# A short GPU run of the line checks alone (issue 30) and the copy what-if (issue 31):
#
#   bash tests/gpu/lines_session.sh OUT_DIR
#
# record the eager GPT block (exact lines on the GPU, kernels inherit them), --exact-lines and
# its check, tests/gpu/cuda_check.py (forward and backward kernels on the forward line), and
# tests/gpu/whatif_check.py; figures from tests/gpu/summarize.py into OUT_DIR/summary.json.
set -u
OUT=${1:?OUT_DIR}
mkdir -p "$OUT"
W=$(mktemp -d)
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
NE="$PY -m neuron_explorer"
G=tests/gpu/gpt_block.py
{
$PY -c 'import torch,sys;print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())'
timeout 60 $NE record -o "$W/eager.parquet" $G --steps 8; echo "record_eager rc=$?"
timeout 60 $NE record --exact-lines -o "$W/eager_exact.parquet" $G --steps 8; echo "record_exact rc=$?"
timeout 30 $PY tests/gpu/exact_lines_check.py "$W/eager.parquet" "$W/eager_exact.parquet"; echo "exact_lines_check rc=$?"
timeout 60 $PY tests/gpu/cuda_check.py "$W"; echo "cuda_check rc=$?"
timeout 60 $PY tests/gpu/whatif_check.py "$W/whatif"; echo "whatif_check rc=$?"
timeout 60 $PY tests/gpu/summarize.py "$W" > "$OUT/summary.json"; echo "summarize rc=$?"
} > "$OUT/log.txt" 2>&1
find "$W" -name '*.parquet' -size +12M -delete
tar -C "$W" -czf "$OUT/work.tar.gz" . 2>/dev/null
grep -v USDT "$OUT/log.txt" | grep -E "PASS|FAIL|NOTE|rc=|Error" | tail -60
grep -A12 '"checks"' "$OUT/summary.json"
