"""What every stage script shares: logging set-up, clean failures for bad input, and a check of
the command line against the stage's parameters before any work starts.

``fire`` calls the stage function with the arguments it could match and only afterwards
complains about the ones left over ("Could not consume arg"), so a misspelled flag used to cost
a whole run (minutes of rendering or training) before the exit 2. :func:`check_command_line`
replays fire's own matching rules (``fire/core.py``: ``_ParseKeywordArgs``, ``_ParseArgs``,
``_IsFlag``; ``fire/parser.py``: the ``--`` split and fire's own flags) on the parameter list
alone, so everything fire would accept passes and everything it would leave over is refused
up front with one line.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import sys
from typing import Any, Callable, List, Optional, Sequence

from sweet_rl.notices import notice_once  # the stages import it from here too


class CommandLineError(ValueError):
    """A command line that fire could not consume completely."""


def _is_flag(argument: str) -> bool:
    """fire's ``_IsFlag``: ``--anything`` or ``-`` + a letter; ``-1`` and ``-0.5`` are values."""
    return argument.startswith("--") or re.match(r"^-[a-zA-Z]", argument) is not None


def _flag_list(names: Sequence[str]) -> str:
    return ", ".join(f"--{name}" for name in names)


def _unknown(argument: str, key: str, names: Sequence[str]) -> CommandLineError:
    close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.6)
    hint = f" (did you mean --{close[0]}?)" if close else ""
    return CommandLineError(f"unknown flag {argument.split('=', 1)[0]}{hint}; valid flags: "
                            f"{_flag_list(names)}")


def check_command_line(main, args: Sequence[str]) -> List[str]:
    """The argument list to hand to fire for ``main``, or :class:`CommandLineError`.

    Accepted exactly as fire accepts them: ``--name value``, ``--name=value``, hyphens for
    underscores (``--max-new-tokens``), a flag followed by another flag or by nothing as
    ``True`` (``--bf16``), ``--noname`` for ``False``, a unique first letter (``-k 3``),
    values that look like negative numbers (``--save_steps -1``), positional arguments for the
    parameters not given by name, and fire's own flags after a final ``--``. A help request
    anywhere (``--help``, ``-h``, ``-- --help``) comes back as ``["--help"]``, which
    :func:`run_cli` answers with our own help -- fire honours it only as the first argument
    and would otherwise run the stage first.
    Stricter than fire on purpose: an unknown flag after ``--`` (fire drops it silently, so a
    stage flag put there would vanish) and anything after fire's ``-`` separator (fire applies
    it to the stage's result, after the run) are refused.
    """
    from fire import inspectutils, parser

    args = list(args)
    main_args, fire_args = parser.SeparateFlagArgs(args)
    fire_flags, unknown_fire_flags = parser.CreateParser().parse_known_args(fire_args)
    if unknown_fire_flags:
        raise CommandLineError(
            f"unknown flag {unknown_fire_flags[0]} after '--' (only fire's own flags go there: "
            "--help, --verbose, --trace, --interactive, --separator, --completion); put the "
            "stage's flags before the '--'")
    if fire_flags.help:  # ``-- --help``: fire would run the stage first when given arguments
        return ["--help"]
    if not main_args and (fire_flags.interactive or fire_flags.trace
                          or fire_flags.completion is not None):
        return args  # fire only inspects ``main`` here, it does not call it
    separator = fire_flags.separator
    if separator in main_args:
        # fire hands whatever follows its separator to the stage's *result*, after the run
        cut = main_args.index(separator)
        if main_args[cut + 1:]:
            raise CommandLineError(
                f"unexpected argument {main_args[cut + 1]!r} after the separator {separator!r} "
                f"(fire would apply it to the stage's result after the whole run); a value "
                f"{separator!r} must be written --name={separator}")
        main_args = main_args[:cut]

    spec = inspectutils.GetFullArgSpec(main)
    names = list(spec.args) + list(spec.kwonlyargs)
    given, positional, wants_help, blank = set(), [], False, set()
    index = 0
    while index < len(main_args):
        argument = main_args[index]
        if not _is_flag(argument):
            if argument.strip():
                positional.append(argument)
            else:  # e.g. the original README's "... \ \" line ending passes a lone " "
                blank.add(index)
            index += 1
            continue
        has_value = "=" in argument
        key = argument.lstrip("-").split("=", 1)[0].replace("-", "_")
        bool_syntax = not has_value and (index + 1 == len(main_args)
                                         or _is_flag(main_args[index + 1]))
        keyword = None
        if key in names or spec.varkw:
            keyword = key
        elif bool_syntax and key.startswith("no") and key[2:] in names:
            keyword = key[2:]
        elif len(key) == 1:
            matches = [name for name in names if name[0] == key]
            if len(matches) == 1:
                keyword = matches[0]
            elif len(matches) > 1 and argument != "-h":
                raise CommandLineError(f"flag {argument} is ambiguous: it could be any of "
                                       f"{_flag_list(matches)}")
        if keyword is None:
            if argument in ("-h", "--help"):
                wants_help = True
            elif key.startswith("no") and key[2:] in names:
                raise CommandLineError(f"flag {argument} takes no value (it sets --{key[2:]} to "
                                       f"False); write --{key[2:]} VALUE to give one")
            else:
                raise _unknown(argument, key, names)
        else:
            given.add(keyword)
        # fire takes the next argument as the value unless this one is '=' or boolean syntax
        index += 1 if has_value or bool_syntax else 2
    if wants_help:
        return ["--help"]  # run_cli shows the help of ``main`` and runs nothing

    open_slots = [name for name in spec.args if name not in given]
    if len(positional) > len(open_slots) and not spec.varargs:
        extra = positional[len(open_slots)]
        slots = ", ".join(open_slots) if open_slots else "none left"
        raise CommandLineError(f"unexpected argument {extra!r}: positional arguments fill the "
                               f"parameters not given by name ({slots}); valid flags: "
                               f"{_flag_list(names)}")
    defaults = len(spec.defaults or ())
    required = [name for name in spec.args[:len(spec.args) - defaults] if name not in given]
    missing = required[len(positional):]
    missing += [name for name in spec.kwonlyargs
                if name not in (spec.kwonlydefaults or {}) and name not in given]
    if missing:
        raise CommandLineError(f"missing required argument {missing[0]} (give it as --{missing[0]} "
                               f"VALUE or by position); valid flags: {_flag_list(names)}")
    if blank:
        notice_once(f"ignored {len(blank)} blank argument(s) on the command line (a stray "
                    "'\\ ' before a line break passes one)")
    return [argument for position, argument in enumerate(args) if position not in blank]


def print_help(main, defaults=None, prog: Optional[str] = None) -> None:
    """Print the help of ``main`` (:mod:`sweet_rl.cli.helptext`): one block per parameter with
    its flag, type, real default and full description. Imports nothing heavy."""
    from sweet_rl.cli.helptext import render_help

    if defaults is None:
        defaults = getattr(main, "help_defaults", None)
    text = render_help(main, prog or os.path.basename(sys.argv[0] or "stage"), defaults)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # ``--help | head``: the reader stopped early, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


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


def run_cli(main, argv: Optional[Sequence[str]] = None, defaults=None) -> None:
    """Check the command line, then run ``main`` through ``fire``; a bad command line or known
    input errors exit 2 with one clear line, before anything is written.

    ``-h`` / ``--help`` anywhere (also ``-- --help``) prints our help and exits 0 before fire
    runs. ``defaults`` (a mapping or a function returning one; else ``main.help_defaults`` if
    the stage sets it) gives the real defaults help shows where the signature's ``None`` means
    "decided elsewhere" (the training stages' option dataclasses)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        args, level = log_level_from(args)
        command = check_command_line(main, args)
    except CommandLineError as err:
        if "-h" in args or "--help" in args:  # asking for help wins over a mistyped flag
            command = ["--help"]
        else:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)
    if command == ["--help"]:
        print_help(main, defaults)
        sys.exit(0)
    import fire

    from sweet_rl.records import RecordError
    from sweet_rl.openai_compat import EndpointUnavailable

    quiet_logs(level)
    try:
        # each stage prints its own metrics line; fire would also print the returned value
        fire.Fire(main, command=command, serialize=lambda result: None)
    except (RecordError, EndpointUnavailable, OSError, ValueError) as err:
        # OSError: e.g. a model that is neither a folder nor reachable on the hub
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def run_stage(stage: Callable[[Any], Any], options: type,
              argv: Optional[Sequence[str]] = None) -> None:
    """Read the command line into ``options`` (:mod:`sweet_rl.flags`), then run ``stage``
    with them. ``-h``/``--help`` anywhere prints the help and runs nothing; a bad command line
    or a known input error exits 2 with one line, before anything is written."""
    from sweet_rl.flags import HelpRequested, parse_command_line

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
    from sweet_rl.openai_compat import EndpointUnavailable
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


def merge_alias(ours: Optional[object], theirs: Optional[object], our_name: str,
                their_name: str) -> Optional[object]:
    """One value from our flag and the original code's name for it; both given must agree."""
    if theirs is None:
        return ours
    if ours is not None and ours != theirs:
        raise ValueError(f"--{their_name} (the original code's name for --{our_name}) and "
                         f"--{our_name} disagree: {theirs!r} vs {ours!r}; give one of them")
    return theirs
