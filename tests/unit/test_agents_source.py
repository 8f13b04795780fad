"""Source access for agents: code from inside the roots, nothing from outside them."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from neuron_explorer.agents import source
from neuron_explorer.agents.source import MAX_SOURCE_BYTES, SourceAccess, SourceAccessError, default_roots


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """root/ with model.py and pkg/layer.py; a secret beside root/ that must stay unreachable."""
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "model.py").write_text("".join(f"line {n}\n" for n in range(1, 31)))
    (root / "pkg" / "layer.py").write_text("def forward(x):\n    return x @ w\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    return {"root": root, "secret": secret, "tmp": tmp_path}


def test_context_shows_the_numbered_lines_around_the_target(tree: dict[str, Path]) -> None:
    ctx = SourceAccess([tree["root"]]).context("model.py", 10, context=2)

    assert [(x["line"], x["text"]) for x in ctx["lines"]] == [(n, f"line {n}") for n in range(8, 13)]
    assert [x["line"] for x in ctx["lines"] if x["is_target"]] == [10]
    assert ctx["total_lines"] == 30
    assert ctx["path"] == os.path.realpath(tree["root"] / "model.py")


def test_relative_src_files_are_looked_up_in_each_root_and_absolute_ones_inside_a_root(tree: dict[str, Path]) -> None:
    access = SourceAccess([tree["tmp"] / "elsewhere", tree["root"]])

    assert access.context("pkg/layer.py", 2, context=0)["lines"][0]["text"] == "    return x @ w"
    assert access.context(str(tree["root"] / "model.py"), 1, context=0)["lines"][0]["text"] == "line 1"


def test_the_context_is_clipped_at_the_file_edges(tree: dict[str, Path]) -> None:
    ctx = SourceAccess([tree["root"]]).context("model.py", 1, context=5)

    assert (ctx["first_line"], ctx["last_line"]) == (1, 6)


@pytest.mark.parametrize("path", ["../secret.txt", "../../etc/passwd", "pkg/../../secret.txt", "/etc/passwd"])
def test_paths_that_escape_the_roots_are_refused(tree: dict[str, Path], path: str) -> None:
    with pytest.raises(SourceAccessError, match="refused"):
        SourceAccess([tree["root"]]).context(path, 1)


def test_a_symlink_inside_a_root_that_points_outside_is_refused(tree: dict[str, Path]) -> None:
    (tree["root"] / "innocent.py").symlink_to(tree["secret"])
    (tree["root"] / "etc").symlink_to("/etc")

    access = SourceAccess([tree["root"]])
    with pytest.raises(SourceAccessError, match="refused"):
        access.context("innocent.py", 1)
    with pytest.raises(SourceAccessError, match="refused"):
        access.context("etc/passwd", 1)


def test_a_symlink_that_stays_inside_the_root_is_followed(tree: dict[str, Path]) -> None:
    (tree["root"] / "alias.py").symlink_to(tree["root"] / "model.py")

    assert SourceAccess([tree["root"]]).context("alias.py", 3, 0)["lines"][0]["text"] == "line 3"


def test_a_root_that_is_itself_a_symlink_is_resolved_first(tree: dict[str, Path]) -> None:
    link = tree["tmp"] / "link-to-root"
    link.symlink_to(tree["root"], target_is_directory=True)

    assert SourceAccess([link]).context("model.py", 2, 0)["lines"][0]["text"] == "line 2"


def test_missing_files_binary_files_directories_and_lines_past_the_end_say_so(tree: dict[str, Path]) -> None:
    (tree["root"] / "blob.bin").write_bytes(b"\x00\x01\x02")
    access = SourceAccess([tree["root"]])

    with pytest.raises(SourceAccessError, match=r"no file 'nope\.py'"):
        access.context("nope.py", 1)
    with pytest.raises(SourceAccessError, match="binary"):
        access.context("blob.bin", 1)
    with pytest.raises(SourceAccessError, match="'pkg' is not a regular file"):
        access.context("pkg", 1)
    with pytest.raises(SourceAccessError, match="has 30 lines"):
        access.context("model.py", 31)
    with pytest.raises(SourceAccessError, match="1 or more"):
        access.context("model.py", 0)


def test_a_server_without_roots_shows_no_code_and_says_how_to_give_one() -> None:
    with pytest.raises(SourceAccessError, match="--source-root"):
        SourceAccess([]).context("model.py", 1)


def test_a_hard_link_inside_a_root_to_a_file_outside_it_is_refused(tree: dict[str, Path]) -> None:
    os.link(tree["secret"], tree["root"] / "hard.py")
    access = SourceAccess([tree["root"]])

    with pytest.raises(SourceAccessError, match="2 hard links") as err:
        access.context("hard.py", 1)
    assert "password" not in str(err.value)
    with pytest.raises(SourceAccessError, match="hard links"):
        access.read_lines(str(tree["root"] / "hard.py"))  # the path diff reads lines by


@pytest.mark.parametrize("hidden", [".ssh/id_rsa", ".env", "pkg/.git/config"])
def test_hidden_files_under_a_root_are_refused(tree: dict[str, Path], hidden: str) -> None:
    path = tree["root"] / hidden
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("TOKEN=secret\n")

    with pytest.raises(SourceAccessError, match="hidden") as err:
        SourceAccess([tree["root"]]).context(hidden, 1)
    assert "TOKEN" not in str(err.value)


def test_a_hidden_directory_given_as_a_root_is_served_below_it(tree: dict[str, Path]) -> None:
    site = tree["tmp"] / ".venv" / "site-packages"
    site.mkdir(parents=True)
    (site / "lib.py").write_text("x = 1\n")

    assert SourceAccess([site]).context("lib.py", 1, 0)["lines"][0]["text"] == "x = 1"


@pytest.mark.parametrize("path", ["/proc/self/status", "/proc/self/environ", "/sys/kernel/hostname", "/dev/null"])
def test_system_files_are_refused_even_under_a_root_of_slash(path: str) -> None:
    with pytest.raises(SourceAccessError, match="refused"):
        SourceAccess(["/"]).context(path, 1)


def test_fifos_non_utf8_and_oversized_files_are_refused_without_blocking(tree: dict[str, Path]) -> None:
    os.mkfifo(tree["root"] / "pipe.py")  # opening it for reading would block forever
    (tree["root"] / "latin1.py").write_bytes("caf\xe9 = 1\n".encode("latin-1"))
    with open(tree["root"] / "huge.py", "wb") as fh:
        fh.truncate(MAX_SOURCE_BYTES + 1)  # sparse: no disk used
    access = SourceAccess([tree["root"]])

    with pytest.raises(SourceAccessError, match="not a regular file"):
        access.context("pipe.py", 1)
    with pytest.raises(SourceAccessError, match="not UTF-8"):
        access.context("latin1.py", 1)
    with pytest.raises(SourceAccessError, match="too large"):
        access.context("huge.py", 1)


def test_the_roots_are_the_users_or_else_the_current_directory_but_never_slash(
    tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree["root"])
    assert default_roots([]) == [tree["root"]]
    assert default_roots([str(tree["tmp"])]) == [tree["tmp"]]

    monkeypatch.chdir("/")
    assert default_roots([]) == []


# ------------------------------------------------------------------------------ swapping paths
def _race(access: SourceAccess, asks: list[str], swap, calls: int) -> tuple[list[str], list[Exception]]:
    """Call ``access.read_text`` ``calls`` times over ``asks`` while a thread runs ``swap`` in a loop."""
    stop = threading.Event()
    swaps = [0]

    def swapper() -> None:
        while not stop.is_set():
            swap()
            swaps[0] += 1

    served: list[str] = []
    errors: list[Exception] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # let the threads interleave between the walk's system calls
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        for n in range(calls):
            try:
                served.append(access.read_text(asks[n % len(asks)])[1])
            except Exception as exc:  # the test checks that every one is a SourceAccessError
                errors.append(exc)
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert swaps[0] > 100, "the swapping thread barely ran"
    return served, errors


def _swap_dir_and_symlink(path: Path, target: str) -> Callable[[], None]:
    """Each call turns ``path`` from a directory into a symlink to ``target`` and back."""
    stash = path.with_name(path.name + "-stash")

    def swap() -> None:
        os.rename(path, stash)
        os.symlink(target, path)
        os.unlink(path)
        os.rename(stash, path)

    return swap


@pytest.mark.parametrize("target", ["hidden", "outside"])
def test_swapping_a_directory_and_a_symlink_during_the_walk_never_serves_what_is_refused(
    tree: dict[str, Path], target: str
) -> None:
    root = tree["root"]
    (root / "swap").mkdir()
    (root / "swap" / "code.py").write_text("safe = 1\n")
    hidden = root / ".secrets"
    hidden.mkdir()
    (hidden / "code.py").write_text("TOKEN = 'hidden'\n")
    outside = tree["tmp"] / "outside"
    outside.mkdir()
    (outside / "code.py").write_text("TOKEN = 'outside'\n")
    link = ".secrets" if target == "hidden" else str(outside)
    access = SourceAccess([root])

    served, errors = _race(
        access, ["swap/code.py", str(root / "swap" / "code.py")], _swap_dir_and_symlink(root / "swap", link), 3000
    )

    assert served and set(served) == {"safe = 1\n"}
    assert all(isinstance(e, SourceAccessError) and str(e) and "\n" not in str(e) for e in errors), errors[:3]
    assert not any("TOKEN" in str(e) for e in errors)


def test_swapping_in_a_symlink_to_proc_under_a_root_of_slash_never_serves_proc(tree: dict[str, Path]) -> None:
    (tree["root"] / "self").mkdir()
    (tree["root"] / "self" / "status").write_text("safe = 1\n")
    access = SourceAccess(["/"])
    asks = [str(tree["root"] / "self" / "status"), str(tree["root"] / "self" / "status").lstrip("/")]

    served, errors = _race(access, asks, _swap_dir_and_symlink(tree["root"] / "self", "/proc/self"), 3000)

    assert served and set(served) == {"safe = 1\n"}
    assert all(isinstance(e, SourceAccessError) and str(e) and "\n" not in str(e) for e in errors), errors[:3]
    assert not any("Pid:" in str(e) for e in errors)


def test_a_symlink_to_proc_under_a_root_of_slash_is_refused(tree: dict[str, Path]) -> None:
    (tree["root"] / "status.py").symlink_to("/proc/self/status")
    (tree["root"] / "me").symlink_to("/proc/self", target_is_directory=True)
    access = SourceAccess(["/"])

    for path in ["/proc/self/status", str(tree["root"] / "status.py"), str(tree["root"] / "me" / "status")]:
        with pytest.raises(SourceAccessError, match="system file") as err:
            access.context(path, 1)
        assert "Pid:" not in str(err.value)


def test_a_file_on_procfs_is_refused_by_its_descriptor_even_where_the_path_check_misses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(source, "_SYSTEM_TOP", frozenset())  # as if procfs were mounted elsewhere

    with pytest.raises(SourceAccessError, match="system file"):
        SourceAccess(["/"]).context("/proc/self/status", 1)


def test_symlinks_inside_the_root_are_resolved_here_and_loops_end(tree: dict[str, Path]) -> None:
    root = tree["root"]
    (root / "up.py").symlink_to("pkg/../model.py")
    (root / "to_hidden.py").symlink_to(".git/config")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("TOKEN\n")
    (root / "loop.py").symlink_to("loop.py")
    access = SourceAccess([root])

    assert access.context("up.py", 2, 0)["lines"][0]["text"] == "line 2"
    with pytest.raises(SourceAccessError, match="hidden"):
        access.context("to_hidden.py", 1)
    with pytest.raises(SourceAccessError, match="symlinks"):
        access.context("loop.py", 1)


def test_every_os_error_is_one_line_naming_the_file_and_the_roots(tree: dict[str, Path]) -> None:
    access = SourceAccess([tree["root"]])

    with pytest.raises(SourceAccessError) as err:
        access.context("x" * 5000 + ".py", 1)  # ENAMETOOLONG
    assert "cannot read" in str(err.value) and str(os.path.realpath(tree["root"])) in str(err.value)
    assert "\n" not in str(err.value)


def test_nested_roots_serve_a_hidden_root_below_another(tree: dict[str, Path]) -> None:
    site = tree["root"] / ".venv" / "site-packages"
    site.mkdir(parents=True)
    (site / "lib.py").write_text("x = 1\n")
    (tree["root"] / ".venv" / "secret.py").write_text("TOKEN = 1\n")
    access = SourceAccess([tree["root"], site])

    assert access.context(".venv/site-packages/lib.py", 1, 0)["lines"][0]["text"] == "x = 1"
    assert access.context(str(site / "lib.py"), 1, 0)["lines"][0]["text"] == "x = 1"
    with pytest.raises(SourceAccessError, match="hidden"):
        access.context(".venv/secret.py", 1)


def test_a_line_of_almost_8_mb_is_shown_cut_with_its_neighbours(tmp_path: Path) -> None:
    from neuron_explorer.agents.source import MAX_LINE_CHARS

    (tmp_path / "gen.py").write_text("a = 1\n" + "x = '" + "y" * ((8 << 20) - 100) + "'\nb = 2\n")
    shown = SourceAccess([tmp_path]).context(str(tmp_path / "gen.py"), 2, 1)
    texts = [entry["text"] for entry in shown["lines"]]
    assert texts[0] == "a = 1" and texts[2] == "b = 2"
    assert texts[1].startswith("x = 'yyy") and texts[1].endswith(" chars cut]")
    assert len(texts[1]) < MAX_LINE_CHARS + 40
