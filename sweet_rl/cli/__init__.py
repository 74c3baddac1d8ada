"""The commands' entry points: each ``main`` reads a command line into a stage's options and
runs the stage (:mod:`sweet_rl.stages`); ``scripts/*.py`` and ``sweet-rl <stage>`` call them."""
