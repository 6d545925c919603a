"""How often holder faults land at the moments issue 26 aims at, measured from stored runs.

Read from each run's history and spec alone (so runs made before the overlap mechanism count the
same way as runs made after it):

- ``in call``: a fault on a holder's node began inside one of its writes' client call (after the
  agent's ``work_ms``, before the reply); ``in work``: inside the work, before the send; the rest
  began outside any write of that node;
- ``resume in flight``: such a fault ended while another worker had a write in flight;
- ``released together``: two faults on different holders ended within 50 ms of each other;
- ``pairs``: faults in force together (any nodes), and their total shared time.

    PYTHONPATH=. python3 bench/overlap_moments.py RUN_DIR [RUN_DIR...]
    PYTHONPATH=. python3 bench/overlap_moments.py --run 3 --time-limit 20 [--overlap 0.3]
        [--command fencecheck] [--store /tmp/moments]

With ``--run N`` it first makes N seeded runs of the reference system with the default faults
(seeds 1..N) by ``--command`` (``fencecheck`` is main's installed command: the "before"; the
default runs this checkout: the "after"), then measures them. Prints one row per run and a total.
Exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.record import NEMESIS, NemesisEvent, read_history
from harness.record.files import load_object
from harness.record.run_record import RunRecord

__all__ = ["Moments", "main", "moments_of"]

_TOGETHER_NS = 50_000_000


@dataclass
class Moments:
    """The counts of one or more runs (module docs)."""

    holder_faults: int = 0
    in_call: int = 0
    in_work: int = 0
    ends: int = 0
    resume_in_flight: int = 0
    released_together: int = 0
    pairs: int = 0
    pair_seconds: float = 0.0

    def add(self, other: Moments) -> None:
        """Add ``other``'s counts to these."""
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def row(self) -> str:
        """The counts as one line."""

        def share(n: int, d: int) -> str:
            return f"{n}/{d} ({n / d:.0%})" if d else f"{n}/0"

        return (
            f"holder faults {self.holder_faults}: in call {share(self.in_call, self.holder_faults)}"
            f", in work {share(self.in_work, self.holder_faults)}; resume in flight "
            f"{share(self.resume_in_flight, self.ends)}; released together "
            f"{self.released_together}; pairs in force together {self.pairs} "
            f"({self.pair_seconds:.2f} s)"
        )


def moments_of(run: Path) -> Moments:
    """The moments of the run stored in ``run``."""
    record = RunRecord.from_json(load_object(run / "test.json"))
    work_ns = record.spec.work_ms * 1_000_000
    events = list(read_history(run / "history.jsonl"))
    workers = {e.node for e in events if e.node and e.process != NEMESIS}
    open_writes: dict[str, int] = {}  # node -> invoke time of its open write
    open_faults: dict[Any, tuple[int, tuple[str, ...]]] = {}
    holder_ends: list[tuple[int, str]] = []
    found = Moments()
    for event in events:
        at = event.time
        if event.process != NEMESIS:
            if event.f == "write" and event.type == "invoke" and event.node:
                open_writes[event.node] = at
            elif event.f == "write" and event.node:
                open_writes.pop(event.node, None)
            continue
        fault = NemesisEvent.of(event)
        targets = fault.targets
        on_holders = [t for t in targets if t in workers]
        key = fault.window if fault.window is not None else fault.kind
        if fault.action == "start" and fault.applied:
            found.pairs += len(open_faults)
            open_faults[key] = (at, targets)
            for node in on_holders:
                found.holder_faults += 1
                began = open_writes.get(node)
                if began is not None and at >= began + work_ns:
                    found.in_call += 1
                elif began is not None:
                    found.in_work += 1
        elif fault.action == "stop" and key in open_faults:
            started, _ = open_faults.pop(key)
            for other_start, _ in open_faults.values():
                found.pair_seconds += (at - max(started, other_start)) / 1e9
            for node in on_holders:
                found.ends += 1
                if any(other != node for other in open_writes):
                    found.resume_in_flight += 1
                if any(node != n and at - t <= _TOGETHER_NS for t, n in holder_ends):
                    found.released_together += 1
                holder_ends.append((at, node))
    return found


def _make_runs(
    count: int, time_limit: float, overlap: float | None, command: str, store: Path
) -> list[Path]:
    """``count`` seeded reference runs with the default faults; their folders."""
    base = [command] if command != "this" else [sys.executable, "-m", "harness"]
    folders = []
    for seed in range(1, count + 1):
        argv = [*base, "run", "--system", "reference", "--time-limit", f"{time_limit:g}"]
        argv += ["--seed", str(seed), "--store", str(store), "--no-progress", "--json"]
        if overlap is not None:
            argv += ["--overlap", f"{overlap:g}"]
        # Another command (main's installed one) must not import this checkout's code.
        env = (
            None
            if command == "this"
            else {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        )
        where = None if command == "this" else "/"
        done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=where)
        try:
            folders.append(Path(json.loads(done.stdout)["run_dir"]))
        except (ValueError, KeyError):
            print(f"seed {seed}: no run ({done.returncode}): {done.stderr.strip()[-300:]}")
    return folders


def main(argv: list[str] | None = None) -> int:
    """Measure the runs named (or made) and print a row each and the total."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--run", type=int, default=0, help="make this many runs first")
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--overlap", type=float, default=None)
    parser.add_argument("--command", default="this", help="'this' checkout or e.g. fencecheck")
    parser.add_argument("--store", type=Path, default=Path("/tmp/overlap-moments"))
    options = parser.parse_args(argv)
    runs = list(options.runs)
    if options.run:
        runs += _make_runs(
            options.run, options.time_limit, options.overlap, options.command, options.store
        )
    total = Moments()
    for run in runs:
        found = moments_of(run)
        total.add(found)
        print(f"{run.name}: {found.row()}")
    print(f"total of {len(runs)} run(s): {total.row()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
