"""Recipe: the quick miniature (``sweet-rl mini quick``; docs/mini_reproduction.md, "The quick
miniature"): the reproduction on a smaller miniature that a 2-core CPU runs in minutes, used by
the learning test and the demo. Its settings (:data:`sweet_rl.recipes.mini.settings.QUICK`):

- one task family (late_fee: a fee per day, a grace period and a cap to ask about; 135 train
  and 33 held-out combinations of hidden values) instead of four;
- the short agent prompt (``agent_prompt.txt``, 62 tokens instead of 269), so every row is
  less than half as long;
- a warm agent trained as a curriculum: 5 epochs on the 2000 recall drills alone, where the
  copy of told values is learnt, then 3 on the dialogues and drills together;
- a lower learning rate for the agent's DPO (3e-5 instead of 1e-4): this warm agent already
  succeeds about half the time, and 1e-4 teaches it to stop answering;
- the Best-of-N curve with the two log-prob critics and random choice only
  (``BON_CRITICS="regression value judge"`` adds Figure 3a's other critics).

Every other setting is the run's, and any of them can still be set (flag or variable).
"""


def main(argv=None) -> None:
    from sweet_rl.recipes.mini.reproduction import main as recipe

    recipe(argv, quick=True)
