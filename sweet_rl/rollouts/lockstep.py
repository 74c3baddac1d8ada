"""Run batches of dialogues in lockstep: one batched agent call and one batched simulator call
per turn, the original's loop.

The turn protocol is :class:`.dialogue.Dialogue`'s; this driver only adds the per-turn
barrier. At each step it serves, as one batch, every open dialogue that is furthest into the
turn (a resample before anything else, then the recording, the agent, the set-up), so a turn's
resamples are all answered before the next agent call, and every agent call holds all the
dialogues still open. The pipelined driver, :func:`.pipeline.run_pipelined`, plays the
same dialogues without the barrier and gives the same rows.

Environments whose turns do slow I/O (the frontend one renders every page in a browser) say so
with ``record_workers`` > 1 (declared on :class:`~sweet_rl.environments.base.CollaborationEnv`,
where it is 1): their ``prepare()`` (rendering the reference) and their agent turns are then
run from that many threads, so a batch renders its pages concurrently through the renderer
pool instead of one page at a time. The others (the backend one) are recorded in order on the
calling thread, where the base class's ``prepare()`` does nothing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence

from sweet_rl.agents.base import Agent
from sweet_rl.rollouts.dialogue import (GENERATING, INTERACTING, PREPARING, RECORDING, Dialogue,
                               agent_outputs, simulator_replies)
from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.records import Trajectory
from sweet_rl.seeding import row_seed
from sweet_rl.simulators.base import Simulator

# The steps of a turn, the latest first: the barrier serves the latest step any dialogue is at.
_LATEST_FIRST = (INTERACTING, RECORDING, GENERATING, PREPARING)


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
    tqdm bar, optional) is advanced by one as each dialogue finishes. An environment that is
    already over is left as it is.
    """
    seeds = list(row_seeds) if row_seeds is not None else [row_seed(0, i) for i in range(len(envs))]
    keys = list(keys) if keys is not None else list(range(len(envs)))
    workers = max((env.record_workers for env in envs), default=1)
    dialogues = [Dialogue(env, seed, key) for env, seed, key in zip(envs, seeds, keys)]
    open_ = [dialogue for dialogue in dialogues if not dialogue.done]
    while open_:
        state = next(s for s in _LATEST_FIRST if any(d.state == s for d in open_))
        batch = [dialogue for dialogue in open_ if dialogue.state == state]
        calls = [dialogue.call() for dialogue in batch]
        if state == GENERATING:
            results = agent_outputs(agent, calls)
        elif state == INTERACTING:
            results = simulator_replies(simulator, calls)
        else:  # set-up or recording: environment steps, concurrent for slow environments
            results = run_calls([call.run for call in calls], workers)
        for dialogue, result in zip(batch, results):
            dialogue.advance(result)
        still = [dialogue for dialogue in open_ if not dialogue.done]
        if progress is not None and len(still) < len(open_):
            progress.update(len(open_) - len(still))
        open_ = still
    return [env.trajectory() for env in envs]
