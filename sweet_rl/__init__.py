"""sweet_rl: SWEET-RL and the ColBench benchmark, reimplemented.

Heavy dependencies (torch, transformers, vllm, selenium, ...) are imported only inside the
modules that need them, so importing this package and running ``--help`` stays instant.
"""

__version__ = "0.1.0"
