"""Prompt templates (package data) and the placeholder filling rules.

Agent prompts are system messages used verbatim (the original substitutes nothing in them; its
agent prompt file ends with a literal ``{dialogue_history}``). Simulator templates use
``{problem_description}``, ``{hidden_information}`` and ``{dialogue_history}``; only those
names are substituted and every other brace is left alone, so templates that contain code (or
the official SWEET-RL prompt files) work without escaping.
"""

from __future__ import annotations

import os
import re
from typing import Dict, Optional

PLACEHOLDERS = ("problem_description", "hidden_information", "dialogue_history")
_HERE = os.path.dirname(os.path.abspath(__file__))

# Default template file for each (role, task_type, setting).
DEFAULT_PROMPTS = {
    ("agent", "code", "multi_turn"): "agent_code_prompt.txt",
    ("agent", "code", "single_turn"): "agent_code_single_turn_prompt.txt",
    ("user", "code", "multi_turn"): "human_simulator_code_prompt.txt",
    ("agent", "html", "multi_turn"): "agent_html_prompt.txt",
    ("agent", "html", "single_turn"): "agent_html_single_turn_prompt.txt",
    ("user", "html", "multi_turn"): "human_simulator_html_prompt.txt",
}


def default_prompt_path(role: str, task_type: str = "code", single_turn: bool = False) -> str:
    setting = "single_turn" if (single_turn and role == "agent") else "multi_turn"
    key = (role, task_type, setting)
    if key not in DEFAULT_PROMPTS:
        raise ValueError(f"no bundled {role} prompt for task_type={task_type!r} ({setting})")
    return os.path.join(_HERE, DEFAULT_PROMPTS[key])


def load_prompt(path: Optional[str], role: str, task_type: str = "code",
                single_turn: bool = False) -> str:
    """Read a template; ``None`` or ``"auto"`` means the bundled default."""
    if path in (None, "", "auto"):
        path = default_prompt_path(role, task_type, single_turn)
    if not os.path.exists(path):
        raise FileNotFoundError(f"prompt file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def template_fields(template: str):
    """The known placeholders a template uses."""
    return {name for name in PLACEHOLDERS if "{" + name + "}" in template}


def fill_template(template: str, values: Dict[str, str]) -> str:
    """Substitute the known placeholders present in ``template`` in one pass."""
    pattern = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")

    def substitute(match: "re.Match[str]") -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"template needs {{{name}}} but no value was given")
        return str(values[name])

    return pattern.sub(substitute, template)
