"""Stage: simulate dialogues between an agent and a simulated human.

Row order matches the original: with ``best_of_n`` = k rollouts, row ``i + j * num_tasks`` is
rollout j of task i. Rows are appended batch by batch, each record in one atomic write, so a
killed run resumed with ``--to_continue`` skips exactly the rows already written and ends with
every (task, rollout) exactly once.
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


def main(agent_model: Optional[str] = None, hostname: Optional[str] = None, port: int = 8000,
         env_model: Optional[str] = None, task_type: str = "code",
         input_path: Optional[str] = None, output_path: str = "outputs/trajectories.jsonl",
         num_tasks: Optional[int] = None, best_of_n: int = 1, batch_size: int = 1000,
         max_steps: int = 10, temperature: float = 1.0, to_continue: bool = False,
         overwrite: bool = False, agent_backend: str = "hf", single_turn: bool = False,
         agent_prompt_path: str = "auto", user_prompt_path: str = "auto",
         max_new_tokens: int = 1024, simulator_max_tokens: int = 256,
         agent_base_url: Optional[str] = None, api_key: Optional[str] = None,
         agent_tokenizer: Optional[str] = None, generation_batch_size: int = 16,
         device: Optional[str] = None, seed: int = 0, hf_cache_dir: Optional[str] = None):
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
        env_model: the simulator's model (the served model name with --hostname).
        input_path: task JSONL, ``hf://REPO/FILE`` on the hub, or omitted for the bundled tasks.
        best_of_n: rollouts per task (k). single_turn: the paper's single-turn setting.
        to_continue: resume a killed run; overwrite: replace an existing output.
        agent_backend: ``hf`` (transformers), ``vllm``, or ``openai`` (any compatible endpoint,
            at --agent_base_url, key from --api_key or OPENAI_API_KEY).
    """
    arguments = dict(locals())
    arguments.pop("api_key", None)  # never write secrets into the sidecar
    from tqdm import tqdm

    from sweet_rl.environments import make_env
    from sweet_rl.factory import build_agent, build_simulator, resolve_model
    from sweet_rl.data.tasks import load_tasks
    from sweet_rl.io import append_jsonl, count_complete_lines, write_sidecar
    from sweet_rl.prompts import load_prompt
    from sweet_rl.rollout import run_dialogues

    if single_turn:
        max_steps = 1
    # Validate every input before touching the output file.
    tasks = load_tasks(input_path, num_tasks, cache_dir=hf_cache_dir)
    agent_prompt = load_prompt(agent_prompt_path, "agent", task_type, single_turn)
    user_prompt = load_prompt(user_prompt_path, "user", task_type)
    rows = [task for _ in range(int(best_of_n)) for task in tasks]

    done = 0
    if os.path.exists(output_path):
        if to_continue:
            done = count_complete_lines(output_path)
            _check_resumable(output_path, rows, done)
            logger.info("resuming: %d of %d rows already in %s", done, len(rows), output_path)
        elif overwrite:
            os.remove(output_path)
        else:
            raise FileExistsError(f"{output_path} exists: pass --to_continue to resume it or "
                                  "--overwrite to replace it")

    agent = None
    simulator = None
    started = time.time()
    if done < len(rows):
        agent_path = agent_model if agent_backend == "openai" else resolve_model(agent_model)
        agent = build_agent(agent_backend, agent_path, temperature=temperature,
                            max_new_tokens=max_new_tokens, device=device,
                            batch_size=generation_batch_size, base_url=agent_base_url,
                            api_key=api_key, tokenizer=agent_tokenizer, seed=seed)
        simulator = build_simulator(hostname, port, env_model, max_tokens=simulator_max_tokens,
                                    device=device, batch_size=generation_batch_size,
                                    api_key=api_key, agent=agent)
    bar = tqdm(total=len(rows), initial=done, desc="dialogues", unit="dlg")
    try:
        for start in range(done, len(rows), int(batch_size)):
            stop = min(start + int(batch_size), len(rows))
            envs = [make_env(task_type, rows[r], agent_prompt, user_prompt, max_steps=max_steps)
                    for r in range(start, stop)]
            trajectories = run_dialogues(envs, agent, simulator,
                                         row_seeds=[seed * 100_003 + r for r in range(start, stop)],
                                         progress=bar)
            append_jsonl(output_path, trajectories)
    finally:
        bar.close()
        for component in (agent, simulator):
            if component is not None:
                component.close()
    write_sidecar(output_path, arguments, "simulate")
    summary = summarize(output_path)
    print(f"simulate: {summary} in {time.time() - started:.1f}s -> {output_path}")
    return output_path


def summarize(path: str) -> str:
    """One metrics line over the whole output file."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.environments.protocol import ANSWER_MARKER
    from sweet_rl.records import Trajectory

    count = turns = answered = errors = 0
    for traj in iter_jsonl(path, Trajectory.from_dict):
        count += 1
        agent_turns = traj.assistant_turns
        turns += len(agent_turns)
        answered += bool(agent_turns) and ANSWER_MARKER in agent_turns[-1].content
        errors += "error" in traj.extra
    if count == 0:
        return "0 dialogues"
    return (f"{count} dialogues, mean agent turns {turns / count:.2f}, "
            f"answered explicitly {100 * answered / count:.1f}%, simulator errors {errors}")
