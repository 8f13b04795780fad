#!/usr/bin/env bash
# Create bench/.venv-hta: HolisticTraceAnalysis 0.5.0, the peer bench/ingest.py measures against.
#
# HTA 0.5.0 breaks on pandas 3 (which the project's own .venv uses), so it gets a venv of its
# own with a pandas 2.x it works with. Idempotent: a venv that already imports the pinned HTA
# is left alone; a broken or partial one is rebuilt. Needs PyPI access on first run.
#
#   bash bench/setup_peers.sh            # uses python3 (>= 3.10)
#   PYTHON=/usr/bin/python3.11 bash bench/setup_peers.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${HTA_VENV:-$HERE/.venv-hta}"
PYTHON="${PYTHON:-python3}"
HTA_PIN="HolisticTraceAnalysis==0.5.0"
PANDAS_PIN="pandas>=2.1,<3"

ready() {
    [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as md
import pandas
assert md.version("HolisticTraceAnalysis") == "0.5.0", md.version("HolisticTraceAnalysis")
assert int(pandas.__version__.split(".")[0]) < 3, pandas.__version__
from hta.trace_analysis import TraceAnalysis  # noqa: F401  (the import itself is the check)
PY
}

if ready; then
    echo "bench/setup_peers.sh: $VENV is ready ($HTA_PIN)"
    exit 0
fi

echo "bench/setup_peers.sh: creating $VENV with $HTA_PIN and $PANDAS_PIN"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# Both pins in one resolve, so pip cannot pick a pandas 3 that HTA's loose requirement allows.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$HTA_PIN" "$PANDAS_PIN"

if ! ready; then
    echo "bench/setup_peers.sh: $VENV was built but cannot import HTA 0.5.0 with pandas < 3" >&2
    exit 1
fi
echo "bench/setup_peers.sh: $VENV is ready ($HTA_PIN, pandas $("$VENV/bin/python" -c 'import pandas; print(pandas.__version__)'))"
