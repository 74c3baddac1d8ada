"""Pipelined rollouts: every dialogue advances as soon as its own last step is done.

The lockstep loop (:func:`sweet_rl.rollouts.lockstep.run_dialogues`, the original's way) runs one
batched agent call for every open dialogue, then one batched simulator call, then the next
turn: the agent idles while the slowest simulator reply of the turn is awaited, and the
simulator idles while the agent generates. Here the two sides are queues served by their
own threads:

* the agent's requests are batched as they arrive: one thread takes whatever is waiting, up
  to ``agent_batch`` requests, and makes one ``agent.generate`` call of them (the ``hf`` and
  ``vllm`` backends); an agent behind a server (``Agent.parallel_requests``: the ``openai``
  backend, e.g. against ``vllm serve``, whose engine batches on its own) gets single requests
  from ``agent_concurrency`` threads instead;
* the simulator's requests go out concurrently, up to ``simulator_concurrency`` at once, from
  that many threads, for a simulator that serves requests in parallel (an HTTP server:
  ``Simulator.parallel_requests``); an in-process simulator is batched like the agent;
* the environments (dialogue state) are touched by the calling thread only; a frontend
  environment's slow turns (page renders) go to ``record_workers`` threads.

Each dialogue's turns are those of :class:`.dialogue.Dialogue`, the state machine the
lockstep loop drives too: this scheduler only sends each dialogue's next call to the side that
serves it and feeds the result back. Results do not depend on scheduling: a dialogue's turns
depend only on its own history, the simulator is greedy, and every agent call is seeded by the
dialogue's row and turn (:func:`sweet_rl.seeding.turn_seed`), which the agent backends honour
whatever the batch is made of. So a run gives the same trajectories, row for row, as the
lockstep loop.

At most ``window`` dialogues are open at once (simulate's ``--batch_size``); the next starts
when one ends. Each finished dialogue is handed to ``on_finish(index, trajectory)`` at once.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence

from sweet_rl.agents.base import Agent
from sweet_rl.rollouts.dialogue import (AgentCall, Dialogue, SimulatorCall, agent_outputs,
                               simulator_replies)
from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.records import Trajectory
from sweet_rl.simulators.base import Simulator

_STOP = object()
_OPENED = object()  # the event of a dialogue let into the window: it has no result to take


class _Failure:
    """An exception raised off the calling thread, carried to it to be raised there."""

    def __init__(self, error: BaseException):
        self.error = error


def _outcome(call: Callable[[], object]):
    try:
        return call()
    except BaseException as error:
        return _Failure(error)


class _Server:
    """Threads that serve a queue of requests, ``batch`` at most per call of ``serve``.

    ``serve(items) -> results`` (same length and order); each result is posted to ``events``
    as ``(index, result)``, the exception a call raised as ``(-1, _Failure(error))``."""

    def __init__(self, serve: Callable[[list], list], events: "queue.Queue", kind: str,
                 threads: int = 1, batch: int = 1):
        self.requests: "queue.Queue" = queue.Queue()
        self.serve, self.events, self.batch = serve, events, max(1, batch)
        self.threads = [threading.Thread(target=self._loop, name=f"{kind}-{n}", daemon=True)
                        for n in range(max(1, threads))]
        for thread in self.threads:
            thread.start()

    def submit(self, index: int, item) -> None:
        self.requests.put((index, item))

    def _loop(self) -> None:
        while True:
            first = self.requests.get()
            if first is _STOP:
                return
            taken = [first]
            while len(taken) < self.batch:  # whatever else is waiting, without waiting for more
                try:
                    more = self.requests.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    self.requests.put(_STOP)  # for this thread's next turn: serve, then stop
                    break
                taken.append(more)
            results = _outcome(lambda: self.serve([item for _, item in taken]))
            if isinstance(results, _Failure):
                self.events.put((-1, results))
                continue
            for (index, _), result in zip(taken, results):
                self.events.put((index, result))

    def stop(self) -> None:
        for _ in self.threads:
            self.requests.put(_STOP)
        for thread in self.threads:
            thread.join(timeout=60)


def run_pipelined(envs: Sequence[CollaborationEnv], agent: Agent, simulator: Simulator,
                  row_seeds: Sequence[int], on_finish: Callable[[int, Trajectory], None],
                  window: Optional[int] = None, agent_batch: int = 16,
                  simulator_concurrency: int = 64, agent_concurrency: int = 64, progress=None,
                  keys: Optional[Sequence[int]] = None) -> None:
    """Play every environment to its end, pipelined (see the module docstring).

    ``row_seeds[i]`` seeds dialogue i's agent calls (turn by turn); ``keys[i]`` (default: i)
    names dialogue i to the simulator, which may pin it to one server. ``progress`` (a tqdm
    bar, optional) advances by one per finished dialogue. An environment that is already over
    is handed to ``on_finish`` as it is.
    """
    keys = list(keys) if keys is not None else list(range(len(envs)))
    dialogues = [Dialogue(env, seed, key) for env, seed, key in zip(envs, row_seeds, keys)]
    events: "queue.Queue" = queue.Queue()
    agent_parallel = agent.parallel_requests
    agent_server = _Server(lambda calls: agent_outputs(agent, calls), events, "agent",
                           threads=agent_concurrency if agent_parallel else 1,
                           batch=1 if agent_parallel else agent_batch)
    parallel = simulator.parallel_requests
    simulator_server = _Server(lambda calls: simulator_replies(simulator, calls), events,
                               "simulator", threads=simulator_concurrency if parallel else 1,
                               batch=1 if parallel else agent_batch)
    workers = max((env.record_workers for env in envs), default=1)
    recorder = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="record") \
        if workers > 1 else None

    def dispatch(i: int) -> None:
        """Send dialogue i's next call where it is served; its result comes back as an event."""
        call = dialogues[i].call()
        if isinstance(call, AgentCall):
            agent_server.submit(i, call)
        elif isinstance(call, SimulatorCall):
            simulator_server.submit(i, call)
        elif recorder is None:  # an environment step, on this thread
            events.put((i, _outcome(call.run)))
        else:  # an environment step that may do slow I/O, in the pool
            recorder.submit(lambda: events.put((i, _outcome(call.run))))

    waiting = deque(range(len(envs)))
    open_count = finished = 0
    limit = max(1, window or len(envs))

    def start_more() -> None:
        nonlocal open_count
        while waiting and open_count < limit:
            open_count += 1
            events.put((waiting.popleft(), _OPENED))

    try:
        start_more()
        while finished < len(envs):
            i, result = events.get()
            if isinstance(result, _Failure):
                raise result.error
            dialogue = dialogues[i]
            if result is not _OPENED:
                dialogue.advance(result)
            if not dialogue.done:
                dispatch(i)
                continue
            on_finish(i, dialogue.env.trajectory())
            finished += 1
            open_count -= 1
            if progress is not None:
                progress.update(1)
            start_more()
    finally:
        agent_server.stop()
        simulator_server.stop()
        if recorder is not None:
            recorder.shutdown(wait=True)


__all__: List[str] = ["run_pipelined"]
