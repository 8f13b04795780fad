"""The help screen (``?``): every key of every view, read from the bindings themselves.

``help_sections`` walks the ``BINDINGS`` each class in ``HELP_CLASSES`` defines (its own, not
inherited ones) so the list cannot drift from what the keys do; a test checks that every class
of the TUI that defines bindings is listed here. Keys of one action (``[`` and ``]``, ``1``-``6``)
share a line. The screen scrolls, so it fits any terminal down to 80x24.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from neuron_explorer.tui.timeline_view import TimelineView
from neuron_explorer.tui.views.explore import ExplorePane
from neuron_explorer.tui.views.findings import FindingsPane
from neuron_explorer.tui.views.perf import PerfScreen
from neuron_explorer.tui.views.source import SourceFileScreen, SourcePane
from neuron_explorer.tui.views.timeline import TimelinePane
from neuron_explorer.tui.widgets import SnapshotTable, SortChooser

#: Keys shown by the name a user reads on the keyboard (Textual's own names otherwise).
KEY_NAMES = {"escape": "escape", "enter": "enter", "pageup": "pgup", "pagedown": "pgdn"}
#: The keys column (longer key lists wrap within it).
KEYS_WIDTH = 16
#: Said once under the keys: what no binding expresses.
MOUSE = "The mouse works too: click tabs, rows and column headers; scroll with the wheel."


@dataclass(frozen=True)
class HelpLine:
    keys: str
    what: str


def key_name(key: str) -> str:
    return KEY_NAMES.get(key) or format_key(key)


def binding_lines(bindings: list[BindingType]) -> list[HelpLine]:
    """One line per action (its name before any argument: ``step(-1)`` and ``step(1)`` share
    one); the binding's tooltip, when it has one, is the longer text shown after its name."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for binding in Binding.make_bindings(bindings):
        name = binding.action.removeprefix("app.").split("(")[0].split("_")[0]
        keys, texts = groups.setdefault(name, ([], []))
        shown = key_name(binding.key)
        if shown not in keys:
            keys.append(shown)
        text = binding.description + (f": {binding.tooltip}" if binding.tooltip else "")
        if text and text not in texts:
            texts.append(text)
    return [HelpLine(" ".join(keys), " / ".join(texts)) for keys, texts in groups.values()]


def own_bindings(cls: type) -> list[BindingType]:
    return list(cls.__dict__.get("BINDINGS", ()))


#: (section title, the classes whose own bindings it lists); the app's own come first.
HELP_CLASSES: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("Tables (Findings, Ops, Kernels, Source, Timeline events, Roofline)", (DataTable, SnapshotTable)),
    ("Choosing a sort column (s)", (SortChooser,)),
    ("Findings (2)", (FindingsPane,)),
    ("Ops and Kernels (3, 4)", (ExplorePane,)),
    ("Source (5)", (SourcePane, SourceFileScreen)),
    ("Timeline (6)", (TimelinePane, TimelineView)),
    ("Roofline (p)", (PerfScreen,)),
)


def help_sections(app_class: type) -> list[tuple[str, list[HelpLine]]]:
    """Every section of the help: the app's keys ("Everywhere"), then each view's."""
    sections = [("Everywhere", binding_lines(own_bindings(app_class)))]
    for title, classes in HELP_CLASSES:
        bindings = [b for cls in classes for b in own_bindings(cls)]
        sections.append((title, binding_lines(bindings)))
    sections.append(("This help", binding_lines(own_bindings(HelpScreen))))
    return sections


def help_renderable(sections: list[tuple[str, list[HelpLine]]]) -> Any:
    """Each section's title, then its keys on the left and what they do wrapped beside them."""
    parts: list[Any] = []
    for title, lines in sections:
        table = Table(box=None, show_header=False, pad_edge=False, expand=True, padding=(0, 2, 0, 0))
        table.add_column("keys", style="bold", width=KEYS_WIDTH)
        table.add_column("what", ratio=1)
        for line in lines:
            table.add_row(line.keys, line.what)
        parts += [Text(title, style="bold underline"), table, Text("")]
    parts.append(Text(MOUSE, style="dim"))
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    """Every key, by view; ``escape``, ``?`` or ``q`` close it, the arrows scroll it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close"),
    ]

    def __init__(self, sections: list[tuple[str, list[HelpLine]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(help_renderable(self.sections), id="help-body")

    def on_mount(self) -> None:
        scroll = self.query_one("#help", VerticalScroll)
        scroll.border_title = "Neuron Explorer: keys"
        scroll.border_subtitle = "↑ ↓ pgup pgdn scroll · escape closes"
        scroll.focus()

    def on_click(self) -> None:
        self.dismiss()
