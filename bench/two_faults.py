"""A bug that needs two faults together: caught with both, never with either alone.

``store-forgets`` (the reference store keeps its highest-seen epochs in memory only, its log
durable: a fencing mark in a cache or an unpersisted key in front of durable data) loses
nothing to a holder pause alone (the store still knows the mark) or to a store restart alone (no
holder is stale then); a stale write is accepted only when a restart of the store meets a holder
paused past its lease. For each setting this runs ``--runs`` seeded runs of
``--time-limit`` seconds (seeds ``--first-seed`` onwards, so two copies can split the seeds) and
counts the ones that end invalid with a stale write:

- ``defaults``: ``run --bug store-forgets`` with the faults it picks (its exposed_by);
- ``overlap``: holder pauses and store kills drawn as overlapping pairs (``--overlap 1``);
- ``pause alone``, ``kill alone``: either fault by itself (``--overlap 0``), each a control
  run (``--control``: the exposure check knows neither can show the bug, and would refuse it).

    PYTHONPATH=. python3 bench/two_faults.py [--runs 20] [--time-limit 60] [--bug store-forgets]
        [--settings defaults,overlap,pause,kill] [--first-seed 1] [--store /tmp/two-faults]

Prints one line per run and one per setting (caught / runs); exit status 0 whatever the numbers.
A setting without ``--control`` that the run refuses before starting (its exposure check: it
cannot show the bug, exit 3) is counted as refused, not as missed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["SETTINGS", "Ran", "main", "run_json"]

SETTINGS: Final[dict[str, tuple[str, ...]]] = {
    "defaults": (),
    "overlap": ("--nemesis", "pause,kill", "--target", "holder,store", "--overlap", "1"),
    "pause": ("--nemesis", "pause", "--target", "holder", "--overlap", "0", "--control"),
    "kill": ("--nemesis", "kill", "--target", "store", "--overlap", "0", "--control"),
}
"""The options of each setting, after ``run --bug BUG``: either fault alone is a control run
(``--control``), which the exposure check would refuse otherwise."""


@dataclass(frozen=True, slots=True)
class Ran:
    """One ``fencecheck run --json`` in its own process: its exit code, its printed result
    (``None`` when it printed none: refused before starting, or broken) and its last words."""

    code: int
    result: dict[str, Any] | None
    stderr: str

    def why_none(self) -> str:
        """Why there is no result: the exit code and the end of what the run said."""
        return f"no result (exit {self.code}): {self.stderr.strip()[-200:]}"


def run_json(options: list[str], seed: int, time_limit: float, store: Path) -> Ran:
    """``fencecheck run OPTIONS`` with ``seed`` and ``time_limit`` into ``store``, as a user
    types it (a process of its own: a run that breaks cannot take the bench with it)."""
    argv = [sys.executable, "-m", "harness", "run", *options]
    argv += ["--time-limit", f"{time_limit:g}", "--seed", str(seed)]
    argv += ["--store", str(store), "--no-progress", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = None
    return Ran(done.returncode, result if isinstance(result, dict) else None, done.stderr)


def _caught(bug: str, setting: str, seed: int, time_limit: float, store: Path) -> str:
    """One run: ``caught``, ``missed`` or why it did not say (its exit code and last words)."""
    options = ["--system", "reference", "--bug", bug, *SETTINGS[setting]]
    done = run_json(options, seed, time_limit, store)
    # A control run warns with the same words and goes ahead: only another run is refused.
    refusable = "--control" not in SETTINGS[setting]
    if refusable and done.code == 3 and "cannot show in this run" in done.stderr:
        return "refused"  # the run's exposure check: this setting cannot show the bug
    result = done.result
    if result is None:
        return done.why_none()
    if done.code == 1 and "stale-write" in result.get("anomaly_types", ()):
        return "caught"
    if done.code in (0, 1):
        return "missed"
    return f"unknown (exit {done.code})"


def main(argv: list[str] | None = None) -> int:
    """Run every setting asked for and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--bug", default="store-forgets")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--store", type=Path, default=Path("/tmp/two-faults"))
    options = parser.parse_args(argv)
    totals: dict[str, tuple[int, int, int]] = {}
    for setting in options.settings.split(","):
        said_all = []
        for seed in range(options.first_seed, options.first_seed + options.runs):
            said = _caught(options.bug, setting, seed, options.time_limit, options.store)
            said_all.append(said)
            print(f"{setting} seed {seed}: {said}", flush=True)
        totals[setting] = (said_all.count("caught"), said_all.count("refused"), options.runs)
    for setting, (caught, refused, runs) in totals.items():
        refusals = (
            f" ({refused} refused before starting: it cannot show the bug)" if refused else ""
        )
        print(
            f"{options.bug} {setting}: caught in {caught}/{runs} runs of "
            f"{options.time_limit:g} s{refusals}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
