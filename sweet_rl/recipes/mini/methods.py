"""The reproduction's methods, each a few stage calls from the warm agent and one seed's
offline data (the run that orders them: :mod:`sweet_rl.recipes.mini.reproduction`).

Choices that differ from the paper-scale configs, and why (docs/mini_reproduction.md): the
rank stage and the Best-of-N curve score the candidate's tokens only (``score_tokens``);
learning rates for a model this small; trajectory-level training (critic and multi-turn DPO)
runs ``traj_epochs``, the per-turn agent DPO ``agent_epochs``, rejection fine-tuning
``sft_epochs``; every agent is evaluated ``eval_rollouts`` times per held-out task at
temperature 1.0.
"""

from __future__ import annotations

import json
import os
from typing import List, Sequence

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
                    str(s.max_new_tokens), *run.device_flag, *self.prompt_flag]

    def train(self, stage: str, config: str, *args: str) -> None:
        """A training stage from the warm agent: its config file, then the miniature's flags."""
        self.run.stage(stage, "--config", os.path.join(self.configs, config), "--pretrain",
                       self.agent, *args, *TRAIN_FLAGS, "--micro_train_batch_size",
                       str(self.s.micro))

    def evaluate(self, name: str, model: str, seed: int, folder: str) -> None:
        """Held-out success of one agent."""
        s, out = self.s, os.path.join(folder, f"eval_{name}.jsonl")
        self.run.stage("simulate_interactions", "--agent_model", model, *self.sim,
                       "--input_path", os.path.join(self.warm, "test_tasks.jsonl"),
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

    def sweet_agent(self, name: str, seed: int, folder: str) -> None:
        """Rank with its critic, then per-turn pairs, then the agent's DPO, then evaluate."""
        s, run = self.s, self.run
        ranked = os.path.join(folder, f"ranked_{name}.jsonl")
        pairs = os.path.join(folder, f"agent_pairs_{name}.jsonl")
        run.stage("rank_best_of_n", "--model_id", os.path.join(folder, f"critic_{name}"),
                  "--input_path", os.path.join(folder, "sampled.jsonl"), "--output_path",
                  ranked, "--overwrite", "--score_tokens", s.score_tokens, *RANK_FLAGS[name],
                  *run.device_flag)
        run.mini("critic_check", ranked)  # agreement with the miniature's oracle: a diagnostic
        run.stage("generate_random_pairs_from_ranks", ranked, pairs, "--no_prompt",
                  "--num_pairs", str(s.num_pairs), "--tokenizer", self.agent, "--seed",
                  str(seed))
        self.train("train_dpo", "agent_dpo_backend.json", "--dataset", pairs, "--save_path",
                   os.path.join(folder, name), "--seed", str(seed), "--max_epochs",
                   str(s.agent_epochs), "--learning_rate", str(s.agent_lr))
        self.evaluate(name, os.path.join(folder, name), seed, folder)

    def rejection_fine_tuning(self, seed: int, folder: str) -> None:
        offline = os.path.join(folder, "offline.jsonl")
        with open(offline) as handle:
            passed = any(json.loads(line).get("reward", 0) >= 1 for line in handle
                         if line.strip())
        if not passed:  # nothing to clone: the row is left out of the table rather than faked
            self.run.say(f"rft: no offline dialogue passed every test; skipped for seed {seed}")
            return
        self.train("train_sft", "rft_backend.json", "--dataset", offline, "--save_path",
                   os.path.join(folder, "rft"), "--seed", str(seed), "--max_epochs",
                   str(self.s.sft_epochs), "--learning_rate", str(self.s.sft_lr))
        self.evaluate("rft", os.path.join(folder, "rft"), seed, folder)

    def multiturn_dpo(self, seed: int, folder: str) -> None:
        self.train("train_dpo", "multiturn_dpo_backend.json", "--dataset",
                   os.path.join(folder, "trajectory_pairs.jsonl"), "--save_path",
                   os.path.join(folder, "multiturn_dpo"), "--seed", str(seed), "--max_epochs",
                   str(self.s.traj_epochs), "--learning_rate", str(self.s.agent_lr))
        self.evaluate("multiturn_dpo", os.path.join(folder, "multiturn_dpo"), seed, folder)

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
                      os.path.join(self.warm, "test_tasks.jsonl"), "--num_tasks",
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
