"""An independent, deliberately simple reading of Kineto JSON with the standard library, used
by tests as the reference the importer must agree with."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any


def read_json(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt") as fh:  # type: ignore[operator]
        data = json.load(fh, parse_float=Decimal)
    return data if isinstance(data, dict) else {"traceEvents": data}


def category_counts(doc: dict[str, Any]) -> Counter[tuple[str | None, str]]:
    return Counter((e.get("cat"), e.get("ph")) for e in doc["traceEvents"])
