"""Kernel names for people: demangled where mangled, shortened labels that stay apart."""

from __future__ import annotations

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.reports.html.data import build_report_data
from neuron_explorer.reports.names import demangle, short_kernel_name
from tests.conftest import KINETO

CK = "_ZN2ck16tensor_operation6device12_GLOBAL__N_137kernel_grouped_conv_fwd_dl_multiple_dEv"


def test_mangled_names_are_demangled_and_others_pass_through() -> None:
    assert demangle("_Z3fooPKc") == "foo(char const*)"
    assert demangle(CK) == "ck::tensor_operation::device::_GLOBAL__N_1::kernel_grouped_conv_fwd_dl_multiple_d()"
    assert demangle("void at::native::vectorized_elementwise_kernel<4>()") == (
        "void at::native::vectorized_elementwise_kernel<4>()"
    )
    assert demangle("_Znot a symbol") == "_Znot a symbol"  # unreadable: shown as recorded


def test_short_labels_keep_the_template_arguments_that_tell_kernels_apart() -> None:
    a = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*, int)"
    b = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 3, 128, 1>(float*, int)"
    la, lb = short_kernel_name(a, 60), short_kernel_name(b, 60)
    assert la != lb and len(la) <= 60 and len(lb) <= 60
    assert la.startswith("CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>")
    assert short_kernel_name("aten::mm", 60) == "aten::mm"


def test_report_shows_demangled_kernel_names_and_keeps_the_recorded_one(tmp_path) -> None:
    trace = ne.load(KINETO / "hta" / "nccl_data.json.gz")  # A100 cuDNN/CUTLASS kernels, mangled
    data = build_report_data(trace, analyze(trace))
    rows = data["tables"]["kernels"]["rows"]
    recorded = [n for n in rows["mangled"] if n.startswith("_Z")]
    assert recorded, "the trace has mangled kernel names"
    for name, mangled in zip(rows["name"], rows["mangled"]):
        assert name == demangle(mangled)
    assert not any(n.startswith("_Z") and demangle(n) != n for n in rows["name"])
    column = next(c for c in data["tables"]["kernels"]["columns"] if c["key"] == "name")
    assert column["title"] == "mangled"  # the cell's tooltip is the recorded name
