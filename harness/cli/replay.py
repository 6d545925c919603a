"""``fencecheck replay``: run a stored run again with its seed and recorded fault schedule."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from harness.cli import EXIT_ERROR, cli
from harness.cli.check import exit_code
from harness.report import publish
from harness.run.plan import RunError
from harness.run.replay import ReplayError, load_run, replay
from harness.run.store import StoreError

__all__ = ["replay_command"]


@cli.command("replay")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store the replay here (default: the original run's store).",
)
@click.option(
    "--pin",
    is_flag=True,
    help="Aim each holder (or lock-leader) window at the node it landed on the first time, "
    "instead of whoever holds the lease (or leads) when it opens in the replay.",
)
@click.option("--no-progress", is_flag=True, help="No live display (CI logs).")
def replay_command(run_dir: Path, store: Path | None, pin: bool, no_progress: bool) -> None:
    """Run RUN_DIR (e.g. store/latest) again: same spec, seed and fault windows.

    Prints whether the verdict and the anomaly types reproduced. Exit code: the replay's
    verdict (0 valid, 1 invalid, 2 unknown), 3 when it could not run or broke off.
    """
    console = Console(stderr=True)
    try:
        stored = load_run(run_dir)
        windows = len(stored.schedule.windows)
        console.print(
            f"replaying {stored.run.path}: seed {stored.record.spec.seed}, "
            f"{windows} fault window{'' if windows == 1 else 's'} as recorded"
        )
        done = replay(
            stored,
            console=console,
            progress=not no_progress and console.is_terminal,
            store=store,
            pin=pin,
        )
        publish(done.outcome.run_dir)
    except (ReplayError, RunError, StoreError) as problem:
        raise click.ClickException(str(problem)) from None
    word = "reproduced" if done.reproduced else "not reproduced"
    click.echo(f"{word}: original {done.original}, replay {done.again}")
    if not done.reproduced:
        for why in done.why:
            click.echo(f"  {why}")
    click.echo(f"replay: {done.outcome.run_dir.path}")
    if done.outcome.error is not None:
        console.print(f"[red]error:[/] the replay broke off: {done.outcome.error}")
        raise click.exceptions.Exit(EXIT_ERROR)
    raise click.exceptions.Exit(exit_code(done.outcome.result))
