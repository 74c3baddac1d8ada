"""A collaborative dialogue between an agent and a simulated human, one task at a time.

The environment owns the dialogue state and the protocol; it does not call models itself.
A :class:`sweet_rl.rollouts.dialogue.Dialogue` asks its environment for the agent's and the
simulator's inputs and feeds the replies back; the drivers (:mod:`sweet_rl.rollouts.lockstep`,
:mod:`sweet_rl.rollouts.pipeline`) send those inputs to the models in batches — so one batched
generate call serves many dialogues at once.

What each model sees is the original's layout, because the published numbers depend on it:

* the agent: a system message holding the agent prompt file verbatim (nothing is substituted
  in it), then the dialogue as chat messages — the task description as the first user turn,
  then the assistant and user turns with their ``content``;
* the simulated human (backend): a short generic system message and one user message, the
  simulator prompt with ``{problem_description}``, ``{hidden_information}`` and
  ``{dialogue_history}`` filled in, the history written as ``role:content`` and four newlines
  per turn, ending with ``agent:``.

Leaks (:mod:`.leaks`): an environment whose simulator reads the reference as text
(``checks_leaks``, the backend) checks every reply it stores and lists the leaking ones in the
row (``leaked_replies``, ``leak_turns``). With ``resample_leaks=N`` it also lets the rollout ask
the simulator again, up to N times per turn, when a reply leaks: the rollout asks
``wants_resample(reply)`` before storing a reply and, when it is True, sends
``simulator_messages(reminder=True)`` (the prompt plus a reminder not to write code) instead.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Optional, Set

from sweet_rl.environments.protocol import (MAX_TURNS, NO_ANSWER, ParsedTurn, dialogue_ends,
                                            parse_agent_output)
from sweet_rl.environments.leaks import RESAMPLE_REMINDER, reply_leaks
from sweet_rl.prompts import fill_template
from sweet_rl.records import Task, Trajectory, Turn
from sweet_rl.types import ChatMessages, SimulatorReply

logger = logging.getLogger(__name__)
_WARNED: Set[str] = set()  # rejection messages already logged (once each, not once per turn)

SIMULATOR_SYSTEM_MESSAGE = "You are a helpful assistant."
TURN_SEPARATOR = "\n\n\n\n"
SIMULATOR_CUE = "agent:"  # the transcript ends by handing the word to the agent's side
# What the original's human says when the server rejects a request (e.g. context too long).
REJECTED_REPLY = "No response."
REMINDER_SEPARATOR = "\n\n"  # between the filled simulator prompt and RESAMPLE_REMINDER


def simulator_transcript(turns: List[Turn], cue: str = SIMULATOR_CUE) -> str:
    """The dialogue as the simulated human reads it: ``role:content`` + four newlines per turn
    (roles as stored: ``user`` is the human, ``assistant`` the agent), then ``cue``."""
    return "".join(f"{turn.role}:{turn.content}{TURN_SEPARATOR}" for turn in turns) + cue


class CollaborationEnv:
    """Turn bookkeeping shared by the backend and frontend environments.

    ``rejected_reply``: what the human says when the simulator server rejects a request (the
    original's ``"No response."``; the dialogue goes on and the error is listed in the row's
    ``simulator_errors``). ``None`` ends the dialogue at the first rejection instead, with the
    error in the row's ``error``.

    ``resample_leaks``: how many times per turn a leaking reply may be sent back to the
    simulator (see ``wants_resample``); 0, the default, never resamples. Only environments
    with ``checks_leaks`` check replies at all.
    """

    reply_chars: int = 400  # the simulated human's replies are cut to this many characters
    # How many environments of a batch :mod:`sweet_rl.rollouts.lockstep` may record at once, from
    # threads. One (in order, on the calling thread) unless a subclass does slow I/O per turn.
    record_workers: int = 1
    # Whether the human's replies are checked against the reference as text (the backend,
    # whose simulator reads the code; the frontend's sees only images of the page).
    checks_leaks: bool = False

    def __init__(self, task: Task, agent_prompt: str, user_prompt: str,
                 max_steps: int = MAX_TURNS, reply_chars: Optional[int] = None,
                 rejected_reply: Optional[str] = REJECTED_REPLY, resample_leaks: int = 0):
        self.task = task
        self.agent_prompt = agent_prompt
        self.user_prompt = user_prompt
        self.max_steps = max_steps
        self.rejected_reply = rejected_reply
        if isinstance(resample_leaks, bool) or not isinstance(resample_leaks, int) \
                or resample_leaks < 0:
            raise ValueError(f"resample_leaks must be a non-negative integer, got "
                             f"{resample_leaks!r}")
        self.resample_leaks = resample_leaks
        if reply_chars is not None:
            self.reply_chars = reply_chars
        self.reset()

    # -- state ---------------------------------------------------------------------------
    def reset(self) -> List[Turn]:
        self.history: List[Turn] = [Turn(role="user", content=self.task.problem_description)]
        self.steps = 0
        self.done = False
        self.answer = NO_ANSWER
        self.error: Optional[str] = None
        self.simulator_errors: List[str] = []
        self.leak_turns: List[int] = []  # indices in history of the user turns that leak
        self.leak_resamples = 0  # resamples asked for, all turns
        self.turn_resamples = 0  # resamples asked for since the last stored reply
        return self.history

    def prompt_values(self) -> Dict[str, str]:
        return {"problem_description": self.task.problem_description,
                "hidden_information": self.task.hidden_information,
                "dialogue_history": simulator_transcript(self.history)}

    def prepare(self) -> None:
        """Slow set-up before the first turn (the frontend renders its reference page).

        The rollout drivers call it for every environment they open, from ``record_workers``
        threads, so that set-up runs concurrently. It may end the dialogue
        (``done``). Nothing to do here.
        """

    # -- agent side ----------------------------------------------------------------------
    def agent_messages(self) -> ChatMessages:
        """What the agent sees: its prompt as the system message, then the dialogue."""
        return ([{"role": "system", "content": self.agent_prompt}]
                + [turn.chat_message() for turn in self.history])

    def record_agent_turn(self, prompt: str, raw_output: str,
                          extra: Optional[Dict[str, object]] = None) -> bool:
        """Store the agent's turn (``extra``: keys kept with it, e.g. Best-of-N's candidates);
        returns True when the dialogue is over."""
        if self.done:
            raise RuntimeError("dialogue already finished")
        self.steps += 1
        parsed = parse_agent_output(raw_output)
        self.history.append(Turn(role="assistant", content=parsed.message,
                                 input=prompt, output=parsed.raw_output, extra=dict(extra or {})))
        self.on_agent_turn(parsed)
        if dialogue_ends(parsed, self.steps, self.max_steps):
            self.done = True
            self.on_final_turn(parsed)
        return self.done

    def on_agent_turn(self, parsed: ParsedTurn) -> None:
        """Hook: e.g. the frontend renders the HTML of every turn."""

    def on_final_turn(self, parsed: ParsedTurn) -> None:
        raise NotImplementedError

    # -- simulator side ------------------------------------------------------------------
    def simulator_messages(self, reminder: bool = False) -> ChatMessages:
        """What the simulated human sees (backend layout; the frontend overrides it).

        ``reminder``: for a resample after a leak, the user message ends with a blank line and
        :data:`.leaks.RESAMPLE_REMINDER`; without it the layout is the original's.
        """
        text = fill_template(self.user_prompt, self.prompt_values())
        if reminder:
            text += REMINDER_SEPARATOR + RESAMPLE_REMINDER
        return [{"role": "system", "content": SIMULATOR_SYSTEM_MESSAGE},
                {"role": "user", "content": text}]

    def leaks(self, text: str) -> bool:
        """Whether ``text``, as it would be stored, gives the reference away (False when this
        environment does not check). Runs the request also holds (the signature) are public."""
        return self.checks_leaks and reply_leaks(text[: self.reply_chars], self.task.ground_truth,
                                                 public=self.task.problem_description)

    def wants_resample(self, reply: SimulatorReply) -> bool:
        """True when ``reply`` leaks and fewer than ``resample_leaks`` resamples were asked for
        this turn; a True answer counts as one resample asked. The rollout then sends
        ``simulator_messages(reminder=True)`` instead of storing the reply. A rejected request
        is never resampled (``record_user_reply`` handles it)."""
        if (not self.checks_leaks or self.turn_resamples >= self.resample_leaks
                or reply.error is not None or reply.text is None or not self.leaks(reply.text)):
            return False
        self.turn_resamples += 1
        self.leak_resamples += 1
        return True

    def record_user_reply(self, reply: SimulatorReply) -> bool:
        """Store the human's reply, cut to ``reply_chars`` characters (not stripped).

        A rejected request becomes ``rejected_reply`` (the dialogue goes on), or ends the
        dialogue when that is None. The stored text is checked for leaks (``leak_turns``), and
        the turn's resample count starts again. Returns True when the dialogue is over.
        """
        self.turn_resamples = 0
        text = reply.text
        if reply.error is not None or text is None:
            problem = f"simulator: {reply.error or 'no reply'}"
            if problem not in _WARNED:
                _WARNED.add(problem)
                logger.warning("the simulator rejected a request (%s); %s", problem,
                               "the dialogue ends" if self.rejected_reply is None else
                               f"the human says {self.rejected_reply!r} and the dialogue goes "
                               "on, as in the original (--stop_on_rejected_request ends it)")
            if self.rejected_reply is None:
                self.error = problem
                self.done = True
                return True
            self.simulator_errors.append(problem)
            text = self.rejected_reply
        self.history.append(Turn(role="user", content=text[: self.reply_chars]))
        if self.leaks(text):
            self.leak_turns.append(len(self.history) - 1)
        return False

    # -- result --------------------------------------------------------------------------
    def trajectory(self) -> Trajectory:
        extra = {"error": self.error} if self.error else {}
        if self.simulator_errors:
            extra["simulator_errors"] = list(self.simulator_errors)
        if self.checks_leaks:
            extra["leaked_replies"] = len(self.leak_turns)
            extra["leak_turns"] = list(self.leak_turns)
            if self.resample_leaks > 0:
                extra["leak_resamples"] = self.leak_resamples
        return Trajectory(task=self.task, dialogue_history=list(self.history),
                          answer=self.answer, extra=extra)
