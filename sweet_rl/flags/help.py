"""The ``--help`` text of a stage, from its options class alone: the class docstring (what the
stage does, with examples), then one block per flag with its type, its real default and its
whole description, grouped as the options are. Nothing is imported: help stays instant."""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from typing import Any, Dict, List, Tuple, Type

from sweet_rl.flags.spec import Flag, Options, contextual, flag_table

WIDTH = 88  # an 80-column terminal shows a block with little wrapping
INDENT = " " * 6


def show_default(value: Any) -> str:
    """A default as it would be typed: text in double quotes, a list comma-separated."""
    if isinstance(value, list):
        return ",".join(str(v) for v in value) if value else '""'
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _plain(text: str) -> str:
    """reStructuredText literals (````x````) read as plain text."""
    return re.sub(r"``(.+?)``", r"\1", text)


def _first_line(cls: type) -> str:
    doc = inspect.getdoc(cls) if cls.__dict__.get("__doc__") else None
    return (doc or cls.__name__).splitlines()[0].strip()


def _sections(cls: Type[Options], flags: Tuple[Flag, ...]) -> List[Tuple[str, List[Flag]]]:
    """(title, flags) in order: the stage's own flags, its groups in inheritance order, then
    the groups it holds under a prefix."""
    order = {klass: at for at, klass in enumerate(cls.__mro__)}
    grouped: Dict[Any, List[Flag]] = {}
    for spec in flags:
        key = ("held",) + spec.section if spec.section else spec.owner
        grouped.setdefault(key, []).append(spec)
    keys = sorted(grouped, key=lambda k: (1, 0) if isinstance(k, tuple) else (0, order[k]))
    sections = []
    for key in keys:
        if key is cls:
            title = "FLAGS"
        elif isinstance(key, tuple):
            first = grouped[key][0]
            title = f"{_first_line(first.owner)} (--{first.prefix}*)"
        else:
            title = _first_line(key)
        sections.append((title, grouped[key]))
    return sections


def _block(spec: Flag, positional: bool, group: List[Flag]) -> List[str]:
    names = ", ".join(f"--{name}" for name in (spec.name,) + spec.aliases)
    if positional:
        names = f"{spec.name.upper()}, {names}"
    facts = [spec.kind.show(), "required" if spec.required
             else f"default: {show_default(spec.default)}"]
    if spec.choices:
        facts.append("one of: " + ", ".join(map(str, spec.choices)))
    words = contextual(spec.help, group) if spec.section else spec.help  # --pick_* in context
    words = _plain(words)
    text = textwrap.fill(" ".join(words.split()), WIDTH, initial_indent=INDENT,
                         subsequent_indent=INDENT, break_long_words=False,
                         break_on_hyphens=False)
    return [f"  {names}  ({'; '.join(facts)})", text]


def render_help(cls: Type[Options], prog: str) -> str:
    """The whole help of the stage whose options are ``cls``, run as ``prog``."""
    flags = flag_table(cls)
    by_name = {spec.name: spec for spec in flags}
    required = [by_name[name] for name in cls.POSITIONAL if by_name[name].required]
    words = [f"{s.name.upper()} [{s.name.upper()} ...]" if s.kind.many else s.name.upper()
             for s in required]
    words += [f"--{s.name} {s.name.upper()}" for s in flags
              if s.required and s.name not in cls.POSITIONAL]
    lines = [f"usage: {' '.join([prog] + words + ['[--NAME VALUE ...]'])}", ""]
    doc = inspect.getdoc(cls) if cls.__dict__.get("__doc__") else None
    if doc:
        lines += [_plain(doc), ""]
    fill = (f" Arguments without a flag fill {', '.join(n.upper() for n in cls.POSITIONAL)} "
            "in that order, skipping those given as flags." if cls.POSITIONAL else "")
    lines += textwrap.wrap(
        "Flags: --name VALUE or --name=VALUE (--name-with-hyphens works too); a true/false "
        "flag alone (--name) turns it on, --name false or --noname turns it off; a list is "
        f"comma-separated.{fill} --config FILE: flag values from a JSON file (flags given "
        "here win). -h or --help: this text. -v or --verbose: every library's INFO lines "
        "too; --log_level LEVEL (DEBUG, INFO, WARNING, ERROR): that level for all.",
        WIDTH, break_on_hyphens=False)
    if required:
        lines += ["", "POSITIONAL ARGUMENTS"]
        for spec in required:
            lines += _block(spec, True, [])
    for title, group in _sections(cls, flags):
        rest = [spec for spec in group if spec not in required]
        if rest:
            lines += ["", title]
            for spec in rest:
                lines += _block(spec, False, group)
    return "\n".join(lines)
