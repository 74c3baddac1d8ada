"""Running a command: its command line read into the stage's options (strictly, before any
work), the help, the logging set-up, and clean failures: a bad command line or bad input exits
2 with one line and writes nothing. Every entry point (``scripts/*.py``, ``sweet-rl <stage>``,
the ``python -m`` helpers, the viewers) is ``run_stage(stage function, options class)``.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Callable, Optional, Sequence



class CommandLineError(ValueError):
    """A bad ``-v``/``--log_level`` (the stage's own flags are read by :mod:`sweet_rl.flags`)."""


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Libraries whose INFO lines would drown a stage's output: one line per HTTP request (httpx,
# openai), model-loading chatter (open_clip, the hub, urllib3 retries).
NOISY = ("httpx", "httpx2", "httpcore", "openai", "open_clip", "huggingface_hub", "urllib3",
         "filelock", "PIL", "selenium")


def log_level_from(args: Sequence[str]):
    """``(args without them, level)`` for ``-v``/``--verbose`` (INFO for every library) and
    ``--log_level LEVEL``; None when neither is given."""
    rest, level, skip = [], None, False
    for at, arg in enumerate(args):
        if skip:
            skip = False
        elif arg in ("-v", "--verbose"):
            level = "INFO"
        elif arg == "--log_level" or arg.startswith("--log_level="):
            value = arg.split("=", 1)[1] if "=" in arg else (args[at + 1] if at + 1 < len(args)
                                                             else "")
            skip = "=" not in arg
            if value.upper() not in LOG_LEVELS:
                raise CommandLineError(f"--log_level must be one of {', '.join(LOG_LEVELS)}, "
                                       f"got {value!r}")
            level = value.upper()
        else:
            rest.append(arg)
    return rest, level


def quiet_logs(level: Optional[str] = None) -> None:
    """What a stage shows: by default our own notices (INFO) and every library's warnings, a
    progress bar and the metrics line; ``level`` (``-v``: INFO, ``--log_level``) applies to
    everything. DeepSpeed's "Setting accelerator to CPU" warning, printed on every import on
    a machine without a GPU, is shown only from INFO on."""
    logging.basicConfig(level=getattr(logging, level or "WARNING"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("sweet_rl").setLevel(getattr(logging, level or "INFO"))
    for name in NOISY:
        logging.getLogger(name).setLevel(getattr(logging, level or "WARNING"))
    if level not in ("DEBUG", "INFO"):
        # DeepSpeed (re)configures its own logger on import: a filter is what survives that
        logging.getLogger("DeepSpeed").addFilter(
            lambda record: "Setting accelerator to CPU" not in record.getMessage())


def run_stage(stage: Callable[[Any], Any], options: type,
              argv: Optional[Sequence[str]] = None) -> None:
    """Read the command line into ``options`` (:mod:`sweet_rl.flags`), then run ``stage``
    with them. ``-h``/``--help`` anywhere prints the help and runs nothing; a bad command line
    or a known input error exits 2 with one line, before anything is written."""
    from sweet_rl.flags.parse import HelpRequested, parse_command_line

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if any(arg in ("-h", "--help") for arg in args):
            raise HelpRequested()
        args, level = log_level_from(args)
        opts = parse_command_line(options, args)
    except HelpRequested:
        from sweet_rl.flags.help import render_help

        _print(render_help(options, os.path.basename(sys.argv[0] or "stage")))
        sys.exit(0)
    except (ValueError, OSError) as err:  # UsageError, a bad value, a missing config file
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    from sweet_rl.models.openai_compat import EndpointUnavailable
    from sweet_rl.records import RecordError

    quiet_logs(level)
    try:
        stage(opts)
    except (RecordError, EndpointUnavailable, OSError, ValueError) as err:
        # OSError: e.g. a model that is neither a folder nor reachable on the hub
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def _print(text: str) -> None:
    try:
        print(text, flush=True)
    except BrokenPipeError:  # ``--help | head``: the reader stopped early, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
