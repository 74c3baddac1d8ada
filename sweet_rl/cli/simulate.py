"""Stage: dialogues between an agent and a simulated human, one trajectory per line.

The stage is :func:`sweet_rl.stages.simulate.simulate`; its flags are the fields of
:class:`sweet_rl.stages.simulate_options.SimulateOptions` (``--help`` lists them).
"""

from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> None:
    from sweet_rl.flags.command import run_stage
    from sweet_rl.stages.simulate import simulate
    from sweet_rl.stages.simulate_options import SimulateOptions

    run_stage(simulate, SimulateOptions, argv)
