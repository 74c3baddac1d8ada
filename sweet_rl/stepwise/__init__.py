"""Step-level data for the SWEET-RL agent update: the sample, rank and pair stages of the pipeline.

* :mod:`~sweet_rl.stepwise.turns` -- one record per assistant turn of the offline trajectories;
* :mod:`~sweet_rl.stepwise.scoring` -- token log-probs of N sequences with transformers,
  encoding a turn's shared prefix once and reusing its KV cache for all N candidates;
* :mod:`~sweet_rl.stepwise.spans` -- which tokens of the critic's text a score covers
  (``--score_tokens``: the original's, the turn's, or the candidate's);
* :mod:`~sweet_rl.stepwise.sampling` -- N candidates per turn with their reference log-probs;
* :mod:`~sweet_rl.stepwise.ranking` -- the critic's ``judge_result`` per candidate;
* :mod:`~sweet_rl.stepwise.pairs` -- chosen (high half) / rejected (low half) DPO pairs,
  drawn exactly as the original drew them;
* :mod:`~sweet_rl.stepwise.vllm_backend` -- the same sampling and scoring on vLLM, with the
  conversion of vLLM's output objects kept in pure functions;
* :mod:`~sweet_rl.stepwise.resume` -- appending to an output after a killed run.

Nothing here imports torch or vLLM at module level, so the stage scripts answer ``--help``
instantly.
"""
