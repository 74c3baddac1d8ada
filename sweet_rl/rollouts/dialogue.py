"""The turn protocol of one dialogue, written once, as a small state machine.

A :class:`Dialogue` wraps one environment and says, at each moment, which call it needs next;
whoever drives it makes that call and hands the result back with :meth:`Dialogue.advance`.
The drivers decide only when calls are made and how they are batched: the lockstep one
(:func:`sweet_rl.rollouts.lockstep.run_dialogues`, the original's loop) serves every open dialogue's
call of a turn's step at once, the pipelined one (:func:`sweet_rl.rollouts.pipeline.run_pipelined`)
serves each as soon as it is asked for. Neither knows the protocol, so the two cannot drift.

The states, and the call each one asks for::

    PREPARING    EnvCall(env.prepare)           slow set-up (the frontend renders its reference)
    GENERATING   AgentCall(messages, seed, key) the agent's turn, seeded by row and turn
    RECORDING    EnvCall(record the agent turn) may render a page (the frontend)
    INTERACTING  SimulatorCall(messages, key)   the human's reply
    DONE         -

    PREPARING   -> GENERATING, or DONE when set-up ended the dialogue (a page that did not render)
    GENERATING  -> RECORDING
    RECORDING   -> INTERACTING, or DONE (the agent answered, or its last allowed turn)
    INTERACTING -> INTERACTING when a leaking reply is asked for again (with the reminder),
                   GENERATING once a reply is stored, or DONE (a rejected request that ends it)

An environment that is already over (a restored row) starts in DONE. Environment calls
(``EnvCall``) may do slow I/O, so a driver may run them from worker threads; every other
method touches the environment and belongs to one thread, the driver's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Hashable, List, Optional, Sequence, Union

from sweet_rl.agents.base import Agent
from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.seeding import turn_seed
from sweet_rl.simulators.base import Simulator
from sweet_rl.types import AgentOutput, ChatMessages, SimulatorReply

PREPARING = "preparing"
GENERATING = "generating"
RECORDING = "recording"
INTERACTING = "interacting"
DONE = "done"


@dataclass(frozen=True)
class AgentCall:
    """One conversation for ``agent.generate``, with its seed and dialogue key."""

    messages: ChatMessages
    seed: int
    key: Hashable


@dataclass(frozen=True)
class SimulatorCall:
    """One conversation for ``simulator.reply_batch``, with its dialogue key."""

    messages: ChatMessages
    key: Hashable


@dataclass(frozen=True)
class EnvCall:
    """An environment step that may do slow I/O; its return value goes to ``advance``."""

    run: Callable[[], object]


Call = Union[AgentCall, SimulatorCall, EnvCall]


class Dialogue:
    """One environment played turn by turn: ``call()`` is what it needs now, ``advance(result)``
    takes that call's result and moves to the next state (see the module's docstring)."""

    def __init__(self, env: CollaborationEnv, row_seed: int, key: Hashable):
        self.env, self.row_seed, self.key = env, row_seed, key
        self.state = DONE if env.done else PREPARING
        self._output: Optional[AgentOutput] = None  # the agent's turn while it is recorded
        self._reminder = False  # the next simulator request is a resample after a leak

    @property
    def done(self) -> bool:
        return self.state == DONE

    def call(self) -> Call:
        """The call this dialogue waits for (the same one until ``advance`` is called)."""
        env = self.env
        if self.state == PREPARING:
            return EnvCall(env.prepare)
        if self.state == GENERATING:
            return AgentCall(env.agent_messages(), turn_seed(self.row_seed, env.steps), self.key)
        if self.state == RECORDING:
            out = self._output
            return EnvCall(functools.partial(env.record_agent_turn, out.prompt, out.output,
                                             out.extra))
        if self.state == INTERACTING:
            # without the reminder, the original's call (the frontend takes no argument)
            messages = (env.simulator_messages(reminder=True) if self._reminder
                        else env.simulator_messages())
            return SimulatorCall(messages, self.key)
        raise RuntimeError("the dialogue is over: it needs no more calls")

    def advance(self, result: object) -> str:
        """Take the result of ``call()`` (the agent's output, the human's reply, or what the
        environment step returned) and return the new state."""
        state = self.state
        if state == GENERATING:
            self._output, self.state = result, RECORDING
            return self.state
        if state == INTERACTING:
            if self.env.wants_resample(result):  # a leak, and the turn's allowance is not spent
                self._reminder = True
                return self.state
            self._reminder = False
            self.env.record_user_reply(result)
        elif state == RECORDING:
            self._output = None
        elif state != PREPARING:
            raise RuntimeError("the dialogue is over: there is no call to advance")
        if self.env.done:
            self.state = DONE
        else:
            self.state = INTERACTING if state == RECORDING else GENERATING
        return self.state


def agent_outputs(agent: Agent, calls: Sequence[AgentCall]) -> List[AgentOutput]:
    """One batched ``agent.generate`` call for ``calls``; outputs in order."""
    outputs = agent.generate([c.messages for c in calls], seeds=[c.seed for c in calls],
                             keys=[c.key for c in calls])
    return _one_each(outputs, calls, "agent")


def simulator_replies(simulator: Simulator, calls: Sequence[SimulatorCall]) -> List[SimulatorReply]:
    """One ``simulator.reply_batch`` call for ``calls``; replies in order."""
    replies = simulator.reply_batch([c.messages for c in calls], keys=[c.key for c in calls])
    return _one_each(replies, calls, "simulator")


def _one_each(results: list, calls: Sequence[Call], side: str) -> list:
    if len(results) != len(calls):
        raise RuntimeError(f"{side} returned {len(results)} results for {len(calls)} requests")
    return list(results)
