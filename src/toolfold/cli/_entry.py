"""The ``toolfold`` entry point: ``main``, and its error handling (one line, exit 2).

Every command is parsed by the click group of ``_main.py``, except the bare form of
the command run most often, ``toolfold run -- COMMAND...`` (no option before ``--``):
that one calls the same ``run_command`` click's ``run`` calls, with the options'
defaults (``RUN_DEFAULTS``, which a test keeps equal to what click parses), and so
skips importing click and building the command group (about a tenth of ``run``'s
start-up; ``benchmarks/bench_startup.py``). Any other argument list, a ``run`` with
an option included, goes through click as before."""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

from ._errors import CliError
from ._process import (
    Finished,
    collector_as_before,
    end_process,
    pause_collector,
    resume_collector,
)

RUN_DEFAULTS: dict[str, Any] = {
    "session": None,
    "store": None,
    "retain": "tail",
    "head_share": None,
    "max_bytes": None,
    "max_lines": None,
    "max_spill": None,
    "as_json": False,
    "ssh": None,
    "ssh_options": (),
    "exec_host_prefix": None,
    "remote_command": "toolfold exec-host",
    "remote_cwd": None,
    "lease": None,
    "sandbox_profile": "off",
    "sandbox_write": (),
    "sandbox_network": False,
    "detach": False,
    "detached_worker": None,
}
"""What click's ``run`` passes for every option not given (all of them but COMMAND)."""

COMPLETE_VAR = "_TOOLFOLD_COMPLETE"
"""click's shell-completion variable: when set, click answers, not the command."""


def bare_run(args: list[str]) -> tuple[str, ...] | None:
    """COMMAND of ``run -- COMMAND...`` with nothing else, else None (click parses it)."""
    if len(args) < 3 or args[0] != "run" or args[1] != "--" or COMPLETE_VAR in os.environ:
        return None
    return tuple(args[2:])


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``toolfold`` script: user errors end as one line on stderr
    (``toolfold: error: ...``) with exit status 2, never a traceback.

    As the process's entry point (``argv`` None: the console script, ``python -m
    toolfold.cli``), a command that finished (``run``) ends the process without the
    interpreter's teardown (``end_process``); called with ``argv``, every command ends
    in ``SystemExit`` as usual."""
    if argv is None:
        pause_collector()  # on again before the command runs (resume_collector)
    try:
        command = bare_run(sys.argv[1:] if argv is None else list(argv))
        if command is not None:
            from ._run_direct import run_bare

            run_bare(command)  # the direct driver, when it may take the run
            from ._run import run_command

            resume_collector()
            run_command(**RUN_DEFAULTS, command=command)
        else:
            from ._main import cli

            resume_collector()
            cli.main(args=argv, prog_name="toolfold", standalone_mode=False)
    except Finished as done:
        if argv is None:
            end_process(done.code)
        raise
    except CliError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except OSError as exc:
        # Last resort for file-system failures outside the store (a cwd that vanished,
        # an unwritable spill directory): still one line, naming the file.
        where = f" ({exc.filename})" if exc.filename else ""
        _fail(f"{exc.strerror or exc}{where}", 2)
    except Exception as exc:
        # click's own errors (only raised where click parsed the command line)
        click_failure(exc)
        raise
    finally:
        collector_as_before()
    raise SystemExit(0)


def click_failure(exc: Exception) -> None:
    """End with one line for one of click's usage errors or an abort; return for any
    other exception (the caller re-raises it)."""
    click = sys.modules.get("click")
    if click is None:
        return
    if isinstance(exc, click.UsageError):
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        _fail(" ".join(exc.format_message().split()) + hint, exc.exit_code)
    if isinstance(exc, click.ClickException):
        _fail(" ".join(exc.format_message().split()), exc.exit_code)
    if isinstance(exc, click.exceptions.Abort):
        _fail("aborted", 130)


def _fail(message: str, code: int) -> NoReturn:
    sys.stdout.flush()
    print(f"toolfold: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)
