"""The live progress line of ``fencecheck run``: elapsed, ops/s, outcomes, the fault in force."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from harness.run.recorder import Recorder

__all__ = ["RunProgress"]


class RunProgress:
    """A rich ``Live`` display fed by a :class:`Recorder`'s counters; silent when disabled."""

    def __init__(self, recorder: Recorder, time_limit: float, console: Console, enabled: bool):
        self._recorder = recorder
        self._limit = time_limit
        self._console = console
        self._live: Live | None = None
        self._enabled = enabled
        self._last = (time.monotonic(), 0)
        self._rate = 0.0

    def __enter__(self) -> RunProgress:
        if self._enabled:
            self._live = Live(
                self._render(), console=self._console, refresh_per_second=4, transient=False
            )
            self._live.__enter__()
        return self

    def refresh(self) -> None:
        """Redraw with the current counters."""
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Table:
        c = self._recorder.counters
        done = sum(c.completions.values())
        now = time.monotonic()
        then, before = self._last
        if now - then >= 1.0:
            self._rate = (done - before) / (now - then)
            self._last = (now, done)
        faults = ", ".join(f"{k} {v}" for k, v in c.faults_in_force.items()) or "none"
        # One sentence per line: side by side in cells, an 80-column CI log would wrap each
        # cell into a column of fragments ("writes: 146 / accepted 2 / refused").
        table = Table.grid()
        table.add_row(
            f"[bold]{self._recorder.seconds():5.1f} s[/] of {self._limit:.0f} s, "
            f"{self._rate:,.0f} ops/s"
        )
        table.add_row(
            f"writes: [green]{c.writes['ok']:,} accepted[/], "
            f"[yellow]{c.writes['refused']:,} refused[/], "
            f"[red]{c.writes['fail']:,} failed[/], [magenta]{c.writes['info']:,} unknown[/]"
        )
        table.add_row(
            f"faults: {c.faults_applied} applied"
            + (f", [red]{c.faults_failed} failed[/]" if c.faults_failed else "")
            + f"; in force: [bold]{faults}[/]"
        )
        return table

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(exc_type, exc, tb)
            self._live = None
