"""sample and rank split over 3 shards and merged give the unsharded run's bytes and sidecar
(the tiny model on the CPU)."""

import json

import pytest

from sweet_rl.stages.rank import RankOptions, rank
from sweet_rl.stages.sample import SampleOptions, sample
from sweet_rl.stages.sharding import merge_shards

SHARDS = 3
# 6 trajectories, 4 kept by --data_fraction, 2 assistant turns each: 8 records; the sample
# stage deals them in runs of --chunk_size (3), one run per shard: blocks of 3, 3 and 2, so
# shard 0 ends inside a trajectory and every shard forms the single run's chunks
SAMPLE = dict(best_of_n=4, max_new_tokens=6, data_fraction=0.7, device="cpu", seed=3,
              chunk_size=3)


def _bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def _stage_arguments(path, stage):
    with open(path + ".config.json", encoding="utf-8") as handle:
        return json.load(handle)["stages"][stage]


@pytest.fixture(scope="module")
def offline(tmp_path_factory, tiny_model_dir):
    """Six evaluated trajectories (written by hand, so no other stage runs here), each with
    two assistant turns whose ``input`` is the chat-formatted prompt."""
    from sweet_rl.models.hf_generation import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    rows = []
    for number in range(6):
        task = f"write function number {number}"
        history = [{"role": "user", "content": task}]
        for reply, user in (("OUTPUT: which inputs?", "two ints"), ("I WANT TO ANSWER: def f",
                                                                    None)):
            prompt = tokenizer.apply_chat_template(history, tokenize=False,
                                                   add_generation_prompt=True)
            history.append({"role": "assistant", "content": reply, "input": prompt,
                            "output": reply})
            if user:
                history.append({"role": "user", "content": user})
        rows.append({"task": {"problem_description": task, "ground_truth": "def f(): pass"},
                     "dialogue_history": history, "answer": "def f", "reward": float(number % 2)})
    path = tmp_path_factory.mktemp("offline") / "offline.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir, offline):
    """The single sample run, its 3 shards, and the shards merged."""
    folder = tmp_path_factory.mktemp("sample")
    single = str(folder / "single.jsonl")
    sample(SampleOptions(input_path=offline, output_path=single, agent_model=tiny_model_dir,
                         **SAMPLE))
    shards = [str(folder / f"shard{i}.jsonl") for i in range(SHARDS)]
    for index, path in enumerate(shards):
        sample(SampleOptions(input_path=offline, output_path=path, agent_model=tiny_model_dir,
                             num_shards=SHARDS,
                             shard_index=index, **SAMPLE))
    merged = str(folder / "merged.jsonl")
    merge_shards(shards, merged)
    return single, shards, merged


def test_sample_shards_merge_into_the_single_runs_file(runs):
    single, shards, merged = runs
    assert [len(_bytes(p).splitlines()) for p in shards] == [3, 3, 2]
    assert _bytes(merged) == _bytes(single)
    last = _stage_arguments(shards[2], "sample_best_of_n")
    assert (last["shard_rows"], last["shard_block"]) == ([6, 8, 8], 3)
    one, joined = (_stage_arguments(p, "sample_best_of_n") for p in (single, merged))
    # only the output's own name differs; both state shard 0 of 1 over all 8 records
    assert (one.pop("output_path"), joined.pop("output_path")) == (single, merged)
    assert one == joined
    assert (one["num_shards"], one["shard_index"], one["shard_rows"]) == (1, 0, [0, 8, 8])
    assert one["shard_block"] == 3  # the merged sidecar states the runs the shards were cut in


def test_a_killed_shard_resumes_to_the_same_file(runs, tiny_model_dir, offline, tmp_path):
    _, shards, _ = runs
    whole = _bytes(shards[1])
    path = tmp_path / "shard1.jsonl"
    path.write_bytes(whole.splitlines(keepends=True)[0] + b'{"input": "torn')
    sample(SampleOptions(input_path=offline, output_path=str(path), agent_model=tiny_model_dir,
                         num_shards=SHARDS,
                         shard_index=1, to_continue=True, **SAMPLE))
    assert path.read_bytes() == whole


def test_rank_shards_merge_into_the_single_runs_file(runs, tiny_model_dir, tmp_path, capsys):
    sampled = runs[0]
    flags = dict(model_id=tiny_model_dir, input_path=sampled, batch_size=3, chunk_size=2,
                 device="cpu")
    single = str(tmp_path / "ranked.jsonl")
    rank(RankOptions(output_path=single, **flags))
    shards = [str(tmp_path / f"ranked{i}.jsonl") for i in range(SHARDS)]
    for index, path in enumerate(shards):
        rank(RankOptions(output_path=path, num_shards=SHARDS, shard_index=index, **flags))
    assert "(shard 2 of 3: records 6..8 of 8)" in capsys.readouterr().out
    merged = str(tmp_path / "merged.jsonl")
    merge_shards(shards, merged)
    assert _bytes(merged) == _bytes(single)
    one, joined = (_stage_arguments(p, "rank_best_of_n") for p in (single, merged))
    assert (one.pop("output_path"), joined.pop("output_path")) == (single, merged)
    assert one == joined


def test_bad_shard_flags_stop_the_stage_before_it_writes(tmp_path, offline, tiny_model_dir):
    out = tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match="--shard_index must be"):
        sample(SampleOptions(input_path=offline, output_path=str(out), agent_model=tiny_model_dir,
                             num_shards=2,
                             shard_index=2, **SAMPLE))
    with pytest.raises(ValueError, match="--num_shards must be"):
        rank(RankOptions(model_id=tiny_model_dir, input_path=offline, output_path=str(out),
                         num_shards=0))
    assert not out.exists()
