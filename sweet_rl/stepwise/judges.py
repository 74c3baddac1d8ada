"""Who scores a turn's candidates: every step critic of the paper behind one interface.

A :class:`TurnJudge` turns step records (:class:`~sweet_rl.records.StepSample`: the turn's
prompt with and without the reference, and its N candidates) into one score per candidate,
higher = better; the rank stage writes them as ``judge_result`` and Best-of-N plays the best.

* ``logprob`` (SWEET-RL; the default): the critic's mean log-prob of the candidate minus the
  sampling model's, :mod:`sweet_rl.stepwise.ranking`.
* ``regression`` (paper Table 3, "w/ Regression Head") and ``value`` (Figure 3a, "w/ Value
  Function"): a scalar head on the mean of the critic's last hidden states over the critic's
  text, context + candidate (:mod:`sweet_rl.training.heads`); ``value`` scores with the
  logit of success.
* ``vlm_regression`` (the paper's frontend critic, Table 2): a scalar head on a Qwen2-VL
  (:mod:`sweet_rl.training.vlm_heads`) that scores the reference page's screenshot with the
  agent's prompt + candidate -- what its training pairs held (the dialogue as the last turn
  saw and wrote it, and the picture). Step records carry the reference HTML, not its picture:
  :class:`ReferenceScreenshots` finds it in the evaluated trajectory file the records were
  sampled from (``evaluate_html.py`` stored each row's ``reference_screenshot`` there).
  The training fork released no ranking code; scoring each candidate this way follows the
  paper's text (the critic ranks a turn's candidates by its score).
* ``judge`` (Figure 3a, "LLM-as-a-Judge"): a language model (the agent's base model in the
  paper) compares the candidates two at a time, given the reference and the dialogue so far;
  a candidate scores its share of the comparisons won. Each pair is asked in both orders, so
  that a preference for the first or second position cancels out (N·(N-1) questions a turn);
  an answer that is neither A nor B counts half to each. Through any OpenAI-compatible
  endpoint (``judge_base_url``) or in process (a transformers model, greedy).
* ``random``: uniform scores from the record's own seed (Figure 3a's baseline).

The paper gives the judge's inputs (history, reference, candidates) but not its prompt; the
wording below is ours.
"""

from __future__ import annotations

import os
import random
import zlib
from typing import Dict, List, Optional, Sequence, Union

from sweet_rl.records import StepSample

CRITIC_TYPES = ("logprob", "regression", "value", "vlm_regression", "judge", "random")

JUDGE_SYSTEM = ("You compare two possible next replies of an assistant that is working with a "
                "person to write what the person wants. You know the correct final answer.")
JUDGE_REQUEST = (
    "The correct final answer:\n{ground_truth}\n\n"
    "The conversation so far:\n{history}\n\n"
    "Reply A:\n{first}\n\nReply B:\n{second}\n\n"
    "Which reply brings the conversation closer to the correct final answer, by asking for "
    "what is still unknown or by giving the right answer? Answer with the single letter A or B."
)


class TurnJudge:
    """Scores the candidates of step records; one list (one score per candidate) per record."""

    def judge(self, samples: Sequence[StepSample]) -> List[List[float]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release models and clients."""


class LogProbJudge(TurnJudge):
    def __init__(self, scorer, use_ground_truth: bool = True, score_tokens: str = "original",
                 use_sum: bool = False):
        self.scorer, self.use_ground_truth = scorer, use_ground_truth
        self.score_tokens, self.use_sum = score_tokens, use_sum

    def judge(self, samples):
        from sweet_rl.stepwise.ranking import critic_items, judge_results

        items = critic_items(self.scorer.tokenizer, samples, self.use_ground_truth,
                             self.score_tokens)
        scores = self.scorer.score_many(items)  # vLLM: one engine call for all of them
        return [judge_results(c, s, self.use_sum) for s, c in zip(samples, scores)]

    def close(self) -> None:
        close = getattr(self.scorer, "close", None)  # the vLLM scorer's engine
        if close is not None:
            close()


def _per_record(samples: Sequence[StepSample], flat: Sequence[float]) -> List[List[float]]:
    """The scores of all records' candidates, in order, cut back into one list per record."""
    out, at = [], 0
    for s in samples:
        out.append([float(v) for v in flat[at:at + len(s.additional_outputs)]])
        at += len(s.additional_outputs)
    return out


class HeadJudge(TurnJudge):
    """The regression or value head's score of context + candidate."""

    def __init__(self, critic, use_ground_truth: bool = True, batch_size: int = 8):
        self.critic, self.use_ground_truth, self.batch_size = critic, use_ground_truth, batch_size

    def judge(self, samples):
        from sweet_rl.stepwise.ranking import critic_context

        texts = [critic_context(s, self.use_ground_truth) + candidate
                 for s in samples for candidate in s.additional_outputs]
        return _per_record(samples, self.critic.score(texts, batch_size=self.batch_size))


class ReferenceScreenshots:
    """The reference page's screenshot of a step record's task, by its ``ground_truth`` HTML.

    Read from evaluated frontend trajectory files (``evaluate_html.py`` output, the sample
    stage's input): each row's ``reference_screenshot``, a path relative to its file. Keyed
    by the HTML's hash, so the map stays small with thousands of pages.
    """

    def __init__(self, paths: Union[str, Sequence[str]]):
        from sweet_rl.io import iter_jsonl
        from sweet_rl.records import RecordError
        from sweet_rl.rendering.pictures import REFERENCE_KEY
        from sweet_rl.rendering.screenshots import page_key, resolve

        self.paths = [paths] if isinstance(paths, str) else list(paths)
        self.found: Dict[str, str] = {}
        for path in self.paths:
            def parse(data, path=path):
                task = data.get("task") if isinstance(data, dict) else None
                if not isinstance(task, dict) or not isinstance(task.get("ground_truth"), str):
                    raise RecordError("missing: an evaluated frontend row names its reference",
                                      field="task.ground_truth")
                stored = data.get(REFERENCE_KEY)
                if stored is not None and not isinstance(stored, str):
                    raise RecordError("expected a path string", field=REFERENCE_KEY)
                return page_key(task["ground_truth"]), resolve(stored, path)

            for key, picture in iter_jsonl(path, parse):
                if picture:
                    self.found.setdefault(key, picture)

    def __call__(self, sample: StepSample) -> str:
        from sweet_rl.rendering.screenshots import page_key

        picture = self.found.get(page_key(sample.ground_truth))
        if picture is None:
            start = " ".join(sample.ground_truth.split())[:60]
            raise ValueError(f"no reference screenshot for the step record whose ground_truth "
                             f"begins {start!r}: no row of {', '.join(self.paths)} with that "
                             "reference has a reference_screenshot (run evaluate_html.py on "
                             "the file the sample stage read, and pass that file)")
        if not os.path.isfile(picture):
            raise ValueError(f"reference screenshot {picture} (named in "
                             f"{', '.join(self.paths)}) not found")
        return picture


class ImageHeadJudge(TurnJudge):
    """The VLM critic's score of (the turn's reference screenshot, prompt + candidate).

    ``critic.score(items, batch_size)`` takes (picture path, text) items;
    ``screenshot(sample)`` gives the record's picture (a :class:`ReferenceScreenshots`).
    """

    def __init__(self, critic, screenshot, batch_size: int = 8):
        self.critic, self.screenshot, self.batch_size = critic, screenshot, batch_size

    def judge(self, samples):
        pictures = [self.screenshot(s) for s in samples]  # every record found before scoring
        items = [(picture, s.input + candidate)
                 for s, picture in zip(samples, pictures) for candidate in s.additional_outputs]
        return _per_record(samples, self.critic.score(items, batch_size=self.batch_size))


class RandomJudge(TurnJudge):
    """Uniform scores, reproducible per record (seeded by its prompt and candidates)."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def judge(self, samples):
        out = []
        for s in samples:
            key = zlib.crc32((s.input + "\0".join(s.additional_outputs)).encode())
            rng = random.Random(self.seed * 1_000_003 + key)
            out.append([rng.random() for _ in s.additional_outputs])
        return out


def history_text(sample: StepSample) -> str:
    """The dialogue before the turn, as ``role: content`` lines (the system prompt left out)."""
    turns = [m for m in sample.messages if m.get("role") != "system"]
    if turns and turns[-1].get("role") == "assistant":  # the turn itself, when stored with it
        turns = turns[:-1]
    return "\n".join(f"{m.get('role')}: {m.get('content')}" for m in turns)


def judge_messages(sample: StepSample, first: str, second: str):
    request = JUDGE_REQUEST.format(ground_truth=sample.ground_truth, history=history_text(sample),
                                   first=first, second=second)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": request}]


def verdict(text: Optional[str]) -> Optional[int]:
    """0 for A, 1 for B, None when the answer names neither (or both) first."""
    for char in (text or "").strip().upper():
        if char in "AB":
            return "AB".index(char)
        if char.isalpha():
            return None
    return None


def pairwise_scores(n: int, verdicts: Sequence[Optional[int]]) -> List[float]:
    """Share of comparisons won by each of ``n`` candidates, from the verdicts of the ordered
    pairs ``(i, j), i != j`` in row-major order (A = candidate i, B = candidate j)."""
    wins = [0.0] * n
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    if len(verdicts) != len(pairs):
        raise ValueError(f"{len(verdicts)} verdicts for {len(pairs)} ordered pairs")
    for (i, j), said in zip(pairs, verdicts):
        if said is None:
            wins[i] += 0.5
            wins[j] += 0.5
        else:
            wins[(i, j)[said]] += 1.0
    return [w / max(1, 2 * (n - 1)) for w in wins]


class PairwiseJudge(TurnJudge):
    """LLM-as-a-Judge; ``complete(list of messages) -> list of reply texts`` asks the model."""

    def __init__(self, complete):
        self.complete = complete

    def judge(self, samples):
        out = []
        for s in samples:
            texts = s.additional_outputs
            pairs = [(i, j) for i in range(len(texts)) for j in range(len(texts)) if i != j]
            replies = self.complete([judge_messages(s, texts[i], texts[j]) for i, j in pairs])
            out.append(pairwise_scores(len(texts), [verdict(r) for r in replies]))
        return out
