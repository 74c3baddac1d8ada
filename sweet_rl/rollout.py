"""Run batches of dialogues: one batched agent call and one batched simulator call per turn."""

from __future__ import annotations

import logging
from typing import List, Optional, Sequence

from sweet_rl.agents.base import Agent
from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.records import Trajectory
from sweet_rl.simulators.base import Simulator

logger = logging.getLogger(__name__)


def turn_seed(row_seed: int, turn: int) -> int:
    """A distinct, reproducible seed for each (dialogue row, turn)."""
    return (row_seed * 1_000_003 + turn * 7919) % (2 ** 31 - 1)


def run_dialogues(envs: Sequence[CollaborationEnv], agent: Agent, simulator: Simulator,
                  row_seeds: Optional[Sequence[int]] = None, progress=None) -> List[Trajectory]:
    """Play every environment to the end; returns trajectories in the order of ``envs``.

    ``progress`` (a tqdm bar, optional) is advanced by one as each dialogue finishes.
    """
    seeds = list(row_seeds) if row_seeds is not None else list(range(len(envs)))
    active = [i for i, env in enumerate(envs) if not env.done]
    while active:
        outputs = agent.generate([envs[i].agent_messages() for i in active],
                                 seeds=[turn_seed(seeds[i], envs[i].steps) for i in active])
        if len(outputs) != len(active):
            raise RuntimeError(f"agent returned {len(outputs)} outputs for {len(active)} dialogues")
        for i, out in zip(active, outputs):
            envs[i].record_agent_turn(out.prompt, out.output)
        waiting = [i for i in active if not envs[i].done]
        if waiting:
            replies = simulator.reply_batch([envs[i].simulator_messages() for i in waiting])
            for i, reply in zip(waiting, replies):
                envs[i].record_user_reply(reply)
        still = [i for i in active if not envs[i].done]
        if progress is not None:
            progress.update(len(active) - len(still))
        active = still
    return [env.trajectory() for env in envs]
