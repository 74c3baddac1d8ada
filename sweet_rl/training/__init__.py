"""Preference (DPO / Bradley-Terry) and SFT training on top of ``transformers.Trainer``.

Modules (import them directly; nothing heavy is imported here):

* ``masks``     -- tokenisation, loss masks with turn indices, left truncation, collators;
* ``losses``    -- torch-only: token/sequence log-probs (sum, mean, per-turn mean), DPO, NLL,
  Bradley-Terry on scalar scores, the value head's binary loss;
* ``heads``     -- scalar-head critics (regression, value): mean-pooled last hidden states and a
  linear head, saved and loaded with ``critic_head.json``;
* ``head_trainer`` -- their Trainer and the value function's per-turn rows;
* ``reference`` -- reference log-probs precomputed once before training;
* ``trainer``   -- the Trainer subclass, the metrics.jsonl callback, TrainingArguments;
* ``data``      -- pair files and trajectory files into tokenised examples;
* ``options``   -- the typed, checked options of a run (the flags' defaults);
* ``config``    -- ``configs/*.json`` files, building the options, DeepSpeed ZeRO configs;
* ``run``       -- ``train_preference(options)``, ``train_scalar_critic(options)`` and
  ``train_sft(options)``.
"""
