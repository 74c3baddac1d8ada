"""Run batches of dialogues: one batched agent call and one batched simulator call per turn.

Environments whose turns do slow I/O (the frontend one renders every page in a browser) say so
with ``record_workers`` > 1 (declared on :class:`~sweet_rl.environments.base.CollaborationEnv`,
where it is 1): their ``prepare()`` (rendering the reference) and their agent turns are then
run from that many threads, so a batch renders its pages concurrently through the renderer
pool instead of one page at a time. The others (the backend one) are recorded in order on the
calling thread, where the base class's ``prepare()`` does nothing.
"""

from __future__ import annotations

import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence

from sweet_rl.agents.base import Agent
from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.records import Trajectory
from sweet_rl.seeding import row_seed, turn_seed
from sweet_rl.simulators.base import Simulator

logger = logging.getLogger(__name__)


def run_calls(calls: Sequence[Callable[[], object]], workers: int) -> List[object]:
    """Run ``calls`` (in order when ``workers`` <= 1, else from a thread pool); results in
    order. The first exception is raised after the others have finished."""
    if workers <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=min(workers, len(calls)),
                            thread_name_prefix="record") as pool:
        futures = [pool.submit(call) for call in calls]
        return [future.result() for future in futures]


def run_dialogues(envs: Sequence[CollaborationEnv], agent: Agent, simulator: Simulator,
                  row_seeds: Optional[Sequence[int]] = None, progress=None,
                  keys: Optional[Sequence[int]] = None) -> List[Trajectory]:
    """Play every environment to the end in lockstep; returns trajectories in ``envs`` order.

    ``row_seeds`` (one per environment; by default those of a run seeded 0) give each turn's
    agent call its seed, :func:`sweet_rl.seeding.turn_seed`. ``keys`` (default: positions)
    name the dialogues to the simulator, which may pin each to one server. ``progress`` (a
    tqdm bar, optional) is advanced by one as each dialogue finishes. The pipelined loop,
    :func:`sweet_rl.pipeline.run_pipelined`, plays the same dialogues without the per-turn
    barrier.
    """
    seeds = list(row_seeds) if row_seeds is not None else [row_seed(0, i) for i in range(len(envs))]
    keys = list(keys) if keys is not None else list(range(len(envs)))
    workers = max((env.record_workers for env in envs), default=1)
    active = [i for i, env in enumerate(envs) if not env.done]
    run_calls([envs[i].prepare for i in active], workers)
    ended = [i for i in active if envs[i].done]  # e.g. the reference did not render
    if ended:
        active = [i for i in active if not envs[i].done]
        if progress is not None:
            progress.update(len(ended))
    while active:
        outputs = agent.generate([envs[i].agent_messages() for i in active],
                                 seeds=[turn_seed(seeds[i], envs[i].steps) for i in active],
                                 keys=[keys[i] for i in active])
        if len(outputs) != len(active):
            raise RuntimeError(f"agent returned {len(outputs)} outputs for {len(active)} dialogues")
        run_calls([functools.partial(envs[i].record_agent_turn, out.prompt, out.output,
                                     out.extra)
                   for i, out in zip(active, outputs)], workers)
        waiting = [i for i in active if not envs[i].done]
        reminder = False
        while waiting:  # a reply that leaks the reference may be asked for again (resample)
            replies = simulator.reply_batch(
                [envs[i].simulator_messages(reminder=True) if reminder
                 else envs[i].simulator_messages() for i in waiting],
                keys=[keys[i] for i in waiting])
            again = []
            for i, reply in zip(waiting, replies):
                if envs[i].wants_resample(reply):
                    again.append(i)
                else:
                    envs[i].record_user_reply(reply)
            waiting, reminder = again, True
        still = [i for i in active if not envs[i].done]
        if progress is not None:
            progress.update(len(active) - len(still))
        active = still
    return [env.trajectory() for env in envs]
