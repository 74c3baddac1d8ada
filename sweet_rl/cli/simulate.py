"""Stage: simulate dialogues between an agent and a simulated human.

Row order matches the original (:mod:`sweet_rl.layout`): with ``best_of_n`` = k rollouts, the
task list is written k times over. Dialogues run pipelined by default (each advances as soon
as its own last step is done: :mod:`sweet_rl.pipeline`) or in the original's lockstep
(``--rollout lockstep``), with the same trajectories either way. Each row is written as soon as
it finishes (:mod:`sweet_rl.row_writer`: in row order, rows that finish early wait in a spill
file), each record in one atomic write, so a killed run resumed with ``--to_continue`` keeps
every finished row and ends with every (task, rollout) exactly once. ``--num_shards N
--shard_index I`` runs one contiguous block of the rows (seeded as in the whole run);
``scripts/merge_shards.py`` joins the shard files into the file one run would have written.
"""

from __future__ import annotations

import logging
import os
import time
from typing import List, Optional

from sweet_rl.records import Task

logger = logging.getLogger(__name__)


def _check_resumable(output_path: str, rows: List[Task], done: int) -> None:
    """The rows already written must be the same tasks in the same order."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.records import RecordError, Trajectory

    if done > len(rows):
        raise RecordError(f"has {done} rows but this run makes only {len(rows)}", path=output_path)
    for index, traj in enumerate(iter_jsonl(output_path, Trajectory.from_dict)):
        expected = rows[index].problem_description
        if traj.task.problem_description != expected:
            raise RecordError("field 'task.problem_description' differs from the task this row "
                              "should hold; was the file made with other --input_path, "
                              "--num_tasks or --best_of_n?", path=output_path, line=index + 1)


def main(hostname: Optional[str] = None, input_path: Optional[str] = None,
         output_path: str = "outputs/trajectories.jsonl", user_prompt_path: str = "auto",
         agent_prompt_path: str = "auto", agent_model: Optional[str] = None,
         env_model: Optional[str] = None, batch_size: int = 1000,
         num_tasks: Optional[int] = 1000, max_steps: int = 10, best_of_n: int = 1,
         train: bool = False, task_type: str = "code", port: int = 8000,
         temperature: float = 1.0, temp_path: Optional[str] = None, to_continue: bool = False,
         # the flags above are the original's, in its order (positional arguments fill them)
         overwrite: bool = False, agent_backend: str = "hf", single_turn: bool = False,
         max_new_tokens: int = 1024, simulator_max_tokens: int = 4096,
         agent_base_url: Optional[str] = None, api_key: Optional[str] = None,
         agent_tokenizer: Optional[str] = None, generation_batch_size: int = 16,
         device: Optional[str] = None, seed: int = 0, hf_cache_dir: Optional[str] = None,
         screenshot_dir: Optional[str] = None, render_workers: Optional[int] = None,
         browser: str = "chromium", max_image_side: Optional[int] = None,
         page_placeholder: bool = False, stop_on_rejected_request: bool = False,
         rollout: str = "pipelined", simulator_concurrency: int = 64, resample_leaks: int = 0,
         num_shards: int = 1, shard_index: int = 0, pick_n: int = 1,
         pick_critic: Optional[str] = None, pick_critic_type: str = "logprob",
         pick_score_tokens: str = "original", pick_without_ground_truth: bool = False,
         pick_judge_base_url: Optional[str] = None):
    """Simulate ColBench dialogues and write one trajectory per line to ``output_path``.

    Example (embedded tiny models on the CPU, bundled sample tasks):
        python scripts/simulate_interactions.py --output_path outputs/demo.jsonl --max_new_tokens 32

    With a real agent and a `vllm serve` simulator:
        python scripts/simulate_interactions.py --agent_model meta-llama/Llama-3.1-8B-Instruct \\
            --agent_backend vllm --hostname localhost --port 8000 \\
            --env_model meta-llama/Llama-3.1-70B-Instruct --num_tasks 1000 \\
            --input_path hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl \\
            --output_path outputs/test.jsonl

    Args:
        agent_model: agent checkpoint (path or hub id); default: the embedded tiny model.
        hostname, port: OpenAI-compatible simulator server; without hostname the simulator is
            ``env_model`` run in-process (default: the tiny model).
        env_model: the simulator's model (the served model name with --hostname), or
            ``scripted``: a rule-based human with no model (backend tasks, no --hostname)
            that answers the hidden details a question names, for the miniature benchmark's
            generated tasks (sweet_rl/data/mini_tasks.py).
        input_path: task JSONL, ``hf://REPO/FILE`` on the hub, or omitted for the bundled tasks.
        num_tasks: the first N tasks (1000, the paper's backend test set; None: all).
        best_of_n: rollouts per task (k). single_turn: the paper's single-turn setting.
        agent_prompt_path, user_prompt_path: prompt files (default: ours, bundled). The agent
            prompt is sent verbatim as the system message, nothing substituted (as the
            original); the simulator prompt gets {problem_description}, {hidden_information}
            and {dialogue_history}. Pass the official files for the paper's prompts.
        max_new_tokens: agent tokens per turn (1024). simulator_max_tokens: the simulated
            human's cap (4096, the original's; it answers greedily).
        to_continue: resume a killed run; overwrite: replace an existing output.
        agent_backend: ``hf`` (transformers), ``vllm``, or ``openai`` (any compatible endpoint,
            at --agent_base_url, key from --api_key or OPENAI_API_KEY).
        task_type: ``code`` (backend programming) or ``html`` (frontend design: pages are
            rendered offline in a browser pool; without --hostname the simulator is the
            embedded tiny vision-language model, or ``env_model`` as a local VLM).
        screenshot_dir: html: where page screenshots go (default: beside the output,
            ``<output stem>_screenshots/``); names are content hashes, so a resumed run
            reuses them. render_workers: browsers rendering at once (default: the pool's).
        browser: ``chromium`` or ``firefox``. max_image_side: html: shrink screenshots whose
            longer side exceeds this many pixels before they are sent to the simulator.
        page_placeholder: html: replace each page in the dialogue by [SEE RENDERED HTML]
            (the agent then never sees its earlier pages; the original kept them).
        stop_on_rejected_request: end a dialogue when the simulator server rejects a request
            (HTTP 400), recording the error, instead of the original's "No response." reply.
        rollout: ``pipelined`` (each dialogue advances on its own; the agent's requests are
            batched as they arrive, up to --generation_batch_size) or ``lockstep`` (the
            original: one batched agent call, then one simulator call, per turn). Both give
            the same trajectories. batch_size: dialogues open at once (pipelined) or per
            lockstep batch (the original's meaning).
        simulator_concurrency: requests in flight at once to an HTTP simulator, and to an HTTP
            agent (``--agent_backend openai``, e.g. ``vllm serve``), when pipelined.
        hostname: one server, several (``a,b:8001,http://c:8000/v1``), or a file of URLs;
            a dialogue stays on one server, and a server that fails is left out.
        resample_leaks: backend: ask the simulated human again, with a reminder not to write
            code, up to this many times when its reply leaks the reference (0: never, as the
            original). Every row records its leaking replies either way (``leak_turns``).
        num_shards, shard_index: run only shard I of N (a contiguous block of rows; join the
            shard files with scripts/merge_shards.py).
        pick_n: Best-of-N evaluation (paper Figure 3a; backend, hf agent): at every turn the
            agent samples this many replies and a step critic picks the one played. Each
            assistant turn of the rows keeps ``candidates``, ``candidate_scores`` and
            ``picked``. 1 (default): off.
        pick_critic, pick_critic_type: the critic that picks (a checkpoint; for ``judge`` the
            judging model, or its served name with --pick_judge_base_url) and its type:
            ``logprob`` (SWEET-RL's critic), ``regression``, ``value``, ``judge`` or
            ``random`` (no critic), as rank_best_of_n.py --critic_type.
        pick_score_tokens, pick_without_ground_truth: as rank_best_of_n.py's --score_tokens
            and --no_use_ground_truth.
        train: accepted for the original's commands; it had no effect there either.
        temp_path: the original's screenshot folder: html: used as --screenshot_dir when
            that is not given; code: not used.

    Frontend example (embedded tiny models, bundled sample frontend tasks):
        python scripts/simulate_interactions.py --task_type html \\
            --output_path outputs/demo_html.jsonl --max_new_tokens 32
    """
    arguments = dict(locals())
    arguments.pop("api_key", None)  # never write secrets into the sidecar
    from tqdm import tqdm

    from sweet_rl.environments import make_env
    from sweet_rl.factory import build_agent, build_pick_agent, build_simulator, resolve_model
    from sweet_rl.data.tasks import load_tasks
    from sweet_rl.io import count_complete_lines, write_sidecar
    from sweet_rl.layout import lay_out
    from sweet_rl.prompts import load_prompt, template_fields
    from sweet_rl.pipeline import run_pipelined
    from sweet_rl.rollout import run_dialogues
    from sweet_rl.row_writer import OrderedRowWriter, pending_path, restore_pending
    from sweet_rl.seeding import row_seed
    from sweet_rl.sharding import shard_bounds, shard_facts
    from sweet_rl.rendering.screenshots import default_screenshot_dir

    if train:
        logger.info("--train has no effect (it had none in the original either)")
    if temp_path is not None:
        if task_type == "html" and screenshot_dir is None:
            logger.info("--temp_path: screenshots go to %s", temp_path)
            screenshot_dir = temp_path
        else:
            logger.info("--temp_path is not used here (pages render in memory; screenshots go "
                        "to --screenshot_dir)")
    if single_turn:
        max_steps = 1
    # Validate every input before touching the output file.
    tasks = load_tasks(input_path, num_tasks, cache_dir=hf_cache_dir, task_type=task_type)
    agent_prompt = load_prompt(agent_prompt_path, "agent", task_type, single_turn)
    user_prompt = load_prompt(user_prompt_path, "user", task_type)
    if template_fields(agent_prompt) - {"dialogue_history"}:
        logger.warning("the agent prompt contains %s: it is sent verbatim as the system message "
                       "(as in the original), so these stay unfilled; the task description "
                       "reaches the agent as the first user message",
                       ", ".join("{%s}" % f for f in sorted(template_fields(agent_prompt))))
    if int(pick_n) < 1:
        raise ValueError(f"--pick_n must be at least 1, got {pick_n}")
    if int(pick_n) > 1 and (agent_backend != "hf" or task_type != "code"):
        raise ValueError("--pick_n (Best-of-N) needs --agent_backend hf and --task_type code")
    if rollout not in ("pipelined", "lockstep"):
        raise ValueError(f"--rollout must be 'pipelined' or 'lockstep', got {rollout!r}")
    if int(simulator_concurrency) < 1 or int(batch_size) < 1:
        raise ValueError("--simulator_concurrency and --batch_size must be at least 1")
    all_rows = lay_out(tasks, int(best_of_n))
    first, end = shard_bounds(len(all_rows), int(num_shards), int(shard_index))
    arguments.update(shard_facts(len(all_rows), int(num_shards), int(shard_index)))
    rows = all_rows[first:end]  # this shard's rows; row r of the file is row first + r

    done, restored = 0, {}
    if os.path.exists(output_path) or os.path.exists(pending_path(output_path)):
        if to_continue:
            done = count_complete_lines(output_path)  # 0 when only the spill file exists
            if done:
                _check_resumable(output_path, rows, done)
            restored = restore_pending(output_path, rows, done)
            logger.info("resuming: %d of %d rows already in %s (and %d finished ahead of them)",
                        done, len(rows), output_path, len(restored))
        elif overwrite:
            for path in (output_path, pending_path(output_path)):
                if os.path.exists(path):
                    os.remove(path)
        else:
            raise FileExistsError(f"{output_path} exists: pass --to_continue to resume it or "
                                  "--overwrite to replace it")
    writer = OrderedRowWriter(output_path, done, restored)
    todo = [r for r in range(done, len(rows)) if r not in restored]

    agent = simulator = renderer = bar = None
    from sweet_rl.environments.base import REJECTED_REPLY

    env_kwargs = {"rejected_reply": None if stop_on_rejected_request else REJECTED_REPLY,
                  "resample_leaks": int(resample_leaks)}
    started = time.time()
    try:
        if task_type == "html":
            from sweet_rl.rendering.pool import open_renderer

            # The browser pool is closed in `finally` whatever happens after this point.
            renderer, arguments["browser_version"] = open_renderer(browser, render_workers)
            arguments["screenshot_dir"] = screenshot_dir or default_screenshot_dir(output_path)
            env_kwargs.update(renderer=renderer, screenshot_dir=arguments["screenshot_dir"],
                              output_path=output_path, max_image_side=max_image_side,
                              page_placeholder=page_placeholder)
        if todo:
            agent_path = agent_model if agent_backend == "openai" else resolve_model(agent_model)
            if int(pick_n) > 1:
                agent = build_pick_agent(
                    agent_path, int(pick_n), tasks, pick_critic, pick_critic_type,
                    temperature=temperature, max_new_tokens=max_new_tokens, device=device,
                    batch_size=generation_batch_size, score_tokens=pick_score_tokens,
                    use_ground_truth=not pick_without_ground_truth,
                    judge_base_url=pick_judge_base_url, api_key=api_key or "EMPTY", seed=seed)
            else:
                agent = build_agent(agent_backend, agent_path, temperature=temperature,
                                    max_new_tokens=max_new_tokens, device=device,
                                    batch_size=generation_batch_size, base_url=agent_base_url,
                                    api_key=api_key, tokenizer=agent_tokenizer, seed=seed)
            simulator = build_simulator(hostname, port, env_model,
                                        max_tokens=simulator_max_tokens, device=device,
                                        batch_size=generation_batch_size, api_key=api_key,
                                        agent=agent, task_type=task_type)
        bar = tqdm(total=len(rows), initial=len(rows) - len(todo), desc="dialogues", unit="dlg")
        chunks = ([todo[at:at + int(batch_size)] for at in range(0, len(todo), int(batch_size))]
                  if rollout == "lockstep" else [todo])
        for chunk in chunks:
            envs = [make_env(task_type, rows[r], agent_prompt, user_prompt, max_steps=max_steps,
                             **env_kwargs) for r in chunk]
            seeds = [row_seed(seed, first + r) for r in chunk]  # the whole run's seeds
            keys = [first + r for r in chunk]
            if rollout == "lockstep":
                trajectories = run_dialogues(envs, agent, simulator, row_seeds=seeds,
                                             progress=bar, keys=keys)
                writer.add_many(chunk, trajectories)
            else:
                run_pipelined(envs, agent, simulator, seeds,
                              lambda i, trajectory, chunk=chunk: writer.add(chunk[i], trajectory),
                              window=int(batch_size), agent_batch=int(generation_batch_size),
                              simulator_concurrency=int(simulator_concurrency),
                              agent_concurrency=int(simulator_concurrency), progress=bar,
                              keys=keys)
        writer.finish(len(rows))
    finally:
        if bar is not None:
            bar.close()
        for component in (agent, simulator, renderer):
            if component is not None:
                component.close()
    write_sidecar(output_path, arguments, "simulate")
    summary = summarize(output_path)
    print(f"simulate: {summary} in {time.time() - started:.1f}s -> {output_path}")
    return output_path


def summarize(path: str) -> str:
    """One metrics line over the whole output file."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.environments.protocol import ANSWER_MARKER, NO_ANSWER
    from sweet_rl.leaks import format_leak_rate, leak_summary
    from sweet_rl.records import Trajectory
    from sweet_rl.rendering.pictures import REFERENCE_KEY

    count = turns = answered = errors = pages = with_page = 0
    rows = []  # what the leak count needs of each row, not the row (inputs are long)
    for traj in iter_jsonl(path, Trajectory.from_dict):
        count += 1
        rows.append({"leaked_replies": traj.extra.get("leaked_replies"),
                     "dialogue_history": [{"role": turn.role} for turn in traj.dialogue_history]})
        agent_turns = traj.assistant_turns
        turns += len(agent_turns)
        answered += bool(agent_turns) and ANSWER_MARKER in agent_turns[-1].content
        errors += "error" in traj.extra or bool(traj.extra.get("simulator_errors"))
        if REFERENCE_KEY in traj.extra:  # frontend rows
            pages += 1
            with_page += traj.answer not in ("", NO_ANSWER)
    if count == 0:
        return "0 dialogues"
    line = (f"{count} dialogues, mean agent turns {turns / count:.2f}, "
            f"answered explicitly {100 * answered / count:.1f}%")
    if pages:  # errors there are the simulator's or a reference that did not render
        return line + (f", errors {errors}, "
                       f"answered with a page {100 * with_page / pages:.1f}%")
    leaks = leak_summary(rows)
    line += f", dialogues with simulator errors {errors}"
    return line + (f", {format_leak_rate(leaks)}" if leaks["dialogues"] else "")
