"""How the demo tells its story: readable in an 80-column terminal, with a closing summary.

Every chapter prints through a :class:`Story`: sentences wrap at the terminal's width;
a table is shown as a table when it fits the width (rich's console width), else row by
row as ``column: value`` lines; logins, keys, links and commands stand on a line of
their own and are never cut (a terminal or a copy takes them whole). Each chapter also
notes what it measured (:meth:`Story.measured`), and the demo ends with those figures
(:meth:`Story.summary`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

# Room a wrapping column keeps at least, when a table is shown as a table.
MIN_WRAP_WIDTH = 16


@dataclass
class Story:
    """The console the demo prints on, and the figures each chapter measured."""

    console: Console
    figures: dict[str, list[str]] = field(default_factory=dict)

    def chapter(self, number: int, title: str) -> None:
        """A chapter's heading."""
        self.console.print()
        self.console.rule(Text(f"{number}. {title}", style="bold"))

    def say(self, text: str) -> None:
        """A sentence (rich markup allowed), wrapped at the terminal's width."""
        self.console.print(text)

    def plain(self, text: str) -> None:
        """A sentence taken as it is (no markup: it may hold brackets), wrapped."""
        self.console.print(Text(text))

    def own_line(self, label: str, value: str) -> None:
        """A login, key, link or command: its label, then the value alone on its line, whole."""
        self.console.print(Text(label))
        self.console.print(f"  {value}", soft_wrap=True, markup=False, highlight=False)

    def table(
        self,
        title: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        wrap: str | None = None,
        right: Collection[str] = (),
    ) -> None:
        """A table when it fits the terminal's width, else each row as ``column: value`` lines.

        Only the ``wrap`` column (prose) may wrap inside the table; every other cell keeps its
        width, so nothing is cut. Cells are plain text (a subject may hold brackets).
        """
        console = self.console
        table = Table(
            title=Text(title, style="bold"),
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        for column in columns:
            table.add_column(
                column,
                justify="right" if column in right else "left",
                no_wrap=column != wrap,
                overflow="fold",
            )
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
        fixed = natural
        if wrap is not None:
            widest = max((len(row[columns.index(wrap)]) for row in rows), default=0)
            fixed = natural - max(widest, len(wrap)) + MIN_WRAP_WIDTH
        if natural <= console.width or fixed <= console.width:
            console.print(table)
            return
        console.print(Text(title, style="bold"))
        for row in rows:
            console.print(Padding(Text(row[0], style="bold"), (0, 0, 0, 2)))
            grid = Table.grid(padding=(0, 1))
            grid.add_column(style="dim", no_wrap=True)
            grid.add_column(overflow="fold")
            for name, cell in zip(columns[1:], row[1:], strict=True):
                grid.add_row(f"{name}:", Text(cell))
            console.print(Padding(grid, (0, 0, 0, 4)))

    def measured(self, topic: str, figure: str) -> None:
        """Keep a figure for the closing summary, under its topic."""
        self.figures.setdefault(topic, []).append(figure)

    def summary(self) -> None:
        """What the demo showed, topic by topic, with the figures the chapters measured."""
        self.console.print()
        self.console.rule(Text("What the demo showed", style="bold"))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        for topic, figures in self.figures.items():
            grid.add_row(topic, Text("; ".join(figures) + "."))
        self.console.print(grid)
