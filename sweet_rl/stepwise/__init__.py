"""Step-level data for the SWEET-RL agent update (DESIGN.md section 1, steps 4-5).

* :mod:`~sweet_rl.stepwise.turns` -- one record per assistant turn of the offline trajectories;
* :mod:`~sweet_rl.stepwise.scoring` -- log-probs of candidate continuations with transformers,
  encoding a turn's shared prompt once and reusing its KV cache for all N candidates;
* :mod:`~sweet_rl.stepwise.sampling` -- N candidates per turn with their reference log-probs;
* :mod:`~sweet_rl.stepwise.ranking` -- the critic's ``judge_result`` per candidate;
* :mod:`~sweet_rl.stepwise.pairs` -- chosen (top half) / rejected (bottom half) DPO pairs;
* :mod:`~sweet_rl.stepwise.vllm_backend` -- the same sampling and scoring on vLLM, with the
  conversion of vLLM's output objects kept in pure functions;
* :mod:`~sweet_rl.stepwise.resume` -- appending to an output after a killed run.

Nothing here imports torch or vLLM at module level, so the stage scripts answer ``--help``
instantly.
"""
