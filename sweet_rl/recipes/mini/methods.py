"""The reproduction's methods, each a few stage calls from the warm agent and one seed's
offline data (the run that orders them: :mod:`sweet_rl.recipes.mini.reproduction`).

Choices that differ from the paper-scale configs, and why (docs/mini_reproduction.md): the
rank stage and the Best-of-N curve score the candidate's tokens only (``score_tokens``);
learning rates for a model this small; trajectory-level training (critic and multi-turn DPO)
runs ``traj_epochs``, the per-turn agent DPO ``agent_epochs``, rejection fine-tuning
``sft_epochs`` (with ``match_steps``, rejection fine-tuning and multi-turn DPO instead make
as many updates as SWEET-RL's agent on the same data: :mod:`sweet_rl.recipes.mini.steps`);
every agent is evaluated ``eval_rollouts`` times per task of ``split`` at temperature 1.0.

The data-scaling sweep (``fractions``) trains multi-turn DPO and SWEET-RL again on the first
part of the offline tasks (:mod:`sweet_rl.recipes.mini.subset`); a part's files carry its tag
(``offline_1of3.jsonl``, ``eval_sweet_1of3.jsonl``), and its SWEET-RL ranks the candidates
the whole set sampled for those dialogues.
"""

from __future__ import annotations

import os
import threading
from typing import List, Optional, Sequence

from sweet_rl.recipes.mini.schedule import Scheduler
from sweet_rl.recipes.mini.settings import RunSettings

# the training flags of every method: ZeRO off, fp32, no held-out share
TRAIN_FLAGS = ("--zero_stage", "0", "--bf16", "False", "--gradient_checkpointing", "False",
               "--flash_attn", "False", "--max_len", "1024", "--train_batch_size", "8",
               "--eval_holdout", "0", "--report_to", "none", "--lr_warmup_ratio", "0.05")
# the ranking flags of SWEET-RL and its ablations
RANK_FLAGS = {"sweet": (), "sweet_no_gt": ("--no_use_ground_truth",),
              "sweet_sum": ("--use_sum",)}


class Methods:
    """Every method's stage calls, from the warm agent in ``warm``."""

    def __init__(self, s: RunSettings, run: Scheduler, warm: str, configs: str) -> None:
        self.s, self.run, self.warm, self.configs = s, run, warm, configs
        self.agent = os.path.join(warm, "agent")
        prompt = os.path.join(warm, "agent_prompt.txt")  # the warm agent's system message
        self.prompt_flag: List[str] = ["--agent_prompt_path", prompt] \
            if os.path.isfile(prompt) else []
        self.sim = ["--env_model", "scripted", "--temperature", "1.0", "--max_new_tokens",
                    str(s.max_new_tokens), "--max_steps", str(s.max_turns()),
                    *run.device_flag, *self.prompt_flag]
        self.eval_tasks = os.path.join(warm, f"{s.split}_tasks.jsonl")

    def train(self, stage: str, config: str, *args: str) -> None:
        """A training stage from the warm agent: its config file, then the miniature's flags."""
        self.run.stage(stage, "--config", os.path.join(self.configs, config), "--pretrain",
                       self.agent, *args, *TRAIN_FLAGS, "--micro_train_batch_size",
                       str(self.s.micro))

    def evaluate(self, name: str, model: str, seed: int, folder: str) -> None:
        """Held-out success of one agent."""
        s, out = self.s, os.path.join(folder, f"eval_{name}.jsonl")
        self.run.stage("simulate_interactions", "--agent_model", model, *self.sim,
                       "--input_path", self.eval_tasks,
                       "--num_tasks", str(s.test_tasks), "--best_of_n", str(s.eval_rollouts),
                       "--batch_size", str(s.test_tasks * s.eval_rollouts), "--output_path",
                       out, "--overwrite", "--seed", str(seed))
        self.run.stage("evaluate_code", out, "--k", str(s.eval_rollouts))

    def train_critic(self, name: str, seed: int, folder: str, pairs: str,
                     *extra: str) -> None:
        """A critic from the warm agent."""
        self.train("train_dpo", "critic_backend.json", "--dataset", pairs, "--save_path",
                   os.path.join(folder, f"critic_{name}"), "--seed", str(seed),
                   "--max_epochs", str(self.s.traj_epochs), "--learning_rate",
                   str(self.s.critic_lr), *extra)

    def sweet_agent(self, variant: str, seed: int, folder: str, tag: str = "",
                    pairs_ready: Optional[threading.Event] = None) -> None:
        """Rank with its critic, then per-turn pairs, then the agent's DPO, then evaluate.
        ``tag``: a part of the sweep (its critic and candidates); ``pairs_ready`` is set once
        the pairs exist (or the step failed), for the trainings matched to them."""
        s, run = self.s, self.run
        name = variant + (f"_{tag}" if tag else "")
        ranked = os.path.join(folder, f"ranked_{name}.jsonl")
        pairs = os.path.join(folder, f"agent_pairs_{name}.jsonl")
        sampled = os.path.join(folder, f"sampled_{tag}.jsonl" if tag else "sampled.jsonl")
        try:
            run.stage("rank_best_of_n", "--model_id", os.path.join(folder, f"critic_{name}"),
                      "--input_path", sampled, "--output_path", ranked, "--overwrite",
                      "--score_tokens", s.score_tokens, *RANK_FLAGS[variant], *run.device_flag)
            # agreement with the miniature's oracle, and at the followup family's critical
            # turns: diagnostics only
            run.mini("critic_check", ranked)
            if s.family == "followup":
                run.mini("followup_check", "--ranked", ranked, "--output_path",
                         os.path.join(folder, f"properties_{name}.json"))
            run.stage("generate_random_pairs_from_ranks", ranked, pairs, "--no_prompt",
                      "--num_pairs", str(s.num_pairs), "--tokenizer", self.agent, "--seed",
                      str(seed))
        finally:
            if pairs_ready is not None:
                pairs_ready.set()
        self.train("train_dpo", "agent_dpo_backend.json", "--dataset", pairs, "--save_path",
                   os.path.join(folder, name), "--seed", str(seed), "--max_epochs",
                   str(s.agent_epochs), "--learning_rate", str(s.agent_lr))
        self.evaluate(name, os.path.join(folder, name), seed, folder)

    def matched_epochs(self, folder: str, tag: str, rows: int,
                       pairs_ready: Optional[threading.Event]) -> Optional[float]:
        """With ``pairs_ready`` (match_steps): the epochs over ``rows`` that make as many
        updates as SWEET-RL's agent on the same data, once its pairs exist; else None."""
        if pairs_ready is None:
            return None
        from sweet_rl.recipes.mini.schedule import StepFailed
        from sweet_rl.recipes.mini.steps import epochs_for, rows_in, updates

        pairs_ready.wait()
        pairs = os.path.join(folder, f"agent_pairs_sweet{'_' + tag if tag else ''}.jsonl")
        if not os.path.isfile(pairs):
            raise StepFailed(f"{pairs} is missing: SWEET-RL's pairs failed, so the matched "
                             "training has no number of updates to match")
        target = updates(rows_in(pairs), self.s.agent_epochs, self.s.micro)
        self.run.say(f"matched steps: {target} updates, as SWEET-RL's agent on {pairs}")
        return epochs_for(rows, target, self.s.micro)

    def rejection_fine_tuning(self, seed: int, folder: str,
                              pairs_ready: Optional[threading.Event] = None) -> None:
        from sweet_rl.recipes.mini.steps import rows_in

        offline = os.path.join(folder, "offline.jsonl")
        passed = rows_in(offline, min_reward=1.0)
        if not passed:  # nothing to clone: the row is left out of the table rather than faked
            self.run.say(f"rft: no offline dialogue passed every test; skipped for seed {seed}")
            return
        epochs = self.matched_epochs(folder, "", passed, pairs_ready)
        self.train("train_sft", "rft_backend.json", "--dataset", offline, "--save_path",
                   os.path.join(folder, "rft"), "--seed", str(seed), "--max_epochs",
                   str(self.s.sft_epochs if epochs is None else epochs), "--learning_rate",
                   str(self.s.sft_lr))
        self.evaluate("rft", os.path.join(folder, "rft"), seed, folder)

    def multiturn_dpo(self, seed: int, folder: str, tag: str = "",
                      pairs_ready: Optional[threading.Event] = None) -> None:
        from sweet_rl.recipes.mini.steps import rows_in

        name = "multiturn_dpo" + (f"_{tag}" if tag else "")
        pairs = os.path.join(folder, f"trajectory_pairs{'_' + tag if tag else ''}.jsonl")
        epochs = self.matched_epochs(folder, tag, rows_in(pairs), pairs_ready)
        self.train("train_dpo", "multiturn_dpo_backend.json", "--dataset", pairs,
                   "--save_path", os.path.join(folder, name), "--seed", str(seed),
                   "--max_epochs", str(self.s.traj_epochs if epochs is None else epochs),
                   "--learning_rate", str(self.s.agent_lr))
        self.evaluate(name, os.path.join(folder, name), seed, folder)

    def offline_part(self, seed: int, folder: str, fraction: str, tag: str) -> None:
        """The sweep's part: the first ``fraction`` of the offline tasks, and its pairs."""
        s, run = self.s, self.run
        part = os.path.join(folder, f"offline_{tag}.jsonl")
        run.mini("subset", os.path.join(folder, "offline.jsonl"), "--output_path", part,
                 "--k", str(s.k), "--fraction", fraction)
        run.stage("evaluate_code", part, "--k", str(s.k), "--preference_path",
                  os.path.join(folder, f"trajectory_pairs_{tag}.jsonl"),
                  "--ground_truth_preference_path",
                  os.path.join(folder, f"critic_pairs_{tag}.jsonl"))

    def sampled_part(self, folder: str, fraction: str, tag: str) -> None:
        """The candidates of the part's dialogues, out of those sampled for the whole set."""
        self.run.mini("subset", os.path.join(folder, "offline.jsonl"), "--k", str(self.s.k),
                      "--fraction", fraction, "--sampled",
                      os.path.join(folder, "sampled.jsonl"), "--sampled_output",
                      os.path.join(folder, f"sampled_{tag}.jsonl"))

    def extra_critic(self, kind: str, seed: int, folder: str) -> None:
        """A critic of Figure 3a for the Best-of-N curve only."""
        if kind == "regression":  # Table 3's head, on the SWEET critic's pairs
            self.train_critic("regression", seed, folder,
                              os.path.join(folder, "critic_pairs.jsonl"),
                              "--critic_head", "regression")
        elif kind == "value":  # every turn labelled with its dialogue's success
            self.train_critic("value", seed, folder, os.path.join(folder, "offline.jsonl"),
                              "--critic_head", "value")

    def best_of_n_curve(self, seed: int, folder: str) -> None:
        """Figure 3a with every critic trained for it."""
        s, critics = self.s, []
        if "sweet" in s.methods:
            critics += ["--critic", os.path.join(folder, "critic_sweet")]
        if "sweet_no_gt" in s.methods:
            critics += ["--critic_no_gt", os.path.join(folder, "critic_sweet_no_gt")]
        for kind in s.bon_critics:
            if kind == "judge":  # the agent's base model judges
                critics += ["--judge", self.agent]
            else:
                critics += [f"--critic_{kind}", os.path.join(folder, f"critic_{kind}")]
        self.run.mini("best_of_n", "--agent_model", self.agent, "--tasks",
                      self.eval_tasks, "--max_steps", str(s.max_turns()), "--num_tasks",
                      str(s.test_tasks), "--output_dir", folder, *critics, *self.prompt_flag,
                      "--ns", ",".join(map(str, s.bon_ns)), "--seed", str(seed),
                      "--max_new_tokens", str(s.max_new_tokens), "--rollouts",
                      str(s.bon_rollouts), "--score_tokens", s.score_tokens,
                      *self.run.device_flag)

    def sample_candidates(self, seed: int, folder: str, shards: int) -> None:
        """``num_samples`` replies per offline turn, in ``shards`` pieces side by side."""
        s, run = self.s, self.run
        offline, sampled = (os.path.join(folder, name) for name in ("offline.jsonl",
                                                                     "sampled.jsonl"))
        flags = ["--agent_model", self.agent, "--best_of_n", str(s.num_samples),
                 "--data_fraction", str(s.data_fraction), "--max_new_tokens",
                 str(s.max_new_tokens), "--seed", str(seed), "--overwrite", *run.device_flag]
        if shards == 1:
            run.stage("sample_best_of_n", offline, sampled, *flags)
            return
        pieces: Sequence[str] = [os.path.join(folder, f"sampled.shard{i}.jsonl")
                                 for i in range(shards)]
        run.finish(*(run.start(f"seed{seed}.sample{i}", run.stage, "sample_best_of_n", offline,
                               piece, *flags, "--num_shards", str(shards), "--shard_index",
                               str(i)) for i, piece in enumerate(pieces)))
        run.stage("merge_shards", *pieces, "--output_path", sampled, "--overwrite")
        for piece in pieces:
            for path in (piece, piece + ".config.json"):
                if os.path.exists(path):
                    os.remove(path)
