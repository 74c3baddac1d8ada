"""The miniature ColBench: every method of the paper's Table 2 on a tiny agent, on the CPU.

Everything of the miniature lives here (docs/mini_reproduction.md and docs/mini_warm_start.md
describe the experiment and its figures):

* data: ``tasks`` (the seeded task generator), ``dialogues`` (scripted dialogues of mixed
  quality), ``styles`` (the warm start's mix of them), ``drills`` (recall drills), and the
  short agent prompt ``agent_prompt.txt``;
* commands (``sweet-rl mini <command>``, listed by ``sweet-rl mini --help``): ``warm_start``,
  ``copy_check``, ``critic_check``, ``best_of_n``, ``table``, and the recipes themselves;
* the recipes' settings and the scheduler that runs independent stages side by side.

The library keeps what is generic: the scripted simulator (``--env_model scripted``) and the
offline demo data (:mod:`sweet_rl.data.offline_demo`), which the miniature builds on.
"""

import os

# The miniature's short agent prompt (``--agent_prompt_path mini``): 62 tokens of its tiny
# tokenizer instead of the bundled prompt's 269, so every row is less than half as long.
AGENT_PROMPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_prompt.txt")
