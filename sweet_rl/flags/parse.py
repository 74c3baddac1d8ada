"""A command line (and a ``--config`` file) into a stage's options, strictly, before any work.

The forms the original's commands use all work: ``--name value``, ``--name=value``, hyphens
for underscores (``--max-new-tokens``), extra leading hyphens (the original README's
``---train``), a bool flag alone (``--bf16``) or with ``true``/``false`` after it,
``--noname`` for False, negative numbers as values (``--save_steps -1``), and arguments
without a flag filling the stage's ``POSITIONAL`` flags in order, skipping those given by name
(``evaluate_html.py run.jsonl 3 shots/``). A blank argument (the original README's ``\\ ``
before a line break passes one) is dropped with a notice.

Anything else stops here with one line: an unknown flag (with the closest known one), a
value of the wrong type, a missing required argument, one argument too many. ``--config
FILE`` (any stage) reads a JSON object of flag values; flags on the command line win over it,
it wins over the defaults; keys starting with ``_`` are comments.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import typing
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, TypeVar

from sweet_rl.flags.spec import (Flag, FlagError, Options, contextual, flag_table, from_config,
                                 parse_item, parse_text)

T = TypeVar("T", bound=Options)
HELP = ("-h", "--help")
# the folder of the repository's config files (configs/*.json): ``--config critic_backend.json``
REPO_CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "configs")


class UsageError(ValueError):
    """A command line the stage cannot take; the message is one line."""


class HelpRequested(Exception):
    """``-h`` or ``--help`` was given (anywhere: help wins over everything else)."""


def _looks_like_flag(argument: str) -> bool:
    """``--anything`` or ``-`` + a letter; ``-1`` and ``-0.5`` are values."""
    return argument.startswith("--") or re.match(r"^-[a-zA-Z]", argument) is not None


def _names(flags: Sequence[Flag]) -> Dict[str, Flag]:
    names = {}
    for spec in flags:
        for name in (spec.name,) + spec.aliases:
            names[name] = spec
    return names


def valid_flags(cls: Type[Options]) -> str:
    """``--a, --b, ...``: the positional flags first, in their order, then the others."""
    flags = flag_table(cls)
    first = [name for name in cls.POSITIONAL]
    return ", ".join(f"--{name}" for name in first + [s.name for s in flags
                                                      if s.name not in first])


def _unknown(argument: str, key: str, cls: Type[Options]) -> UsageError:
    known = list(_names(flag_table(cls)))
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f" (did you mean --{close[0]}?)" if close else ""
    return UsageError(f"unknown flag {argument.split('=', 1)[0]}{hint}; valid flags: "
                      + valid_flags(cls))


def read_command_line(cls: Type[Options], args: Sequence[str]
                      ) -> Tuple[Dict[str, Any], Optional[str]]:
    """``({flag name: typed value}, config path)`` of the flags and positional arguments
    given; nothing is checked against the defaults yet."""
    from sweet_rl.notices import notice_once

    if any(argument in HELP for argument in args):
        raise HelpRequested()
    given: Dict[str, Tuple[str, Any]] = {}  # flag -> (the name it was given as, value)
    positional: List[str] = []
    config, blank, at, args = None, 0, 0, list(args)
    while at < len(args):
        argument = args[at]
        at += 1
        if argument == "--":  # everything after it is positional
            positional += args[at:]
            break
        if not _looks_like_flag(argument):
            blank += not argument.strip()
            positional += [argument] if argument.strip() else []
            continue
        key, has_value, text = argument.lstrip("-").partition("=")
        key = key.replace("-", "_")
        if key == "config":
            config, at = _value(argument, has_value, text, args, at)
            continue
        spec, value, at = _read_flag(cls, argument, key, (has_value, text), args, at)
        _agree(given, spec.name, key, value, f"--{key}")
        given[spec.name] = (key, value)
    values = {name: value for name, (_, value) in given.items()}
    for name, value in _fill(cls, flag_table(cls), positional, given).items():
        _agree(given, name, name, value, name.upper())  # given under an alias, too
        values[name] = value
    if blank:
        notice_once(f"ignored {blank} blank argument(s) on the command line (a stray '\\ ' "
                    "before a line break passes one)")
    return values, config


def _read_flag(cls, argument: str, key: str, inline, args: List[str], at: int):
    """``(flag, typed value, position after it)`` for ``argument`` (``--key``)."""
    names = _names(flag_table(cls))
    has_value, text = inline
    spec = names.get(key)
    if spec is None and key.startswith("no") and key[2:] in names and not has_value:
        spec = names[key[2:]]
        if spec.kind.base is not bool or spec.kind.many:
            raise UsageError(f"flag {argument} sets nothing: --{spec.name} is not a "
                             "true/false flag")
        return spec, False, at
    if spec is None:
        raise _unknown(argument, key, cls)
    if spec.kind.base is bool and not spec.kind.many or spec.kind.bare:
        value, at = _bool_value(spec, has_value, text, args, at)
        return spec, value, at
    raw, at = _value(argument, has_value, text, args, at)
    return spec, parse_text(spec, raw), at


def _agree(given: Dict[str, Tuple[str, Any]], name: str, key: str, value: Any,
           shown: str) -> None:
    """A flag given again under another of its names must have the same value."""
    if name in given and given[name][0] != key and given[name][1] != value:
        raise UsageError(f"--{given[name][0]} and {shown} name the same flag (--{name}) and "
                         f"disagree: {given[name][1]!r} vs {value!r}; give one of them")


def _value(argument: str, has_value: str, text: str, args: List[str], at: int):
    if has_value:
        return text, at
    if at >= len(args) or _looks_like_flag(args[at]):
        raise UsageError(f"flag {argument} needs a value ({argument} VALUE or {argument}=VALUE)")
    return args[at], at + 1


def _bool_value(spec: Flag, has_value: str, text: str, args: List[str], at: int):
    """A bool flag takes ``true``/``false`` (``=``, or the next argument when it is one);
    alone it is True. ``--use_wandb KEY`` (a bare-or-text flag) takes any next value."""
    if has_value:
        return parse_text(spec, text), at
    if at < len(args) and not _looks_like_flag(args[at]):
        following = args[at].strip().lower()
        if spec.kind.bare or following in ("true", "false", "yes", "no", "1", "0"):
            return parse_text(spec, args[at]), at + 1
    return True, at


def _fill(cls: Type[Options], flags: Sequence[Flag], positional: List[str],
          given: Dict[str, Tuple[str, Any]]) -> Dict[str, Any]:
    """Positional arguments into the ``POSITIONAL`` flags not given by their own name, in
    order (one given under an alias still takes one, which must agree); a list flag there
    takes every argument left."""
    by_name = {spec.name: spec for spec in flags}
    slots = [name for name in cls.POSITIONAL if given.get(name, ("",))[0] != name]
    values: Dict[str, Any] = {}
    for slot in slots:
        if not positional:
            break
        spec = by_name[slot]
        if spec.kind.many:
            values[slot] = [parse_item(spec, text) for text in positional]
            positional = []
        else:
            values[slot] = parse_text(spec, positional.pop(0))
    if positional:
        open_slots = ", ".join(slots) if slots else "none left"
        raise UsageError(f"unexpected argument {positional[0]!r}: arguments without a flag fill "
                         f"{open_slots} in that order; valid flags: {valid_flags(cls)}")
    return values


def read_config(path: str, cls: Type[Options]) -> Dict[str, Any]:
    """The flag values of a JSON config file (``configs/NAME.json`` found by its name too),
    typed and checked; an unknown key stops with the file's name and the closest flag."""
    if not os.path.exists(path) and os.path.exists(os.path.join(REPO_CONFIGS, path)):
        path = os.path.join(REPO_CONFIGS, path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"config file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as err:
            raise UsageError(f"{path}: not valid JSON ({err.msg}, line {err.lineno})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object of flag values")
    flags = {spec.name: spec for spec in flag_table(cls) if spec.configurable}
    values = {}
    for key, value in data.items():
        if key.startswith("_"):
            continue
        if key not in flags:
            close = difflib.get_close_matches(key, list(flags), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UsageError(f"{path}: unknown key {key!r}{hint}")
        try:
            values[key] = from_config(flags[key], value)
        except FlagError as err:
            raise UsageError(f"{path}: key {key!r}: {err}") from None
    return values


def build(cls: Type[T], values: Dict[str, Any], config: Optional[str] = None) -> T:
    """``cls`` from flag values (by flag name) over a config file over the defaults; an error
    names the flag as the command line writes it."""
    merged = dict(read_config(config, cls)) if config else {}
    merged.update(values)
    flags = flag_table(cls)
    missing = [spec for spec in flags if spec.required and spec.name not in merged]
    if missing:
        name = missing[0].name
        also = "".join(f" (or --{alias})" for alias in missing[0].aliases)
        how = " or by position" if name in cls.POSITIONAL else ""
        raise UsageError(f"missing required argument {name} (give it as --{name}{also} VALUE"
                         f"{how})")
    return _make(cls, flags, merged, ())


def _make(cls, flags, merged, path):
    """``cls`` at ``path`` of the stage's options, nested groups made first."""
    kwargs = {}
    for field in dataclasses.fields(cls):
        inner = [spec for spec in flags if spec.path[:len(path) + 1] == path + (field.name,)]
        if field.metadata.get("group"):
            kwargs[field.name] = _make(typing.get_type_hints(cls)[field.name], inner, merged,
                                       path + (field.name,))
        elif inner and inner[0].name in merged:
            kwargs[field.name] = merged[inner[0].name]
    try:
        return cls(**kwargs)
    except ValueError as err:  # a prefixed group's message names its flags in context
        raise type(err)(contextual(str(err), flags) if path else str(err)) from None


def parse_command_line(cls: Type[T], args: Sequence[str]) -> T:
    """The options ``args`` (a command line without the program name) give; raises
    :class:`HelpRequested`, :class:`UsageError` or the options' own ValueError."""
    values, config = read_command_line(cls, args)
    return build(cls, values, config)


def load_options(cls: Type[T], config: Optional[str] = None, **values: Any) -> T:
    """From Python: ``cls`` from keyword values (by flag name) over ``config`` (a JSON file,
    as ``--config``) over the defaults."""
    return build(cls, values, config)
