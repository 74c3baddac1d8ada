"""rank_best_of_n averages over the tokens the original averaged over (--score_tokens).

The original scored ``"In light that the final answer is: {gt}." + input + candidate`` plus
an assistant header through vLLM's prompt log-probs, dropped the header's last 4 positions
and averaged over the positions after the last decoded token equal to ``tokenizer.eos_token``.
On vLLM 0.6.5 (V0, the training fork's pin) prompt tokens are decoded with
``skip_special_tokens=True``, so ``<|eot_id|>`` decodes to "" and is never found: the mean
covers every position with a log-prob -- all tokens but the first (``original``). On vLLM >= 0.8
the eot closing the last user message is found: the assistant header + candidate (``turn``).
The paper: the candidate only (``candidate``).

Token counts of the hand-made record with the tiny tokenizer (BPE trained by
sweet_rl/models/tiny_model.py, which adds no BOS of its own):
  "In light that the final answer is: def f(a, b): return a + b."  -> 22 tokens
  input (chat template, one user message, generation prompt)       -> 20 tokens, of which
      the last 6 follow its last <|eot_id|>:
      <|start_header_id|> ass istant <|end_header_id|> \\n \\n
  "OUTPUT: ints?"            -> 6 tokens;   "I WANT TO ANSWER: def f" -> 7 tokens
So the critic's texts are 22 + 20 + 6 = 48 and 49 tokens, and the spans are
  original: 47 and 48 (all but the first);  turn: 6 + 6 = 12 and 13;  candidate: 6 and 7.
With a tokenizer that adds a BOS (as Llama-3.1's does) the texts gain one token in front:
original becomes 48 and 49, the other spans do not change.
"""

import json
import shutil
from types import SimpleNamespace

import pytest
import torch

from sweet_rl.stages.rank import RankOptions, rank

GROUND_TRUTH = "def f(a, b): return a + b"
CANDIDATES = ["OUTPUT: ints?", "I WANT TO ANSWER: def f"]
SPANS = {"original": [47, 48], "turn": [12, 13], "candidate": [6, 7]}
SPANS_WITH_BOS = {"original": [48, 49], "turn": [12, 13], "candidate": [6, 7]}


def _step_file(path, tokenizer):
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "add two numbers"}],
                                           tokenize=False, add_generation_prompt=True)
    row = {
        "input": prompt,
        "input_with_ground_truth": f"In light that the final answer is: {GROUND_TRUTH}." + prompt,
        "older_output": "o",
        "reward": 1.0,
        "ground_truth": GROUND_TRUTH,
        "messages": [],
        "additional_outputs": CANDIDATES,
        # reference 0: judge_result is the critic's own score
        "additional_reference_logprobs": [0.0, 0.0],
        "additional_reference_logprobs_sum": [0.0, 0.0],
    }
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    return str(path), row


def _bos_model(tiny_model_dir, target):
    """A copy of the tiny model whose tokenizer puts <|begin_of_text|> in front of every text
    it encodes with special tokens, as Llama-3.1's post-processor does."""
    shutil.copytree(tiny_model_dir, target)
    with open(target / "tokenizer.json", encoding="utf-8") as handle:
        spec = json.load(handle)
    bos = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            bos,
            {"Sequence": {"id": "A", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {
            "<|begin_of_text|>": {
                "id": "<|begin_of_text|>",
                "ids": [0],
                "tokens": ["<|begin_of_text|>"],
            }
        },
    }
    with open(target / "tokenizer.json", "w", encoding="utf-8") as handle:
        json.dump(spec, handle)
    return str(target)


def _direct(model_dir, text, count):
    """Teacher-forced (sum, count) over the last ``count`` tokens of ``text`` (tokenised with
    special tokens added), from one plain forward pass of the whole text."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    ids = tokenizer(text, add_special_tokens=True)["input_ids"]
    with torch.no_grad():
        logps = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)  # (T, V)
    values = [logps[t - 1, ids[t]].item() for t in range(len(ids) - count, len(ids))]
    return sum(values), len(ids)


@pytest.mark.parametrize("with_bos", [False, True])
def test_stepwise_rank_each_mode_scores_its_stated_span(tmp_path, tiny_model_dir, with_bos):
    from sweet_rl.models.hf_generation import load_tokenizer

    model_dir = _bos_model(tiny_model_dir, tmp_path / "bos") if with_bos else tiny_model_dir
    spans = SPANS_WITH_BOS if with_bos else SPANS
    steps, row = _step_file(tmp_path / "steps.jsonl", load_tokenizer(model_dir))
    for mode, counts in spans.items():
        expected_mean, expected_sum = [], []
        for candidate, count in zip(CANDIDATES, counts):
            total, length = _direct(model_dir, row["input_with_ground_truth"] + candidate, count)
            assert length == 48 + CANDIDATES.index(candidate) + int(with_bos)  # the docstring's
            expected_mean.append(total / count)
            expected_sum.append(total)
        for use_sum, expected in ((False, expected_mean), (True, expected_sum)):
            for cache in (True, False):
                out = str(tmp_path / f"{mode}-{use_sum}-{cache}.jsonl")
                rank(RankOptions(model_id=model_dir, input_path=steps, output_path=out,
                                 score_tokens=mode, use_sum=use_sum, no_prompt_cache=not cache,
                                 batch_size=1, device="cpu"))
                with open(out, encoding="utf-8") as handle:
                    judged = json.loads(handle.readline())["judge_result"]
                assert judged == pytest.approx(expected, abs=1e-4), (mode, use_sum, cache)
        with open(out + ".config.json", encoding="utf-8") as handle:
            assert json.load(handle)["stages"]["rank_best_of_n"]["score_tokens"] == mode


def test_stepwise_rank_default_is_original_and_save_steps(tmp_path, tiny_model_dir):
    from sweet_rl.models.hf_generation import load_tokenizer

    steps, row = _step_file(tmp_path / "steps.jsonl", load_tokenizer(tiny_model_dir))
    default, explicit = str(tmp_path / "d.jsonl"), str(tmp_path / "e.jsonl")
    rank(RankOptions(model_id=tiny_model_dir, input_path=steps, output_path=default,
                     device="cpu", save_steps=1))
    rank(RankOptions(model_id=tiny_model_dir, input_path=steps, output_path=explicit,
                     device="cpu", score_tokens="original"))
    with open(default) as a, open(explicit) as b:
        assert json.loads(a.read())["judge_result"] == pytest.approx(
            json.loads(b.read())["judge_result"], abs=1e-6)
    with pytest.raises(ValueError, match="--score_tokens"):
        rank(RankOptions(model_id=tiny_model_dir, input_path=steps,
                         output_path=str(tmp_path / "x.jsonl"), score_tokens="all"))
    assert not (tmp_path / "x.jsonl").exists()


class _PromptLogprobsLLM:
    """Stands in for vllm.LLM.generate(prompt_logprobs=0) on token-id prompts: one entry per
    prompt token, None first, else {token_id: Logprob-like}, computed with the tiny model."""

    def __init__(self, model_dir):
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()

    def generate(self, prompts, params, use_tqdm=False):
        results = []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            with torch.no_grad():
                logps = torch.log_softmax(self.model(torch.tensor([ids])).logits[0].float(), -1)
            entries = [None] + [{ids[t]: SimpleNamespace(logprob=logps[t - 1, ids[t]].item(),
                                                         decoded_token="?")}
                                for t in range(1, len(ids))]
            results.append(SimpleNamespace(prompt_logprobs=entries))
        return results


def test_stepwise_rank_vllm_backend_slices_the_same_spans(tmp_path, tiny_model_dir):
    """The vLLM scorer sends the same token rows and sums the same positions (stand-in LLM
    beside the real hf path above)."""
    from sweet_rl.models.hf_generation import load_tokenizer
    from sweet_rl.records import StepSample
    from sweet_rl.stepwise.ranking import critic_items
    from sweet_rl.stepwise.scoring import ContinuationScorer
    from sweet_rl.stepwise.vllm_backend import span_requests, span_scores

    tokenizer = load_tokenizer(tiny_model_dir)
    _, row = _step_file(tmp_path / "steps.jsonl", tokenizer)
    sample = StepSample.from_dict(row)
    llm = _PromptLogprobsLLM(tiny_model_dir)
    hf = ContinuationScorer(tiny_model_dir, device="cpu")
    for mode, counts in SPANS.items():
        items = critic_items(tokenizer, [sample], True, mode)
        # what VLLMScorer.score_many does around its engine call
        requests = span_requests(items)
        results = llm.generate([{"prompt_token_ids": ids} for ids, _ in requests], None)
        vllm_scores = span_scores(items, requests, results)[0]
        hf_scores = hf.score_spans(*items[0])
        assert [c for _, c in vllm_scores] == counts
        assert [s for s, _ in vllm_scores] == pytest.approx([s for s, _ in hf_scores], abs=1e-4)
