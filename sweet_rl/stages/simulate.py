"""Stage: simulate dialogues between an agent and a simulated human.

Row order matches the original (:mod:`sweet_rl.layout`): with ``best_of_n`` = k rollouts, the
task list is written k times over. Dialogues run pipelined by default (each advances as soon
as its own last step is done: :mod:`sweet_rl.rollouts.pipeline`) or in the original's lockstep
(``--rollout lockstep``), with the same trajectories either way. Each row is written as soon as
it finishes (:mod:`sweet_rl.rollouts.row_writer`: in row order, rows that finish early wait in
a spill file), each record in one atomic write, so a killed run resumed with ``--to_continue`` keeps
every finished row and ends with every (task, rollout) exactly once. ``--num_shards N
--shard_index I`` runs one contiguous block of the rows (seeded as in the whole run);
``scripts/merge_shards.py`` joins the shard files into the file one run would have written.
The options are in :mod:`sweet_rl.stages.simulate_options`; the metrics line and the checks
of a finished file in :mod:`sweet_rl.stages.simulate_report`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List

from sweet_rl.records import Task
from sweet_rl.stages.simulate_options import SimulateOptions

logger = logging.getLogger(__name__)


@dataclass
class _Run:
    """What a run reads before it writes anything."""

    all_rows: List[Task]  # every row of the whole run (the task list k times over)
    rows: List[Task]  # this shard's rows; row r of the file is row first + r of the run
    first: int
    agent_prompt: str
    user_prompt: str
    captions: Any = None
    arguments: Dict[str, Any] = field(default_factory=dict)  # what the sidecar records


def simulate(opts: SimulateOptions) -> str:
    """Play the dialogues, write each row as it ends, print the metrics line; returns the
    output path. Every input is checked before the output is touched."""
    from tqdm import tqdm

    from sweet_rl.io import staged_output, write_sidecar
    from sweet_rl.rollouts.row_writer import OrderedRowWriter
    from sweet_rl.stages.simulate_report import check_error_share, summarize

    run = _prepare(opts)
    done, restored = _resume_state(opts, run.rows)
    todo = [r for r in range(done, len(run.rows)) if r not in restored]
    started = time.time()
    # path: output_path, or (--overwrite) a file beside it that replaces it when complete
    with staged_output(opts.output_path, opts.overwrite and not opts.to_continue) as path, \
            contextlib.ExitStack() as closing:
        writer = OrderedRowWriter(path, done, restored)
        make = _environments(opts, run, closing)
        agent, simulator = _models(opts, run.all_rows, closing) if todo else (None, None)
        bar = closing.enter_context(tqdm(total=len(run.rows), initial=len(run.rows) - len(todo),
                                         desc="dialogues", unit="dlg"))
        _play(opts, run, todo, writer, agent, simulator, bar, make)
        writer.finish(len(run.rows))
        write_sidecar(path, run.arguments, "simulate")
    print(f"simulate: {summarize(opts.output_path)} in {time.time() - started:.1f}s -> "
          f"{opts.output_path}")
    check_error_share(opts.output_path, opts.max_error_share)
    return opts.output_path


def _prepare(opts: SimulateOptions) -> _Run:
    """Tasks, prompts and captions read and checked; this shard's rows."""
    from sweet_rl.data.tasks import load_tasks
    from sweet_rl.layout import lay_out
    from sweet_rl.prompts import load_prompt, template_fields
    from sweet_rl.stages.sharding import shard_bounds, shard_facts

    if opts.train:
        logger.info("--train has no effect (it had none in the original either)")
    if opts.temp_path is not None and (opts.task_type != "html" or opts.screenshot_dir):
        logger.info("--temp_path is not used here (pages render in memory; screenshots go to "
                    "--screenshot_dir)")
    tasks = load_tasks(opts.input_path, opts.num_tasks, cache_dir=opts.hf_cache_dir,
                       task_type=opts.task_type)
    agent_prompt = load_prompt(opts.agent_prompt_path, "agent", opts.task_type, opts.single_turn)
    user_prompt = load_prompt(opts.user_prompt_path, "user", opts.task_type)
    captions = None
    if opts.task_type == "html":
        from sweet_rl.prompts.captions import load_captions

        captions = load_captions(opts.user_captions_path)
    elif opts.user_captions_path not in ("", "auto") or opts.lenient_pages:
        logger.info("--user_captions_path and --lenient_pages are for --task_type html only")
    if template_fields(agent_prompt) - {"dialogue_history"}:
        logger.warning("the agent prompt contains %s: it is sent verbatim as the system message "
                       "(as in the original), so these stay unfilled; the task description "
                       "reaches the agent as the first user message",
                       ", ".join("{%s}" % f for f in sorted(template_fields(agent_prompt))))
    all_rows = lay_out(tasks, opts.best_of_n)
    first, end = shard_bounds(len(all_rows), opts.num_shards, opts.shard_index)
    arguments = dict(opts.flags(), num_tasks_used=len(tasks))  # fewer when the file is short
    arguments.update(shard_facts(len(all_rows), opts.num_shards, opts.shard_index))
    return _Run(all_rows, all_rows[first:end], first, agent_prompt, user_prompt, captions,
                arguments)


def _resume_state(opts: SimulateOptions, rows: List[Task]):
    """``(rows already in the file, {row: trajectory} finished ahead of them)``; an existing
    output without --to_continue or --overwrite stops the run."""
    from sweet_rl.io import count_complete_lines
    from sweet_rl.rollouts.row_writer import pending_path, restore_pending
    from sweet_rl.stages.simulate_report import check_resumable

    output, pending = opts.output_path, pending_path(opts.output_path)
    if not (os.path.exists(output) or os.path.exists(pending)):
        return 0, {}
    if opts.to_continue:
        done = count_complete_lines(output)  # 0 when only the spill file exists
        if done:
            check_resumable(output, rows, done)
        restored = restore_pending(output, rows, done)
        logger.info("resuming: %d of %d rows already in %s (and %d finished ahead of them)",
                    done, len(rows), output, len(restored))
        return done, restored
    if not opts.overwrite:
        raise FileExistsError(f"{output} exists: pass --to_continue to resume it or "
                              "--overwrite to replace it")
    if os.path.exists(pending):  # the old file stays until the new one is complete
        os.remove(pending)
    return 0, {}


def _environments(opts: SimulateOptions, run: _Run, closing) -> Callable[[Task], Any]:
    """A function making one row's environment; frontend runs open the browser pool here
    (closed with ``closing``)."""
    from sweet_rl.environments import make_env
    from sweet_rl.environments.base import REJECTED_REPLY

    settings = {"rejected_reply": None if opts.stop_on_rejected_request else REJECTED_REPLY,
                "resample_leaks": opts.resample_leaks}
    if opts.task_type == "html":
        from sweet_rl.rendering.pool import open_renderer
        from sweet_rl.rendering.screenshots import default_screenshot_dir

        renderer, run.arguments["browser_version"] = open_renderer(opts.browser,
                                                                   opts.render_workers)
        closing.callback(renderer.close)
        if opts.temp_path is not None and opts.screenshot_dir is None:
            logger.info("--temp_path: screenshots go to %s", opts.temp_path)
        shots = (opts.screenshot_dir or opts.temp_path
                 or default_screenshot_dir(opts.output_path))
        run.arguments["screenshot_dir"] = shots
        settings.update(renderer=renderer, screenshot_dir=shots, output_path=opts.output_path,
                        max_image_side=opts.max_image_side, captions=run.captions,
                        page_placeholder=opts.page_placeholder, lenient_pages=opts.lenient_pages)
    max_steps = 1 if opts.single_turn else opts.max_steps
    return lambda task: make_env(opts.task_type, task, run.agent_prompt, run.user_prompt,
                                 max_steps=max_steps, **settings)


def _models(opts: SimulateOptions, all_rows: List[Task], closing):
    """The agent and the simulator (closed with ``closing``: the agent first)."""
    from sweet_rl.stages.factory import build_agent, build_pick_agent, build_simulator

    simulator = None
    if opts.hostname:  # a server checks in seconds: before a large agent loads
        simulator = build_simulator(opts, opts.task_type)
        closing.callback(simulator.close)
    agent = build_pick_agent(opts, all_rows) if opts.pick_n > 1 else build_agent(opts, opts.seed)
    local = None
    try:
        if simulator is None:  # in process: it may share the agent's model
            simulator = local = build_simulator(opts, opts.task_type, agent)
    finally:
        closing.callback(lambda: [c.close() for c in (agent, local) if c is not None])
    return agent, simulator


def _play(opts: SimulateOptions, run: _Run, todo: List[int], writer, agent, simulator, bar,
          make) -> None:
    """Play rows ``todo`` of this shard (file row r is row ``first + r`` of the whole run,
    whose seed it keeps) and hand each finished one to ``writer``."""
    from sweet_rl.rollouts.lockstep import run_dialogues
    from sweet_rl.rollouts.pipeline import run_pipelined
    from sweet_rl.seeding import row_seed

    if not todo:  # every row was written before (a run continued after its last row)
        return
    lockstep = opts.rollout == "lockstep"
    chunks = ([todo[at:at + opts.batch_size] for at in range(0, len(todo), opts.batch_size)]
              if lockstep else [todo])
    for chunk in chunks:
        envs = [make(run.rows[r]) for r in chunk]
        seeds = [row_seed(opts.seed, run.first + r) for r in chunk]  # the whole run's seeds
        keys = [run.first + r for r in chunk]
        if lockstep:
            trajectories = run_dialogues(envs, agent, simulator, row_seeds=seeds,
                                         progress=bar, keys=keys)
            writer.add_many(chunk, trajectories)
        else:
            run_pipelined(envs, agent, simulator, seeds,
                          lambda i, trajectory, chunk=chunk: writer.add(chunk[i], trajectory),
                          window=opts.batch_size, agent_batch=opts.generation_batch_size,
                          simulator_concurrency=opts.simulator_concurrency,
                          agent_concurrency=opts.simulator_concurrency, progress=bar, keys=keys)
