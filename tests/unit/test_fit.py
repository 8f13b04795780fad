"""Tables that fit their width (reports.fit): the order things give way in, names kept apart."""

from __future__ import annotations

import itertools

from neuron_explorer.reports.fit import Column, distinct, fit, middle, plain_table, printable

CUTLASS = [
    "Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(Params)",
    "Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4>(Params)",
    "Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
    "Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>(Params)",
    "Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4>(Params)",
    "Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)",
]


def test_names_are_cut_in_the_middle() -> None:
    assert middle("abcdefghij", 10) == "abcdefghij"
    cut = middle("abcdefghijklmnopqrstuvwxyz", 10)
    assert len(cut) == 10 and cut.startswith("abcdef") and cut.endswith("z") and "…" in cut


def test_different_names_never_read_the_same_and_show_where_they_differ() -> None:
    for width in (20, 30, 43, 60):
        labels = distinct(CUTLASS, width)
        assert len(set(labels)) == len(CUTLASS), (width, labels)
        assert all(len(x) <= width for x in labels)
    labels = distinct(CUTLASS, 43)
    assert any("256x64_16x4_nn" in x for x in labels)  # the part that differs is shown
    assert distinct(["same", "same", "other"], 10) == ["same", "same", "other"]


def test_names_equal_up_to_their_last_characters_still_differ() -> None:
    names = ["x" * 80 + "1", "x" * 80 + "2", "y" + "x" * 79 + "1"]
    labels = distinct(names, 12)
    assert len(set(labels)) == 3 and all(len(x) <= 12 for x in labels)


def test_control_characters_are_escaped() -> None:
    assert printable("a\x1b[31mb\x07\r\n\u202e") == "a\\x1b[31mb\\x07\\r\\n\\u202e"
    assert printable("aten::mm [2,3]") == "aten::mm [2,3]"


def test_headers_shorten_then_columns_drop_then_names_are_cut() -> None:
    cols = [
        Column("kernel", "name"),
        Column("category", "text", short="cat", drop=1),
        Column("count", short="n", meaning="launches"),
        Column("total"),
    ]
    rows = [[f"kernel_{'a' * 50}_{i}", "elementwise", "1,234", "12.8 ms"] for i in range(3)]
    wide = fit(cols, rows, 200)
    assert wide.headers == ["kernel", "category", "count", "total"] and not wide.legend
    narrow = fit(cols, rows, 60)
    assert "n" in narrow.headers and "n = launches" in narrow.legend
    assert "category" in narrow.dropped  # dropped before the name is cut below its floor
    for r in narrow.rows:
        assert r[-1] == "12.8 ms" and r[-2] == "1,234"  # numbers whole
    assert len({r[0] for r in narrow.rows}) == 3
    assert sum(narrow.widths) + 3 * len(narrow.widths) + 1 <= 60


def test_plain_tables_fit_and_wrap_their_legend() -> None:
    cols = [Column("item", "name"), Column("delta / step", short="delta", meaning="delta per step")]
    lines = plain_table(cols, [["a" * 100, "+1.5 ms"], ["b" * 100, "-2 ms"]], 40)
    assert all(len(x) <= 40 for x in lines)
    assert "delta = delta per step" in " ".join(lines)


def test_prose_breaks_only_between_a_figure_and_the_next_words() -> None:
    from rich.text import Text

    from neuron_explorer.reports.fit import KEEP, wrap_prose

    message = (
        "150 of 250 kernels are short (mean 3.6 µs, launch call 8.22 µs); the device sat with nothing "
        "queued while the host launched for 7.54 ms (40% of step time)."
    )
    metrics = ", ".join(f"{k}{KEEP}{v}" for k, v in [("busy_pct", "17.2%"), ("data_loading_ns", "0 ns")] * 4)
    for text in (message, metrics):
        for width in range(24, 90, 7):
            lines = [x.plain for x in wrap_prose(Text(text), width, hang=3)]
            assert " ".join(x.strip() for x in lines) == text.replace(KEEP, " ")  # nothing lost or added
            assert all(len(x) <= width for x in lines), (width, lines)
            for a, b in itertools.pairwise(lines):
                assert not (a[-1].isdigit() and b.strip()[0] in "µmn%sk"), (a, b)  # "8.22" / "µs" never apart
                assert not a.endswith("_ns") and not a.endswith("_pct"), (a, b)  # a metric keeps its value
    styled = Text.assemble(("WARNING", "yellow"), " ", ("a title long enough to wrap onto two lines", "bold"))
    lines = wrap_prose(styled, 30, hang=3)
    assert lines[0].spans[0].style == "yellow" and any(s.style == "bold" for s in lines[1].spans)
