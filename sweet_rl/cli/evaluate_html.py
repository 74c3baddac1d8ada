"""Stage: score frontend trajectories by CLIP similarity with the reference page.

The stage is :func:`sweet_rl.stages.evaluate_html.evaluate_html`; its flags are the fields of
:class:`sweet_rl.stages.evaluate_html.EvaluateHtmlOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.evaluate_html import EvaluateHtmlOptions, evaluate_html

    run_stage(evaluate_html, EvaluateHtmlOptions, argv)
