"""The ``fencecheck`` command line.

Each subcommand lives in its own module of this package and registers itself on :data:`cli` when
imported; :func:`main` imports them all. Exit codes follow docs/design.md §8: 0 valid, 1 invalid,
2 unknown, 3 error (bad input, a broken environment, a usage mistake).
"""

from __future__ import annotations

import errno
import importlib
import os
import pkgutil
import signal
import sys
import threading
import traceback

import click
from rich.console import Console

from checkers.exit_codes import EXIT_ERROR, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID
from harness.node.interrupts import STOP_SIGNALS, Interrupted, sigterm_interrupts

__all__ = [
    "EXIT_ERROR",
    "EXIT_INVALID",
    "EXIT_UNKNOWN",
    "EXIT_VALID",
    "cli",
    "main",
    "run_as_program",
]


class _ClosedPipe(Exception):
    """Standard output's reader went away (not an OSError, which click would turn into exit 1)."""


class _Commands(click.Group):
    """The command group; a closed pipe in any command leaves it as :class:`_ClosedPipe`."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as problem:
            raise _ClosedPipe from problem


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fencecheck")
def cli() -> None:
    """fencecheck: does every sink refuse a write with an epoch lower than one it accepted?"""


def _load_commands() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def _pipe_closed_under_rich(_console: Console) -> None:
    raise BrokenPipeError(errno.EPIPE, "the reader of standard output went away")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``fencecheck`` console script."""
    # rich answers a closed pipe with SystemExit(1), which reads as "invalid" to a CI: let the
    # error reach the command group, which ends every closed pipe the same way.
    Console.on_broken_pipe = _pipe_closed_under_rich  # type: ignore[method-assign,assignment]
    _load_commands()
    try:
        code = cli.main(args=argv, prog_name="fencecheck", standalone_mode=False)
    except click.exceptions.Exit as done:
        code = done.exit_code
    except click.UsageError as problem:
        # One line, as every error (click's own block is four), and exit 3: click's 2 means
        # "unknown" here.
        command = problem.ctx.command_path if problem.ctx is not None else "fencecheck"
        click.echo(f"Error: {problem.format_message()} (see '{command} --help')", err=True)
        code = EXIT_ERROR
    except click.ClickException as problem:
        problem.show()
        code = EXIT_ERROR
    except click.exceptions.Abort as stop:
        # Click turns Ctrl-C (and our SIGTERM and SIGHUP) into Abort; a "no" to a prompt too.
        interrupted = isinstance(stop.__context__, KeyboardInterrupt)
        stopped = f"{_stopped_by(stop.__context__)}: the command stopped"
        click.echo(stopped if interrupted else "aborted", err=True)
        code = EXIT_ERROR
    except _ClosedPipe:
        code = _closed_pipe()
    except Exception as problem:  # the last resort: exit 1 would read as "invalid history" in CI
        code = _unexpected(problem)
    sys.exit(code if isinstance(code, int) else EXIT_VALID)


def run_as_program() -> None:
    """The ``fencecheck`` program: :func:`main`, after which stop signals are ignored.

    A finished command has written its results; a late signal (the fourth of four Ctrl-C) while
    the interpreter shuts down would only turn its exit code into a death by signal.
    """
    try:
        # From here SIGTERM and SIGHUP stop the command the way Ctrl-C does (no death by signal
        # without a word); a run installs its own rule while it runs (docs/design.md §8).
        with sigterm_interrupts(ctrl_c=True):
            main()
    except KeyboardInterrupt as stop:  # while the commands' modules were still being imported
        click.echo(f"{_stopped_by(stop)} while fencecheck started: nothing was run", err=True)
        sys.exit(EXIT_ERROR)
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)


def _stopped_by(stop: BaseException | None) -> str:
    """``interrupted by SIGTERM`` (Ctrl-C when the signal is not known)."""
    return f"interrupted by {stop.signal if isinstance(stop, Interrupted) else 'SIGINT'}"


EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE
"""A reader that closed the pipe early (``fencecheck list | head -1``): quiet, and the code a
program killed by SIGPIPE has, so that no CI reads the cut-short output as a verdict."""


def _closed_pipe() -> int:
    """End quietly after the reader of standard output went away."""
    # Later writes (the interpreter's flush at exit) must not raise again and print a traceback.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
    return EXIT_CLOSED_PIPE


def _unexpected(problem: Exception) -> int:
    """One line for an error nothing else caught; the traceback only when asked for."""
    if os.environ.get("FENCECHECK_TRACEBACK"):
        traceback.print_exception(problem)
    if isinstance(problem, OSError) and problem.errno in (errno.ENOSPC, errno.EDQUOT):
        cause = "the disk is full (no space left on device); free space and retry"
    else:
        cause = (
            f"{type(problem).__name__}: {problem}; this is a fencecheck bug: please report it "
            "with the command (FENCECHECK_TRACEBACK=1 shows where it happened)"
        )
    click.echo(f"error: {cause}. A run's recorded history is kept in its store folder.", err=True)
    return EXIT_ERROR
