"""Typed options for every stage: each flag one dataclass field, one strict parser.

:mod:`sweet_rl.flags.spec` says what a flag is (:func:`flag`, :func:`group`,
:class:`Options`); :mod:`sweet_rl.flags.parse` reads a command line and a ``--config`` file
into a stage's options; :mod:`sweet_rl.flags.help` writes its ``--help``. Standard library
only, so ``--help`` is instant. docs/architecture.md says why this and not another parser.
"""

from sweet_rl.flags.parse import (HelpRequested, UsageError, load_options,  # noqa: F401
                                  parse_command_line)
from sweet_rl.flags.spec import Flag, FlagError, Options, flag, flag_table, group  # noqa: F401
