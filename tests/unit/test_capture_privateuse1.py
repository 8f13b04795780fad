"""A PrivateUse1 backend renamed ``neuron`` (as TorchNeuron registers Trainium) is profiled.

The backend is pure Python (``_setup_privateuseone_for_python_backend``), so it must live in a
fresh process: a PrivateUse1 rename is once per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    import torch
    torch.utils.backend_registration._setup_privateuseone_for_python_backend("neuron")
    import neuron_explorer as ne

    with ne.profile(output=sys.argv[1]) as prof:
        x = torch.randn(8, 8)
        y = torch.nn.functional.relu(x)
    t = ne.load(prof.path)
    df = t.to_pandas()
    print(json.dumps({
        "supported": sorted(a.name for a in torch.profiler.supported_activities()),
        "activities": t.metadata["profiler_options"]["activities"],
        "accelerator": t.metadata["accelerator"],
        "device_type": t.metadata.get("device_type"),
        "host_device_types": sorted(set(df[df["kind"].isin(["cpu_op", "python"])]["device_type"].astype(str))),
        "relu_line": df[df["name"] == "aten::relu"]["src_line"].tolist(),
        "errors": prof.errors,
    }))
    """
)


def test_renamed_privateuse1_backend_is_profiled_as_neuron(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "t.parquet")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # torch exposes the renamed backend's activity (ProfilerActivity.PrivateUse1, alias NEURON)
    assert "CPU" in out["activities"] and "PrivateUse1" in out["activities"]
    assert out["accelerator"] == "neuron" and out["device_type"] == "neuron"
    # host events stay on the CPU; device events and device memory would read "neuron"
    assert out["host_device_types"] == ["cpu"]
    assert out["relu_line"] == [9]  # the relu line of CHILD
    assert out["errors"] == []
