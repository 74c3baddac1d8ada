"""Recipes: experiments built from the library's stages, each in a folder of its own.

A recipe keeps everything of one experiment together (its data generators, its checks, its
settings, the order in which it calls the stages) so that the library under ``sweet_rl/``
holds only what any run can use. ``mini/`` is the miniature ColBench reproduction.
"""
