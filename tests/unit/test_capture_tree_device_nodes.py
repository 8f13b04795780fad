"""The event-tree walk with device-side nodes named like ops.

On a GPU, ``experimental_event_tree()`` also holds device-side nodes (``_ExtraFields_Kineto``:
kernels, and a ``record_function`` range mirrored on the device as a gpu_user_annotation of the
same name, such as ``ProfilerStep#3``). On an H200 with torch 2.11 such a node, named like an
op the walk had already seen, was taken for that op (the walk learns a node's kind from its
name): reading its autograd sequence number failed and every exact line of the capture was
lost. No CUDA device runs here, so the test takes a real CPU capture's tree and adds device
nodes of its own beside the ops they share names with; the real nodes are read through a thin
proxy that only lets the test add children. The walk must give every op the same source as
without them.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from neuron_explorer.collectors.build.source_map import UserCode  # noqa: E402
from neuron_explorer.collectors.capture.capture_tree import FileResolver, walk_tree  # noqa: E402


class _ExtraFields_Kineto:  # named as torch names the device-side kind
    """What a device-side node carries: no autograd sequence number, no Python frames."""


class _DeviceNode:
    def __init__(self, name: str, like: Any) -> None:
        self.name = name
        self.extra_fields = _ExtraFields_Kineto()
        self.children: list[Any] = []
        self.correlation_id = 10**9 + like.correlation_id  # CUPTI's ids are their own
        self.start_time_ns = like.start_time_ns
        self.end_time_ns = like.end_time_ns
        self.start_tid = like.start_tid


class _Node:
    """A real tree node; ``children`` are proxied too, with device nodes added after every
    node whose name is in ``mirrored`` (the first time that name is met, the device node comes
    FIRST, so the walk learns the name from it; later it comes after the op)."""

    def __init__(self, node: Any, mirrored: set[str], seen: set[str]) -> None:
        self._node, self._mirrored, self._seen = node, mirrored, seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)

    @property
    def children(self) -> list[Any]:
        out: list[Any] = []
        for c in self._node.children:
            proxy = _Node(c, self._mirrored, self._seen)
            try:
                name = c.name
            except UnicodeDecodeError:  # a freed code object's name (capture_convert.UNREADABLE)
                name = None
            if name in self._mirrored:
                device = _DeviceNode(c.name, c)
                if c.name in self._seen:
                    out += [proxy, device]
                else:
                    self._seen.add(c.name)
                    out += [device, proxy]
            else:
                out.append(proxy)
        return out


def _capture(tmp_path: Path) -> Any:
    user = tmp_path / "device_nodes_user.py"
    user.write_text(
        textwrap.dedent(
            """
            import torch


            def step(model, x):
                with torch.profiler.record_function("my_range"):
                    y = model(x)
                return torch.relu(y).sum()
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import device_nodes_user as mod
    finally:
        sys.path.remove(str(tmp_path))
    model = torch.nn.Linear(8, 4)
    with torch.profiler.profile(with_stack=True) as prof:
        for _ in range(3):
            mod.step(model, torch.randn(4, 8))
    return prof.profiler.kineto_results, user


def _sources(roots: list[Any]) -> dict[int, tuple]:
    tree = walk_tree(roots, FileResolver(UserCode.default()), prune=False)
    return {corr: tree.sources[src] for corr, src in zip(tree.op_corr, tree.op_src)}


def test_a_device_node_named_like_an_op_leaves_every_op_its_line(tmp_path: Path) -> None:
    results, user = _capture(tmp_path)
    roots = results.experimental_event_tree()
    plain = _sources(roots)
    ours = {c: s for c, s in plain.items() if s[0] == str(user)}
    assert ours and {s[1] for s in ours.values()} >= {7, 8}  # the walk gives exact lines here
    mirrored = {"my_range", "aten::linear", "aten::relu"}
    with_device = _sources([_Node(r, mirrored, set()) for r in roots])
    assert with_device == plain  # same ops, same sources: the device nodes are no ops
