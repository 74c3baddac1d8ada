"""The sandbox that runs model-written Python (see docs/safety.md).

:mod:`~sweet_rl.grading.sandbox.client` is the grading process's side (a worker process and its
restarts). Every ``sandbox_*`` module is stdlib-only: the worker runs ``python -S
sandbox_worker.py`` and loads its siblings by path, under these same names, so they must not
import from the ``sweet_rl`` package (``sandbox_compare`` and ``sandbox_decode`` run in the
grading process only).
"""
