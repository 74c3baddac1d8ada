"""What every stage script shares: logging set-up and clean failures for bad input."""

from __future__ import annotations

import logging
import sys


def run_cli(main) -> None:
    """Run ``main`` through ``fire``; known input errors exit 2 with one clear line."""
    import fire

    from sweet_rl.records import RecordError
    from sweet_rl.simulators.base import SimulatorUnavailable

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        # each stage prints its own metrics line; fire would also print the returned value
        fire.Fire(main, serialize=lambda result: None)
    except (RecordError, SimulatorUnavailable, FileNotFoundError, FileExistsError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
