"""The ``--help`` text of a stage, built from its ``main``: signature and docstring, nothing else.

fire's own help glued an ``Args:`` description to whichever flag its parser happened to be on
(several entries on one line, ``a, b:`` entries), cut descriptions short, printed string
annotations as ``Optional['Optional[str]']`` and showed ``None`` for the training flags whose
defaults live in :mod:`sweet_rl.training.options`. Here the docstring is read by
:func:`parse_docstring` (pure), each parameter gets one block (its flag, short form, type, real
default and its whole description) and nothing is imported: help stays instant.
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

WIDTH = 88  # an 80-column terminal shows a block with little wrapping
_INDENT = " " * 6
_SECTION = re.compile(r"^(?P<indent>\s*)(?:Args|Arguments|Parameters)\b(?P<rest>[^:]*):\s*$")
# ``name: text``, ``a, b: text``, ``a / b: text`` or ``name (type): text``
_ENTRY = re.compile(r"^(?P<names>\*{0,2}\w+(?:\s*[,/]\s*\*{0,2}\w+)*)\s*(?:\([^)]*\))?\s*:"
                    r"(?:\s+(?P<text>.*))?$")


@dataclass
class Docstring:
    """What help needs of a docstring: its first paragraph and its ``Args:`` entries."""

    summary: str = ""
    args: Dict[str, str] = field(default_factory=dict)
    note: str = ""  # the parenthesis of a header such as ``Args (unset ones come from ...):``


def _plain(text: str) -> str:
    """One line of prose: whitespace runs collapsed, reStructuredText ``literals`` unquoted."""
    return re.sub(r"``(.+?)``", r"\1", " ".join(text.split()))


def parse_docstring(doc: Optional[str]) -> Docstring:
    """Split a Google-style docstring into its summary and its per-parameter descriptions.

    An entry starts at the section's entry indent with ``name:`` (or ``a, b:`` / ``a / b:``
    for text shared by several parameters); deeper-indented lines continue it. The section
    ends at the first non-blank line indented no deeper than its ``Args:`` header. A name
    described twice gets both texts, in order.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    paragraph = []
    for line in lines:
        if not line.strip():
            break
        paragraph.append(line)
    parsed = Docstring(summary=_plain(" ".join(paragraph)))
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
    if start is None:
        return parsed
    header = _SECTION.match(lines[start])
    base = len(header.group("indent"))
    parsed.note = header.group("rest").strip().strip("()").strip()
    entry_indent, names, texts = None, [], {}
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= base:
            break
        if entry_indent is None:
            entry_indent = indent
        match = _ENTRY.match(line.strip()) if indent == entry_indent else None
        if match:
            names = [n.strip().lstrip("*") for n in re.split(r"[,/]", match.group("names"))]
            for name in names:
                texts.setdefault(name, []).append([match.group("text") or ""])
        else:  # a continuation line, or prose at entry indent: it belongs to the open entry
            for name in names:
                texts[name][-1].append(line.strip())
    parsed.args = {name: " ".join(_plain(" ".join(part)) for part in parts)
                   for name, parts in texts.items()}
    return parsed


def add_args(doc: Optional[str], entries: str) -> Optional[str]:
    """``doc`` with ``entries`` (``name: text`` lines, written at any indent) added at the end
    of its ``Args:`` section, at the indent of its own entries.

    For flags that several stages describe word for word (the training stages': see
    ``sweet_rl.training.options.SHARED_FLAG_HELP``): the text is written once and still lands
    in each ``main.__doc__``, which :func:`parse_docstring` and ``help(main)`` read.
    """
    if doc is None:  # python -OO drops docstrings
        return doc
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
    if start is None:
        raise ValueError("a docstring without an Args: section has nowhere to add entries")
    base = len(_SECTION.match(lines[start]).group("indent"))
    end, indent = start + 1, None
    for number in range(start + 1, len(lines)):  # the section's end, as parse_docstring finds it
        depth = len(lines[number]) - len(lines[number].lstrip())
        if not lines[number].strip():
            continue
        if depth <= base:
            break
        indent = depth if indent is None else indent  # the first entry's indent
        end = number + 1
    margin = " " * (base + 4 if indent is None else indent)
    added = textwrap.indent(textwrap.dedent(entries).strip("\n"), margin).splitlines()
    return "\n".join(lines[:end] + added + lines[end:])


def _split_top(text: str, separator: str) -> List[str]:
    """``text`` split at ``separator`` outside brackets."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == separator and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return parts + [current.strip()]


def _join_union(parts: List[str]) -> str:
    names = []
    for part in parts:
        if part not in names:
            names.append(part)
    if "None" in names:  # None always last: "str or None"
        names.remove("None")
        names.append("None")
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def readable_type(annotation: Any) -> str:
    """``Optional[str]`` -> ``str or None``, ``List[str]`` -> ``list of str``; annotations may
    be the objects or, under ``from __future__ import annotations``, their text."""
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, type):
        return "None" if annotation is type(None) else annotation.__name__
    text = str(annotation).replace("typing.", "").strip().strip("'\"")
    if "|" in text and len(_split_top(text, "|")) > 1:
        return _join_union([readable_type(part) for part in _split_top(text, "|")])
    match = re.fullmatch(r"(\w+)\[(.*)\]", text)
    if not match:
        return "None" if text == "NoneType" else text
    head, inner = match.group(1), [readable_type(a) for a in _split_top(match.group(2), ",")]
    if head == "Optional":
        return _join_union(inner + ["None"])
    if head == "Union":
        return _join_union(inner)
    if head.lower() in ("list", "sequence", "tuple", "set", "iterable"):
        return f"{head.lower().replace('sequence', 'list')} of {inner[0]}"
    return head.lower() if head.lower() == "dict" else text


def show_default(value: Any) -> str:
    """A default as a newcomer would type it: text in double quotes, everything else as is."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _wrap(text: str) -> str:
    return textwrap.fill(text, WIDTH, initial_indent=_INDENT, subsequent_indent=_INDENT,
                         break_long_words=False, break_on_hyphens=False)


Defaults = Union[None, Mapping[str, Any], Callable[[], Mapping[str, Any]]]


def render_help(main: Callable, prog: str, defaults: Defaults = None) -> str:
    """The whole help text of ``main`` run as ``prog``; ``defaults`` (a mapping, or a function
    returning one) replaces the signature's default where the real one is decided elsewhere
    (the training stages: the option dataclasses, see ``sweet_rl.training.options``)."""
    real = dict((defaults() if callable(defaults) else defaults) or {})
    doc = parse_docstring(inspect.getdoc(main))
    params = list(inspect.signature(main).parameters.values())
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    letters = Counter(p.name[0] for p in named)
    ordered = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in params if p.kind == p.VAR_POSITIONAL
                  or (p.kind in ordered and p.default is p.empty)]
    required_flags = [p for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    words = [f"{p.name.upper()} [{p.name.upper()} ...]" if p.kind == p.VAR_POSITIONAL
             else p.name.upper() for p in positional]
    words += [f"--{p.name} {p.name.upper()}" for p in required_flags]
    help_flags = "--help" if letters.get("h") == 1 else "-h or --help"
    lines = [f"usage: {' '.join([prog] + words + ['[--NAME VALUE ...]'])}", ""]
    if doc.summary:
        lines += textwrap.wrap(doc.summary, WIDTH, break_on_hyphens=False) + [""]
    fill = ("Arguments without a flag are the " + positional[0].name.upper()
            if any(p.kind == p.VAR_POSITIONAL for p in positional)
            else "Arguments without a flag fill the parameters in the order listed below, "
                 "skipping those given as flags")
    lines += textwrap.wrap(
        "Flags: --name VALUE or --name=VALUE (--name-with-hyphens works too); a bool flag "
        f"alone (--name) turns it on, --noname turns it off. {fill}. {help_flags}: this text. "
        "-v or --verbose: every library's INFO lines too; --log_level LEVEL (DEBUG, INFO, "
        "WARNING, ERROR): that level for all.",
        WIDTH, break_on_hyphens=False)
    sections = [("POSITIONAL ARGUMENTS", positional),
                ("FLAGS", [p for p in params if p not in positional and p.kind != p.VAR_KEYWORD])]
    for title, group in sections:
        if not group:
            continue
        lines += ["", title]
        if title == "FLAGS" and doc.note and real:
            lines.append(textwrap.fill(f"({doc.note})", WIDTH, initial_indent="  ",
                                       subsequent_indent="  ", break_on_hyphens=False))
        for param in group:
            lines += _block(param, doc, real, letters)
    return "\n".join(lines)


def _block(param: inspect.Parameter, doc: Docstring, real: Dict[str, Any],
           letters: Counter) -> List[str]:
    name = param.name
    names = [f"--{name}"]
    if param.kind == param.VAR_POSITIONAL:
        names = [f"{name.upper()} ..."]
    elif param.default is param.empty and param.kind != param.KEYWORD_ONLY:
        names.insert(0, name.upper())
    if param.kind != param.VAR_POSITIONAL and letters[name[0]] == 1 and len(name) > 1:
        names.append(f"-{name[0]}")
    default = real.get(name, param.default)
    kind = readable_type(param.annotation)
    if name in real and default is not None and kind.endswith(" or None"):
        kind = kind[:-len(" or None")]  # a flag left unset takes the real default, never None
    if not kind and default not in (param.empty, None):
        kind = type(default).__name__
    if param.kind == param.VAR_POSITIONAL:
        facts = [f"{kind}, one or more" if kind else "one or more"]
    else:
        facts = [kind] if kind else []
        facts.append("required" if default is param.empty else f"default: {show_default(default)}")
    text = doc.args.get(name) or "(not described)"
    return [f"  {', '.join(names)}  ({'; '.join(facts)})", _wrap(text)]
