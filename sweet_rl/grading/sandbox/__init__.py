"""The sandbox that runs model-written Python: the trust boundary (see docs/safety.md).

:mod:`~sweet_rl.grading.sandbox.client` is the grading process's side (a worker process and its
restarts). Every ``sandbox_*`` module is code the worker and its children run, stdlib-only: the
worker runs ``python -S sandbox_worker.py`` and loads its siblings by path, under these same
names, so they must not import from the ``sweet_rl`` package. What the children send back is
rebuilt and compared outside this folder, in the grading process (:mod:`sweet_rl.grading.decode`,
:mod:`sweet_rl.grading.compare`).
"""
