"""The package's layers, read from its own imports (docs/architecture.md, "Layers").

Every import of a ``neuron_explorer`` module is read from the source with ``ast``: top-level,
lazy (inside a function) and ``TYPE_CHECKING`` imports alike, and a string constant that names a
module of the package exactly (``importlib.import_module("neuron_explorer.cli.record")``,
``python -m neuron_explorer.collectors.kineto._decode_worker``), since the code loads what it
names. On that graph:

- no circle: no two modules reach each other through imports;
- no import against the layer order: inside a folder that has an order (``ORDER``), a module
  imports only from its own unit or from a lower layer, and two units of one layer never import
  each other; a module placed in no layer of such a folder is an error too, so a new one is
  placed on purpose;
- no module imports a public face that contains it (``FACES``: the ``__init__`` modules that
  re-export their package's API), so each face stands above everything it exports; other
  packages' ``__init__`` modules hold content of their own (``analyzers/attribution``), which
  their modules may read as long as no circle forms;
- no folder holds more than 20 modules directly, no module is over 800 lines, and every
  package's ``__init__.py`` says in its docstring what it owns.

The checks run on the real package, and once on a small planted package with one circle, one
upward import, one import of a face and one unplaced module, which they must each find.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import neuron_explorer

PACKAGE = Path(neuron_explorer.__file__).resolve().parent

#: Layer ranks of each folder's units, from the ground up. A unit is a direct child of the
#: folder (a module or a subpackage); a higher rank may import a lower one, never the reverse,
#: and units of the same rank are independent of each other.
ORDER: dict[str, dict[str, int]] = {
    "neuron_explorer": {
        "trace": 0,
        "version": 1,
        "environment": 1,
        "parallel": 1,
        "collectors": 2,
        "analyzers": 3,
        "reports": 4,
        "tui": 5,
        "agents": 5,
        "cli": 6,
        "__main__": 7,
        "examples": 7,
    },
    "neuron_explorer.collectors": {
        "build": 0,
        "lines": 1,
        "kineto": 1,
        "neuron": 1,
        "capture": 2,
        "load": 3,
    },
    "neuron_explorer.analyzers": {
        "fields": -1,
        "core": 0,
        "metrics": 1,
        "perf": 1,
        "memory_live": 1,
        "attribution": 2,
        "ranks": 3,
        "graph": 4,
        "finding": 5,
        "result": 6,
        "ledger": 6,
        "verdict": 6,
        "rules": 7,
        "analysis": 8,
        "diff": 9,
        "sweep": 9,
    },
}
#: The public faces: the package, its data model, its analyzers and its Neuron import.
FACES = (
    "neuron_explorer",
    "neuron_explorer.trace",
    "neuron_explorer.analyzers",
    "neuron_explorer.collectors.neuron",
    "neuron_explorer.cli",
    "neuron_explorer.reports.html",
)
#: Modules that import nothing of the package at all.
LEAVES = ("neuron_explorer.version", "neuron_explorer.analyzers.fields", "neuron_explorer.trace.printable")
MAX_MODULES_PER_FOLDER = 20
MAX_MODULE_LINES = 800


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} (line {self.line}) -> {self.target}"


def modules_of(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the package ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module a dotted name lands in: itself, else its longest module prefix."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(root: Path) -> tuple[dict[str, Path], list[Import]]:
    """Every module of the package ``root`` and every import between two of them."""
    modules = modules_of(root)
    top = root.name
    found: list[Import] = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's own package upwards
                    here = name.split(".") if is_package else name.split(".")[:-1]
                    base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
                # `from pkg import sub` imports the submodule; `from pkg import name` the package
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(top + "."):
                targets = [node.value] if node.value in modules else []
            for target in targets:
                if target == top or target.startswith(top + "."):
                    resolved = _resolve(target, modules)
                    if resolved and resolved != name:
                        found.append(Import(name, resolved, getattr(node, "lineno", 0)))
    return modules, found


def circles(modules: dict[str, Path], imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for imp in imports:
        graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def against_order(
    modules: dict[str, Path],
    imports: list[Import],
    order: dict[str, dict[str, int]],
    faces: tuple[str, ...] = (),
    leaves: tuple[str, ...] = (),
) -> list[str]:
    """Every import that breaks the layer rule, and every module no layer places, in words."""
    problems = []
    for imp in imports:
        src, dst = imp.source.split("."), imp.target.split(".")
        if imp.source in leaves:
            problems.append(f"{imp}: {imp.source} must import nothing of the package")
            continue
        if imp.source.startswith(imp.target + "."):
            if imp.target in faces:
                problems.append(f"{imp}: imports the face of its own package, which stands above it")
            continue
        if imp.target.startswith(imp.source + "."):
            continue  # a package's __init__ reading its own modules
        common = 0
        while src[common] == dst[common]:
            common += 1
        folder = ".".join(src[:common])
        ranks = order.get(folder)
        if ranks is None:
            continue
        mine, theirs = src[common], dst[common]
        if mine not in ranks or theirs not in ranks:
            continue  # reported once per module below
        if ranks[mine] < ranks[theirs]:
            problems.append(f"{imp}: {folder}.{mine} is below {folder}.{theirs}")
        elif ranks[mine] == ranks[theirs]:
            problems.append(f"{imp}: {folder}.{mine} and {folder}.{theirs} are one layer and independent")
    for name in modules:
        parts = name.split(".")
        for depth in range(1, len(parts)):
            folder = ".".join(parts[:depth])
            if folder in order and parts[depth] not in order[folder]:
                problems.append(f"{name}: {folder}.{parts[depth]} has no layer in {folder} (add it to ORDER)")
    return problems


@pytest.fixture(scope="module")
def package_graph() -> tuple[dict[str, Path], list[Import]]:
    return imports_of(PACKAGE)


def test_the_package_has_no_import_circle(package_graph):
    modules, imports = package_graph
    assert circles(modules, imports) == []


def test_no_import_runs_against_the_layer_order(package_graph):
    modules, imports = package_graph
    assert against_order(modules, imports, ORDER, FACES, LEAVES) == []


def test_every_layered_folder_is_placed_and_exists(package_graph):
    modules, _ = package_graph
    for folder, ranks in ORDER.items():
        for unit in ranks:
            assert f"{folder}.{unit}" in modules, f"ORDER names {folder}.{unit}, which does not exist"


def test_folders_and_modules_stay_small():
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and (p / "__init__.py").exists())]:
        direct = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(direct) <= MAX_MODULES_PER_FOLDER, f"{folder} holds {len(direct)} modules"
    for path in PACKAGE.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines"


def test_every_package_says_what_it_owns():
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 8, f"{init.relative_to(PACKAGE.parent)} has no docstring saying what it owns"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checks_find_a_planted_circle_upward_import_face_import_and_unplaced_module(tmp_path):
    pkg = tmp_path / "neuron_explorer"
    _write(
        pkg,
        {
            "__init__.py": '"""face"""\nfrom neuron_explorer.low.a import thing\n',
            "low/__init__.py": "",
            "low/a.py": "def thing():\n    from neuron_explorer.high.b import other  # lazy, upward\n",
            "high/__init__.py": "",
            "high/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import neuron_explorer.high.c\n",
            "high/c.py": "import importlib\nimportlib.import_module('neuron_explorer.high.b')\n",
            "high/d.py": "from neuron_explorer import thing  # the face\n",
            "stray.py": "",
        },
    )
    modules, imports = imports_of(pkg)
    found = circles(modules, imports)
    assert ["neuron_explorer.high.b", "neuron_explorer.high.c"] in found
    assert len(found) == 1, found
    problems = against_order(modules, imports, {"neuron_explorer": {"low": 0, "high": 1}}, ("neuron_explorer",))
    assert any("low.a" in p and "is below neuron_explorer.high" in p for p in problems)
    assert any("high.d" in p and "face" in p for p in problems)
    assert any(p.startswith("neuron_explorer.stray:") for p in problems)
    assert len(problems) == 3, problems
