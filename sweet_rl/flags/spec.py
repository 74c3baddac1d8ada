"""What a flag is: one dataclass field with its help text, its real default and its type.

A stage's options are a dataclass built from groups (shared option dataclasses, one per
concept: the agent, the simulator, the shard, ...). Every flag is written once, as a field::

    @dataclass(kw_only=True)
    class ShardOptions(Options):
        \"\"\"Sharding: one contiguous block of the rows per run.\"\"\"

        num_shards: int = flag("cut the rows into this many blocks (1: no sharding)", 1)

A stage's class inherits the groups it uses (``class SampleOptions(ShardOptions, ...)``); a
group used twice under a prefix (simulate's Best-of-N judge, ``--pick_*``) is a field made
with :func:`group`. :func:`flag_table` lists the flags of a class as the command line sees
them; :meth:`Options.flags` gives their values by flag name (what a stage's sidecar records).

Types are checked when an options object is made, whoever makes it (the command line, a
config file, Python): the supported annotations are ``str``, ``int``, ``float``, ``bool``,
``List[str]``, ``List[int]``, each optionally ``Optional``, and ``Union[str, bool, None]``
(a flag that may stand alone or carry a text). Nothing here imports anything heavy.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from dataclasses import MISSING, dataclass
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


class FlagError(ValueError):
    """A value a flag cannot take; the message names the flag (``--name``)."""


@dataclass(frozen=True)
class Kind:
    """How a flag's value is written and checked."""

    base: type  # str, int, float or bool
    optional: bool = False  # None allowed (written "None" on the command line)
    many: bool = False  # a list of ``base``, written comma-separated
    bare: bool = False  # Union[str, bool, None]: alone it is True, else it carries a text

    def show(self) -> str:
        """The type as help prints it: ``int``, ``list of str``, ``str or None``."""
        text = "str or bool" if self.bare else self.base.__name__
        text = f"list of {text}" if self.many else text
        return text + (" or None" if self.optional else "")

    def words(self) -> str:
        """What a value must be, for error messages."""
        one = {bool: "true or false", int: "an integer", float: "a number",
               str: "a text"}[self.base]
        if self.many:
            one = f"a comma-separated list of {'integers' if self.base is int else 'texts'}"
        return one


def kind_of(annotation: Any) -> Kind:
    """The :class:`Kind` of a resolved annotation; TypeError for anything else."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Union:
        rest = [a for a in args if a is not type(None)]
        if set(rest) == {str, bool}:
            return Kind(str, optional=True, bare=True)
        if len(rest) == 1 and len(args) == 2:
            return dataclasses.replace(kind_of(rest[0]), optional=True)
    elif typing.get_origin(annotation) in (list, List) and args and args[0] in (str, int):
        return Kind(args[0], many=True)
    elif annotation in (str, int, float, bool):
        return Kind(annotation)
    raise TypeError(f"unsupported flag type {annotation!r}")


def flag(help: str, default: Any = MISSING, *, aliases: Sequence[str] = (),
         choices: Optional[Sequence[Any]] = None, secret: bool = False,
         configurable: bool = True) -> Any:
    """A dataclass field that is a flag: ``help`` is its whole description, ``default`` its
    real default (none: the flag is required). ``aliases``: other names accepted for it (the
    original code's); ``choices``: the values it may take; ``secret``: never written to a
    sidecar (keys); ``configurable=False``: a ``--config`` file may not set it."""
    meta = {"help": help, "aliases": tuple(aliases), "secret": secret,
            "choices": None if choices is None else tuple(choices),
            "configurable": configurable}
    if isinstance(default, list):
        return dataclasses.field(default_factory=functools.partial(list, default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def group(kind: type, *, prefix: str = "", rename: Optional[Dict[str, str]] = None) -> Any:
    """A field holding a whole group under ``prefix`` (``--pick_critic_type`` for the
    ``critic_type`` of the group); ``rename`` gives a field another flag name outright."""
    return dataclasses.field(default_factory=kind, metadata={
        "group": True, "prefix": prefix, "rename": dict(rename or {})})


@dataclass(frozen=True)
class Flag:
    """One flag of a stage as the command line sees it."""

    name: str  # the flag without dashes
    path: Tuple[str, ...]  # attribute path from the stage's options to the value
    kind: Kind
    default: Any  # MISSING: required
    help: str
    owner: type  # the class that declares the field
    section: Tuple[str, ...] = ()  # the group path (a prefixed group has its own section)
    aliases: Tuple[str, ...] = ()
    choices: Optional[Tuple[Any, ...]] = None
    secret: bool = False
    configurable: bool = True
    prefix: str = ""  # the prefix of the group it is held in (``pick_``), if any

    @property
    def required(self) -> bool:
        return self.default is MISSING


def _hints(cls: type) -> Dict[str, Any]:
    return typing.get_type_hints(cls)


def _declaring_class(cls: type, name: str) -> type:
    for klass in cls.__mro__:
        if name in klass.__dict__.get("__annotations__", {}):
            return klass
    return cls


@functools.lru_cache(maxsize=None)
def flag_table(cls: type) -> Tuple[Flag, ...]:
    """Every flag of ``cls``, nested groups included, in declaration order."""
    return tuple(_flags(cls, (), "", {}, ()))


def _flags(cls, path, prefix, rename, section):
    hints = _hints(cls)
    for spec in dataclasses.fields(cls):
        meta = spec.metadata
        if meta.get("group"):
            inner = prefix + meta["prefix"]
            yield from _flags(hints[spec.name], path + (spec.name,), inner, meta["rename"],
                              section + (spec.name,))
            continue
        if "help" not in meta:
            raise TypeError(f"{cls.__name__}.{spec.name} is not a flag(...) field")
        default = (spec.default if spec.default_factory is MISSING
                   else spec.default_factory())
        name = rename.get(spec.name, prefix + spec.name)
        yield Flag(name, path + (spec.name,), kind_of(hints[spec.name]), default, meta["help"],
                   _declaring_class(cls, spec.name), section,
                   tuple(prefix + a for a in meta["aliases"]), meta["choices"], meta["secret"],
                   meta["configurable"], prefix)


def contextual(message: str, flags: Sequence[Flag]) -> str:
    """``message`` with each ``--field`` of a prefixed group written as its flag name
    (``--critic_type`` -> ``--pick_critic_type``)."""
    names = {spec.path[-1]: spec.name for spec in flags}
    return re.sub(r"--(\w+)", lambda m: "--" + names.get(m.group(1), m.group(1)), message)


def check_value(spec: Flag, value: Any) -> None:
    """Refuse a value of the wrong type (an int is a float too; a bool is no int)."""
    kind = spec.kind
    if value is None and (kind.optional or kind.bare):
        return
    values = value if kind.many and isinstance(value, list) else [value]
    if kind.many and not isinstance(value, list):
        raise FlagError(f"--{spec.name} must be {kind.words()}, got {value!r}")
    for one in values:
        if kind.bare and isinstance(one, (str, bool)):
            continue
        if kind.base is float:
            good = isinstance(one, (int, float)) and not isinstance(one, bool)
        elif kind.base is int:
            good = isinstance(one, int) and not isinstance(one, bool)
        else:
            good = isinstance(one, kind.base)
        if not good:
            raise FlagError(f"--{spec.name} must be {kind.words()}, got {one!r}")
    if spec.choices is not None and value not in spec.choices:
        raise FlagError(f"--{spec.name} must be one of {', '.join(map(str, spec.choices))}, "
                        f"got {value!r}")


class Options:
    """The base of every options dataclass (a plain class, so that frozen option dataclasses
    may derive from it): types checked, each class's ``check`` run.

    ``POSITIONAL``: the flags that arguments without a flag fill, in order (the original's
    parameter order where the stage has one). ``check(self)``: a class's own checks of its
    own fields, run once per class of the hierarchy, bases first; an error names the flag.
    """

    POSITIONAL: ClassVar[Tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for spec in flag_table(type(self)):
            if len(spec.path) == 1:  # a nested group checked itself when it was made
                check_value(spec, getattr(self, spec.path[0]))
        for klass in reversed(type(self).__mro__):
            own: Optional[Callable[[Any], None]] = klass.__dict__.get("check")
            if own is not None:
                own(self)

    def flags(self, secrets: bool = False) -> Dict[str, Any]:
        """``{flag name: value}`` (what a sidecar records; secrets left out)."""
        values = {}
        for spec in flag_table(type(self)):
            if secrets or not spec.secret:
                value = self
                for part in spec.path:
                    value = getattr(value, part)
                values[spec.name] = list(value) if isinstance(value, list) else value
        return values


def parse_text(spec: Flag, text: str) -> Any:
    """A value written on a command line (or as text in a config file), typed."""
    kind = spec.kind
    stripped = text.strip()
    if (kind.optional or kind.bare) and stripped == "None":
        return None
    if kind.bare:
        return text
    if kind.many:
        return [parse_item(spec, part.strip()) for part in text.split(",") if part.strip()]
    return parse_item(spec, text)


def parse_item(spec: Flag, text: str) -> Any:
    """One value of ``spec``'s base type (one element of a list flag) from its text."""
    base, stripped = spec.kind.base, text.strip()
    if base is str:
        return text
    if base is bool:
        if stripped.lower() in _TRUE + _FALSE:
            return stripped.lower() in _TRUE
    else:
        try:
            number = float(stripped)
        except ValueError:
            number = None
        if re.fullmatch(r"[+-]?\d+", stripped):
            return int(stripped)  # a float flag keeps an integer as written (the sidecar too)
        if number is not None and (base is float or number.is_integer()):
            return number if base is float else int(number)
    raise FlagError(f"--{spec.name} must be {spec.kind.words()}, got {text!r}")


def from_config(spec: Flag, value: Any) -> Any:
    """A value from a JSON config file: typed JSON as it is, text parsed as on the command
    line, then checked."""
    if isinstance(value, str) and not (spec.kind.base is str and not spec.kind.many):
        value = parse_text(spec, value)
    elif spec.kind.base is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    check_value(spec, value)
    return value
