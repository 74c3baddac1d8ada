"""Playing dialogues: environments, one agent and one simulator brought together.

:mod:`.dialogue` holds the turn protocol once, as a per-dialogue state machine; two drivers run
it: :mod:`.lockstep` (one batched agent call and one batched simulator call per turn, the
original's loop) and :mod:`.pipeline` (each dialogue steps on its own clock). :mod:`.row_writer`
writes the rows as they finish, in the original's row order, crash-safely.
"""
