"""simulate's Best-of-N mode (paper Figure 3a): N replies sampled per turn, a critic picks."""

from __future__ import annotations

import pytest

from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from sweet_rl.data.tasks import load_tasks
from sweet_rl.stages.factory import build_judge
from sweet_rl.stages.groups import JudgeOptions
from sweet_rl.io import read_jsonl
from sweet_rl.prompts import load_prompt
from sweet_rl.records import StepSample

FLAGS = dict(num_tasks=2, max_steps=2, max_new_tokens=6, simulator_max_tokens=8, device="cpu")


def test_each_turn_keeps_its_candidates_and_plays_the_critics_best(tiny_model_dir, tmp_path):
    # the critic here is LLM-as-a-Judge (the tiny model, in process, greedy): its scores depend
    # only on the turn's dialogue, reference and candidates, so the test can score them again
    out = tmp_path / "best_of_3.jsonl"
    simulate(SimulateOptions(
        agent_model=tiny_model_dir, env_model=tiny_model_dir, output_path=str(out), pick_n=3,
        pick=JudgeOptions(critic_type="judge", model_id=tiny_model_dir), **FLAGS))
    rows = read_jsonl(str(out))
    judge = build_judge(JudgeOptions(critic_type="judge", model_id=tiny_model_dir))
    system = {"role": "system", "content": load_prompt(None, "agent")}
    turns = 0
    for row, task in zip(rows, load_tasks(None, 2)):
        history = row["dialogue_history"]
        for at, turn in enumerate(history):
            if turn["role"] != "assistant":
                continue
            turns += 1
            candidates, scores = turn["candidates"], turn["candidate_scores"]
            assert len(candidates) == len(scores) == 3
            assert turn["picked"] == max(range(3), key=lambda k: scores[k])
            assert turn["output"] == candidates[turn["picked"]]
            before = [system] + [{"role": t["role"], "content": t["content"]}
                                 for t in history[:at]]
            sample = StepSample.from_dict({
                "input": turn["input"], "input_with_ground_truth": turn["input"],
                "older_output": "", "reward": 0.0, "ground_truth": task.ground_truth,
                "messages": before, "additional_outputs": candidates,
                "additional_reference_logprobs": [0.0] * 3,
                "additional_reference_logprobs_sum": [0.0] * 3})
            assert judge.judge([sample]) == [scores]
    assert turns >= 2


def test_random_picks_and_refusals(tiny_model_dir, tmp_path):
    out = tmp_path / "random.jsonl"
    simulate(SimulateOptions(agent_model=tiny_model_dir, env_model=tiny_model_dir,
                             output_path=str(out), pick_n=2,
                             pick=JudgeOptions(critic_type="random"), **FLAGS))
    for row in read_jsonl(str(out)):
        for turn in (t for t in row["dialogue_history"] if t["role"] == "assistant"):
            assert sorted(turn["candidate_scores"]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="--pick_critic is required"):
        simulate(SimulateOptions(agent_model=tiny_model_dir, env_model=tiny_model_dir,
                                 output_path=str(tmp_path / "x.jsonl"), pick_n=2, **FLAGS))
    with pytest.raises(ValueError, match="needs --agent_backend hf and --task_type code"):
        simulate(SimulateOptions(agent_model=tiny_model_dir, output_path=str(tmp_path / "y.jsonl"),
                                 pick_n=2, task_type="html", **FLAGS))


def test_each_dialogue_is_judged_with_its_own_tasks_reference(tiny_model_dir):
    # two tasks of one family: the same request, different hidden details; the critic must
    # read each dialogue's own reference (the dialogue's row decides it, not its request)
    from sweet_rl.agents.critic_pick import CriticPickAgent
    from sweet_rl.recipes.mini.tasks import generate_tasks
    from sweet_rl.environments import make_env
    from sweet_rl.rollouts.lockstep import run_dialogues
    from sweet_rl.simulators.scripted_simulator import ScriptedSimulator

    tasks = generate_tasks(2, 0, "train", ["late_fee"])
    assert tasks[0].problem_description == tasks[1].problem_description
    assert tasks[0].ground_truth != tasks[1].ground_truth
    seen = {}

    class Recording:
        def judge(self, samples):
            for sample in samples:
                seen.setdefault(sample.ground_truth, 0)
                seen[sample.ground_truth] += 1
            return [[0.0] * len(s.additional_outputs) for s in samples]

        def close(self):
            pass

    agent = CriticPickAgent(tiny_model_dir, 2, lambda key: tasks[key].ground_truth,
                            judge=Recording(), max_new_tokens=4)
    envs = [make_env("code", task, "prompt", "{dialogue_history}", max_steps=2)
            for task in tasks]
    run_dialogues(envs, agent, ScriptedSimulator())
    assert set(seen) == {tasks[0].ground_truth, tasks[1].ground_truth}
