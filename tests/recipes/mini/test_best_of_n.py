"""The critic's Best-of-N curve: N replies sampled per turn, the critic's (or a random) pick
played against the scripted human, every dialogue graded by the real grader."""

import json
import pytest

from sweet_rl.agents.critic_pick import CriticPickAgent
from sweet_rl.recipes.mini.best_of_n import MiniBestOfNOptions, best_of_n_curve
from sweet_rl.flags import parse_command_line
from sweet_rl.recipes.mini.tasks import generate_tasks
from sweet_rl.io import read_jsonl, write_jsonl


class _FixedCritic:
    """Stands in for the critic's scorer: (sum, count) per candidate, as ContinuationScorer."""

    tokenizer = None

    def __init__(self, scores):
        self.scores = scores

    def score_many(self, items):
        return [self.scores]


def test_the_pick_is_the_best_judge_result_critic_minus_reference(monkeypatch):
    import sweet_rl.stepwise.ranking as ranking
    from sweet_rl.stepwise.judges import LogProbJudge

    monkeypatch.setattr(ranking, "critic_items", lambda *args: [None])
    agent = CriticPickAgent.__new__(CriticPickAgent)
    agent.n, agent.truth_of = 3, {7: "truth"}.__getitem__
    # critic means -1, -2, -1.5; reference scores (sum, count) -> means -3, -2.5, -1
    agent.judge = LogProbJudge(_FixedCritic([(-2.0, 2), (-4.0, 2), (-3.0, 2)]))
    reference = [(-6.0, 2), (-5.0, 2), (-2.0, 2)]
    # judge = critic - reference = 2, 0.5, -0.5: the first wins although the third is likeliest
    messages = [{"role": "user", "content": "req"}]
    scores = agent.scores(messages, "prompt", ["a", "b", "c"], reference, seed=0, key=7)
    assert scores == [2.0, 0.5, -0.5]
    agent.judge = None  # random choice: seeded, within range, varies with the seed
    picks = {agent.scores(messages, "prompt", ["a", "b", "c"], reference, seed=s).index(1.0)
             for s in range(20)}
    assert picks == {0, 1, 2}


def test_a_random_pick_samples_the_same_texts_without_scoring_them(tiny_model_dir, monkeypatch):
    from sweet_rl.stepwise.sampling import HFSampler

    sampler = HFSampler(tiny_model_dir, 1.0, 6)
    [(texts, scores)] = sampler.sample(["hello"], 3, [5])
    assert len(texts) == len(scores) == 3
    calls = []
    monkeypatch.setattr(sampler.scorer, "score", lambda *args: calls.append(args))
    assert sampler.sample(["hello"], 3, [5], score=False) == [(texts, None)] and not calls
    # the random-pick agent asks for no log-probs; a critic's pick does (it reads them)
    agent = CriticPickAgent(tiny_model_dir, 3, lambda key: "truth", max_new_tokens=6)
    monkeypatch.setattr(agent.sampler.scorer, "score", lambda *args: calls.append(args))
    [played] = agent.generate([[{"role": "user", "content": "hi"}]], seeds=[5])
    assert not calls and played.extra["candidate_scores"].count(1.0) == 1


@pytest.mark.slow
def test_curve_on_held_out_tasks_with_a_real_critic(tiny_model_dir, tmp_path):
    tasks = tmp_path / "test_tasks.jsonl"
    write_jsonl(str(tasks), generate_tasks(2, 0, "test"))
    table = best_of_n_curve(MiniBestOfNOptions(
        agent_model=tiny_model_dir, tasks=str(tasks), output_dir=str(tmp_path),
        critic=tiny_model_dir, critic_no_gt=tiny_model_dir, ns=[1, 2], max_new_tokens=8,
        max_steps=2))
    result = json.loads((tmp_path / "best_of_n.json").read_text())
    assert result["ns"] == [1, 2]
    curve = result["success"]
    assert set(curve) == {"random", "sweet critic", "critic w/o training-time info"}
    # N=1: one sample, every chooser plays it
    assert len({curve[name]["1"] for name in curve}) == 1
    for name, slug in (("random", "random"), ("sweet critic", "sweet"),
                       ("critic w/o training-time info", "no_gt")):
        rows = list(read_jsonl(str(tmp_path / "best_of_n" / f"{slug}_n2.jsonl")))
        assert len(rows) == 2 and all(0.0 <= row["reward"] <= 1.0 for row in rows)
        assert curve[name]["2"] == 100 * sum(r["reward"] >= 1 for r in rows) / 2
    assert table.splitlines()[0] == "| N | random | sweet critic | critic w/o training-time info |"
    assert (tmp_path / "best_of_n.json.config.json").exists()


def test_ns_are_checked():
    def ns(text):
        return parse_command_line(MiniBestOfNOptions, ["a", "t", "o", "--ns", text]).ns

    assert ns("1,2,4") == [1, 2, 4] and ns("8") == [8]
    for bad in ("", "0,2", "-1", "x"):
        try:
            ns(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} accepted")


def test_one_critic_a_single_n_and_the_agent_prompt_file(tiny_model_dir, tmp_path):
    # the learning test's call: --ns 8 (one N), the SWEET critic only, and the
    # warm folder's agent prompt as every dialogue's system message
    tasks, prompt = tmp_path / "test_tasks.jsonl", tmp_path / "agent_prompt.txt"
    write_jsonl(str(tasks), generate_tasks(1, 0, "test"))
    prompt.write_text("Ask first, then answer.", encoding="utf-8")
    best_of_n_curve(MiniBestOfNOptions(agent_model=tiny_model_dir, tasks=str(tasks),
                                       output_dir=str(tmp_path),
                                       critic=tiny_model_dir, ns=[2], max_new_tokens=4, max_steps=1,
                                       agent_prompt_path=str(prompt)))
    assert set(json.loads((tmp_path / "best_of_n.json").read_text())["success"]) == {
        "random", "sweet critic"}
    for slug in ("random", "sweet"):
        [row] = read_jsonl(str(tmp_path / "best_of_n" / f"{slug}_n2.jsonl"))
        first = row["dialogue_history"][1]
        assert first["role"] == "assistant" and "Ask first, then answer." in first["input"]
