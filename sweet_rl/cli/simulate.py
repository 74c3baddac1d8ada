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
         page_placeholder: bool = False, user_captions_path: str = "auto",
         lenient_pages: bool = False, stop_on_rejected_request: bool = False,
         rollout: str = "pipelined", simulator_concurrency: int = 64, resample_leaks: int = 0,
         num_shards: int = 1, shard_index: int = 0, pick_n: int = 1,
         pick_critic: Optional[str] = None, pick_critic_type: str = "logprob",
         pick_score_tokens: str = "original", pick_without_ground_truth: bool = False,
         pick_judge_base_url: Optional[str] = None, max_error_share: float = 0.1):
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
        hostname: the simulator's OpenAI-compatible server: one host, several
            (``a,b:8001,http://c:8000/v1``) or a file of URLs; a dialogue stays on one server, a
            failing server is left out. Without it the simulator is ``env_model`` in-process.
        input_path: task JSONL, ``hf://REPO/FILE`` on the hub, or omitted for the bundled tasks.
        output_path: the trajectory JSONL to write, one dialogue per line (+ .config.json).
        user_prompt_path: the simulated human's prompt file (``auto``: ours, bundled); it gets
            {problem_description}, {hidden_information} and {dialogue_history}.
        agent_prompt_path: the agent's prompt file (``auto``: ours, bundled), sent verbatim as
            the system message, as the original. Pass the official files for the paper's prompts.
        agent_model: agent checkpoint (path or hub id); default: the embedded tiny model.
        env_model: the simulator's model (the served model name with --hostname; default: the
            tiny model), or ``scripted``: a rule-based human with no model (backend tasks, no
            --hostname) for the miniature benchmark's tasks (sweet_rl/data/mini_tasks.py).
        batch_size: dialogues open at once (pipelined) or per lockstep batch (the original's).
        num_tasks: the first N tasks (1000, the paper's backend test set; None: all).
        max_steps: the most agent turns in one dialogue.
        best_of_n: rollouts per task (k); the task list is written k times over.
        max_error_share: the run exits with an error (exit 2; the rows stay written) when
            more than this share of its dialogues end with simulator errors, e.g. every request
            refused by a server that does not serve --env_model (default 0.1; 1 never fails).
        train: accepted for the original's commands; it had no effect there either.
        task_type: ``code`` (backend programming) or ``html`` (frontend design: pages render
            offline in a browser pool; without --hostname the simulator is the embedded tiny
            vision-language model, or ``env_model`` as a local VLM).
        port: the simulator server's port, for a --hostname given without one.
        temperature: the agent's sampling temperature.
        temp_path: the original's screenshot folder: html: --screenshot_dir when that is not
            given; code: not used.
        to_continue: resume a killed run, keeping every row already written.
        overwrite: replace an existing output (without it or --to_continue, the run stops).
        agent_backend: ``hf`` (transformers), ``vllm``, or ``openai`` (any compatible endpoint,
            at --agent_base_url, key from --api_key or OPENAI_API_KEY).
        single_turn: the paper's single-turn setting (one agent turn, single-turn prompt).
        max_new_tokens: the agent's token budget per turn.
        simulator_max_tokens: the simulated human's budget per reply (greedy, as the original).
        agent_base_url: the server of ``--agent_backend openai`` (default: OpenAI's API).
        api_key: key for the HTTP servers: the openai agent's (default: $OPENAI_API_KEY), the
            simulator's and the pick judge's (default: EMPTY). Never written to disk.
        agent_tokenizer: ``--agent_backend openai``: the served model's tokenizer, so turns
            record the exact chat-template prompt (needed to train on them).
        generation_batch_size: prompts per generate call of an in-process model, and agent
            requests batched at once when pipelined.
        device: where in-process models run (default: cuda when available, else cpu).
        seed: the run's seed; each dialogue's seed derives from it and the row's index.
        hf_cache_dir: the download cache for an ``hf://`` --input_path.
        screenshot_dir: html: where page screenshots go (default: ``<output stem>_screenshots/``
            beside the output); names are content hashes, so a resumed run reuses them.
        render_workers: html: browsers rendering at once (default: the pool's).
        browser: ``chromium`` or ``firefox``.
        max_image_side: html: shrink screenshots whose longer side exceeds this many pixels
            before they are sent to the simulator (default: never).
        page_placeholder: html: replace each page in the dialogue by [SEE RENDERED HTML]
            (the agent then never sees its earlier pages; the original kept them).
        user_captions_path: html: JSON file of the three sentences around the pictures in the
            simulated human's message, ``{"agent_page": ..., "no_page": ..., "reference_page":
            ...}`` (``auto``: ours, bundled; docs/differences.md says how to give the
            original's).
        lenient_pages: html: find the agent's page with tag names in any case (``<HTML>``) and
            ``</html >`` closing it; the original's rule, the default, reads lower case only.
        stop_on_rejected_request: end a dialogue when the simulator server rejects a request
            (HTTP 400), recording the error, instead of the original's "No response." reply.
        rollout: ``pipelined`` (each dialogue advances on its own; agent requests are batched
            as they arrive) or ``lockstep`` (the original: one batched agent call, then one
            simulator call, per turn). Both give the same trajectories.
        simulator_concurrency: requests in flight at once to an HTTP simulator, and to an HTTP
            agent (``--agent_backend openai``), when pipelined.
        resample_leaks: backend: ask the simulated human again, reminded not to write code, up
            to this many times when its reply leaks the reference (0: never, as the original).
            Rows record their leaking replies either way (``leak_turns``).
        num_shards: cut the rows into this many contiguous blocks (shards), one run each;
            join the shard files with scripts/merge_shards.py (1: no sharding).
        shard_index: the shard this run writes (0-based, below --num_shards).
        pick_n: Best-of-N evaluation (paper Figure 3a; backend, hf agent): each turn the agent
            samples this many replies and a step critic picks the one played (assistant turns
            keep ``candidates``, ``candidate_scores``, ``picked``). 1: off.
        pick_critic: the critic that picks: a checkpoint, or for ``judge`` the judging model
            (its served name with --pick_judge_base_url).
        pick_critic_type: ``logprob`` (SWEET-RL's), ``regression``, ``value``, ``judge`` or
            ``random`` (no critic), as rank_best_of_n.py --critic_type.
        pick_score_tokens: as rank_best_of_n.py --score_tokens.
        pick_without_ground_truth: as rank_best_of_n.py --no_use_ground_truth.
        pick_judge_base_url: the server of a ``judge`` pick critic (default: in-process).

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
    from sweet_rl.io import count_complete_lines, staged_output, write_sidecar
    from sweet_rl.layout import lay_out
    from sweet_rl.prompts import load_prompt, template_fields
    from sweet_rl.row_writer import OrderedRowWriter, pending_path, restore_pending
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
    arguments["num_tasks_used"] = len(tasks)  # fewer than --num_tasks when the file is short
    agent_prompt = load_prompt(agent_prompt_path, "agent", task_type, single_turn)
    user_prompt = load_prompt(user_prompt_path, "user", task_type)
    if task_type == "html":
        from sweet_rl.prompts.captions import load_captions

        captions = load_captions(user_captions_path)
    elif user_captions_path not in (None, "", "auto") or lenient_pages:
        logger.info("--user_captions_path and --lenient_pages are for --task_type html only")
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
        elif overwrite:  # the old file stays until the new one is complete (staged_output)
            if os.path.exists(pending_path(output_path)):
                os.remove(pending_path(output_path))
        else:
            raise FileExistsError(f"{output_path} exists: pass --to_continue to resume it or "
                                  "--overwrite to replace it")
    todo = [r for r in range(done, len(rows)) if r not in restored]

    agent = simulator = renderer = bar = None
    from sweet_rl.environments.base import REJECTED_REPLY

    env_kwargs = {"rejected_reply": None if stop_on_rejected_request else REJECTED_REPLY,
                  "resample_leaks": int(resample_leaks)}
    started = time.time()
    # path: output_path, or (--overwrite) a file beside it that replaces it when complete
    with staged_output(output_path, overwrite and not to_continue) as path:
        writer = OrderedRowWriter(path, done, restored)
        try:
            if task_type == "html":
                from sweet_rl.rendering.pool import open_renderer

                # The browser pool is closed in `finally` whatever happens after this point.
                renderer, arguments["browser_version"] = open_renderer(browser, render_workers)
                arguments["screenshot_dir"] = screenshot_dir or default_screenshot_dir(output_path)
                env_kwargs.update(renderer=renderer, screenshot_dir=arguments["screenshot_dir"],
                                  output_path=output_path, max_image_side=max_image_side,
                                  page_placeholder=page_placeholder, captions=captions,
                                  lenient_pages=bool(lenient_pages))
            if todo:
                agent_path = (agent_model if agent_backend == "openai"
                              else resolve_model(agent_model))

                def make_simulator(agent=None):
                    return build_simulator(hostname, port, env_model,
                                           max_tokens=simulator_max_tokens, device=device,
                                           batch_size=generation_batch_size, api_key=api_key,
                                           agent=agent, task_type=task_type)

                if hostname:  # a server checks in seconds: before a large agent loads
                    simulator = make_simulator()
                if int(pick_n) > 1:
                    agent = build_pick_agent(
                        agent_path, int(pick_n), all_rows, pick_critic, pick_critic_type,
                        temperature=temperature, max_new_tokens=max_new_tokens, device=device,
                        batch_size=generation_batch_size, score_tokens=pick_score_tokens,
                        use_ground_truth=not pick_without_ground_truth,
                        judge_base_url=pick_judge_base_url, api_key=api_key or "EMPTY", seed=seed)
                else:
                    agent = build_agent(agent_backend, agent_path, temperature=temperature,
                                        max_new_tokens=max_new_tokens, device=device,
                                        batch_size=generation_batch_size, base_url=agent_base_url,
                                        api_key=api_key, tokenizer=agent_tokenizer, seed=seed)
                if simulator is None:  # in process: it may share the agent's model
                    simulator = make_simulator(agent)
            bar = tqdm(total=len(rows), initial=len(rows) - len(todo), desc="dialogues", unit="dlg")
            _play(rows, todo, first, writer, agent, simulator, bar, seed, rollout,
                  lambda task: make_env(task_type, task, agent_prompt, user_prompt,
                                        max_steps=max_steps, **env_kwargs),
                  int(batch_size), int(generation_batch_size), int(simulator_concurrency))
            writer.finish(len(rows))
            write_sidecar(path, arguments, "simulate")
        finally:
            if bar is not None:
                bar.close()
            for component in (agent, simulator, renderer):
                if component is not None:
                    component.close()
    summary = summarize(output_path)
    print(f"simulate: {summary} in {time.time() - started:.1f}s -> {output_path}")
    _check_error_share(output_path, float(max_error_share))
    return output_path


def _check_error_share(path: str, most: float) -> None:
    """Refuse a run whose dialogues mostly ended in simulator errors: its rows would be graded
    0 and pass for a bad agent. A frontend reference page that did not render is the task's
    problem, not the server's: it is counted in the metrics line, not here."""
    from sweet_rl.io import iter_jsonl

    count = errors = 0
    first = None
    for row in iter_jsonl(path):
        count += 1
        problems = [problem for problem in [row.get("error")] + list(
            row.get("simulator_errors") or []) if str(problem).startswith("simulator")]
        errors += bool(problems)
        first = first or (problems[0] if problems else None)
    if count and errors / count > most:
        raise ValueError(f"{errors} of {count} dialogues in {path} ended with simulator errors "
                         f"(more than --max_error_share {most}); the first: {first}. Check "
                         "--hostname, --port and --env_model (the served model's name)")


def _play(rows, todo, first, writer, agent, simulator, bar, seed, rollout, make,
          batch_size, generation_batch_size, simulator_concurrency) -> None:
    """Play rows ``todo`` of ``rows`` (file row r is row ``first + r`` of the whole run, whose
    seed it keeps) and hand each finished one to ``writer``."""
    from sweet_rl.pipeline import run_pipelined
    from sweet_rl.rollout import run_dialogues
    from sweet_rl.seeding import row_seed

    chunks = ([todo[at:at + batch_size] for at in range(0, len(todo), batch_size)]
              if rollout == "lockstep" else [todo])
    for chunk in chunks:
        envs = [make(rows[r]) for r in chunk]
        seeds = [row_seed(seed, first + r) for r in chunk]  # the whole run's seeds
        keys = [first + r for r in chunk]
        if rollout == "lockstep":
            trajectories = run_dialogues(envs, agent, simulator, row_seeds=seeds,
                                         progress=bar, keys=keys)
            writer.add_many(chunk, trajectories)
        else:
            run_pipelined(envs, agent, simulator, seeds,
                          lambda i, trajectory, chunk=chunk: writer.add(chunk[i], trajectory),
                          window=batch_size, agent_batch=generation_batch_size,
                          simulator_concurrency=simulator_concurrency,
                          agent_concurrency=simulator_concurrency, progress=bar, keys=keys)


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
