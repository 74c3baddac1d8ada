"""Record types passed between the pipeline stages, with the original on-disk keys.

Every record keeps the keys it does not know in ``extra`` and writes them back unchanged, so a
file produced by the original SWEET-RL code (or by a later version of this one) survives a
round trip through any stage. ``from_dict`` raises :class:`RecordError` naming the missing or
mistyped field; :mod:`sweet_rl.io` adds the file and line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional


class RecordError(ValueError):
    """A record is malformed. ``field`` names the offending key; io adds path and line."""

    def __init__(self, message: str, field: Optional[str] = None,
                 path: Optional[str] = None, line: Optional[int] = None):
        self.message, self.field, self.path, self.line = message, field, path, line
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}"
            if self.line is not None:
                where += f", line {self.line}"
            where += ": "
        what = f"field '{self.field}': " if self.field else ""
        return f"{where}{what}{self.message}"

    def located(self, path: str, line: int) -> "RecordError":
        return RecordError(self.message, self.field, path, line)


def _require(data: Dict[str, Any], key: str, types, prefix: str = "") -> Any:
    name = prefix + key
    if key not in data:
        raise RecordError("missing", field=name)
    value = data[key]
    if types is not None and not isinstance(value, types):
        expected = (
            types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        )
        raise RecordError(f"expected {expected}, got {type(value).__name__}", field=name)
    return value


def _optional(data: Dict[str, Any], key: str, types, prefix: str = "") -> Any:
    if data.get(key) is None:
        return None
    return _require(data, key, types, prefix)


class Record:
    """Shared to_dict / from_dict logic: known fields by name, unknown keys in ``extra``.

    Every record type derives from it, so a writer tells a record (``to_dict()``) from plain
    JSON data by its class.
    """

    KNOWN: ClassVar[tuple] = ()

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omit_none"):
                continue
            if isinstance(value, Record):
                value = value.to_dict()
            elif isinstance(value, list):
                value = [v.to_dict() if isinstance(v, Record) else v for v in value]
            out[f.metadata.get("key", f.name)] = value
        out.update(self.extra)
        return out

    @classmethod
    def _extra(cls, data: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in data.items() if k not in cls.KNOWN}


def _omit_none():
    return field(default=None, metadata={"omit_none": True})


@dataclass
class Task(Record):
    """One ColBench task. ``test_cases`` maps ``test1`` .. to call expressions (backend only)."""

    problem_description: str
    ground_truth: str
    test_cases: Optional[Dict[str, str]] = _omit_none()
    extra: Dict[str, Any] = field(default_factory=dict)

    KNOWN: ClassVar[tuple] = ("problem_description", "ground_truth", "test_cases")

    @classmethod
    def from_dict(cls, data: Any, prefix: str = "") -> "Task":
        if not isinstance(data, dict):
            raise RecordError(
                f"expected an object, got {type(data).__name__}", field=prefix.rstrip(".") or None
            )
        tests = _optional(data, "test_cases", dict, prefix)
        if tests is not None:
            for name, expr in tests.items():
                if not isinstance(expr, str):
                    raise RecordError(
                        "test expression must be a string", field=f"{prefix}test_cases.{name}"
                    )
        return cls(
            problem_description=_require(data, "problem_description", str, prefix),
            ground_truth=_require(data, "ground_truth", str, prefix),
            test_cases=tests,
            extra=cls._extra(data),
        )

    @property
    def hidden_information(self) -> str:
        """What the simulated human knows: the reference solution (the original's rule)."""
        return self.ground_truth


@dataclass
class Turn(Record):
    """One dialogue entry; assistant turns also carry the agent's prompt and raw output."""

    role: str
    content: str
    input: Optional[str] = _omit_none()
    output: Optional[str] = _omit_none()
    extra: Dict[str, Any] = field(default_factory=dict)

    KNOWN: ClassVar[tuple] = ("role", "content", "input", "output")

    @classmethod
    def from_dict(cls, data: Any, prefix: str = "") -> "Turn":
        if not isinstance(data, dict):
            raise RecordError(
                f"expected an object, got {type(data).__name__}", field=prefix.rstrip(".") or None
            )
        return cls(
            role=_require(data, "role", str, prefix),
            content=_require(data, "content", str, prefix),
            input=_optional(data, "input", str, prefix),
            output=_optional(data, "output", str, prefix),
            extra=cls._extra(data),
        )

    def chat_message(self) -> Dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass
class Trajectory(Record):
    """A finished dialogue: simulate writes it, evaluate adds ``reward``."""

    task: Task
    dialogue_history: List[Turn]
    answer: str
    reward: Optional[float] = _omit_none()
    extra: Dict[str, Any] = field(default_factory=dict)

    KNOWN: ClassVar[tuple] = ("task", "dialogue_history", "answer", "reward")

    @classmethod
    def from_dict(cls, data: Any, prefix: str = "") -> "Trajectory":
        if not isinstance(data, dict):
            raise RecordError(f"expected an object, got {type(data).__name__}")
        task = Task.from_dict(_require(data, "task", dict, prefix), prefix=f"{prefix}task.")
        history = _require(data, "dialogue_history", list, prefix)
        answer = data.get("answer")
        if answer is None:
            answer = ""  # the original wrote null answers for dialogues that never answered
        elif not isinstance(answer, str):
            raise RecordError(f"expected str, got {type(answer).__name__}", field=prefix + "answer")
        reward = _optional(data, "reward", (int, float), prefix)
        return cls(
            task=task,
            dialogue_history=[Turn.from_dict(t, prefix=f"{prefix}dialogue_history[{i}].")
                              for i, t in enumerate(history)],
            answer=answer,
            reward=None if reward is None else float(reward),
            extra=cls._extra(data),
        )

    @property
    def assistant_turns(self) -> List[Turn]:
        return [t for t in self.dialogue_history if t.role == "assistant"]


def _pair_side(data: Dict[str, Any], key: str, prefix: str = "") -> str:
    """One side of a pair: a string, or an ``{"input": str, "output": str}`` object -- the
    layout of the original's frontend critic pairs (its evaluate_html.py) -- whose text is
    ``input + output``."""
    value = _require(data, key, (str, dict), prefix)
    if isinstance(value, str):
        return value
    name = f"{prefix}{key}."
    return _require(value, "input", str, name) + _require(value, "output", str, name)


@dataclass
class PreferencePair(Record):
    """A chosen/rejected pair (critic pairs, DPO pairs); ``prompt`` only in prompt-split files.

    Each side is read as text: a string, or an ``{"input", "output"}`` object (the original's
    frontend critic pairs) joined as ``input + output``; ``to_dict`` writes the text.
    """

    chosen: str
    rejected: str
    prompt: Optional[str] = _omit_none()
    extra: Dict[str, Any] = field(default_factory=dict)

    KNOWN: ClassVar[tuple] = ("chosen", "rejected", "prompt")

    @classmethod
    def from_dict(cls, data: Any, prefix: str = "") -> "PreferencePair":
        if not isinstance(data, dict):
            raise RecordError(f"expected an object, got {type(data).__name__}")
        return cls(chosen=_pair_side(data, "chosen", prefix),
                   rejected=_pair_side(data, "rejected", prefix),
                   prompt=_optional(data, "prompt", str, prefix),
                   extra=cls._extra(data))


@dataclass
class StepSample(Record):
    """One assistant turn of the offline data with N sampled alternatives (sample / rank).

    The same record travels the whole way: made per assistant turn without candidates
    (:mod:`sweet_rl.stepwise.turns`), given its candidates by the sample stage and its
    ``judge_result`` by the rank stage. A file always holds the candidate keys:
    :meth:`from_dict` requires them.
    """

    input: str
    input_with_ground_truth: str
    older_output: str
    reward: float
    ground_truth: str
    messages: List[Dict[str, Any]]
    additional_outputs: List[str] = field(default_factory=list)
    additional_reference_logprobs: List[float] = field(default_factory=list)
    additional_reference_logprobs_sum: List[float] = field(default_factory=list)
    judge_result: Optional[List[float]] = _omit_none()
    extra: Dict[str, Any] = field(default_factory=dict)

    KNOWN: ClassVar[tuple] = ("input", "input_with_ground_truth", "older_output", "reward",
                              "ground_truth", "messages", "additional_outputs",
                              "additional_reference_logprobs",
                              "additional_reference_logprobs_sum", "judge_result")

    @classmethod
    def from_dict(cls, data: Any, prefix: str = "") -> "StepSample":
        if not isinstance(data, dict):
            raise RecordError(f"expected an object, got {type(data).__name__}")
        sample = cls(
            input=_require(data, "input", str, prefix),
            input_with_ground_truth=_require(data, "input_with_ground_truth", str, prefix),
            older_output=_require(data, "older_output", str, prefix),
            reward=float(_require(data, "reward", (int, float), prefix)),
            ground_truth=_require(data, "ground_truth", str, prefix),
            messages=_require(data, "messages", list, prefix),
            additional_outputs=_require(data, "additional_outputs", list, prefix),
            additional_reference_logprobs=_require(
                data, "additional_reference_logprobs", list, prefix
            ),
            additional_reference_logprobs_sum=_require(
                data, "additional_reference_logprobs_sum", list, prefix
            ),
            judge_result=_optional(data, "judge_result", list, prefix),
            extra=cls._extra(data),
        )
        n = len(sample.additional_outputs)
        for key in (
            "additional_reference_logprobs",
            "additional_reference_logprobs_sum",
            "judge_result",
        ):
            value = getattr(sample, key)
            if value is not None and len(value) != n:
                raise RecordError(
                    f"has {len(value)} entries but additional_outputs has {n}", field=prefix + key
                )
        return sample

    def to_dict(self) -> Dict[str, Any]:
        out = super().to_dict()
        if "judge_result" in out:  # the rank stage adds it last, after any unknown key, as the
            out["judge_result"] = out.pop("judge_result")  # original's does
        return out
