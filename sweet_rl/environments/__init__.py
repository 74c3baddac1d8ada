"""ColBench environments. ``make_env`` picks one by the original's ``task_type`` names."""

from sweet_rl.environments.backend import BackendEnv
from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.environments.design import DesignEnv

ENVIRONMENTS = {"code": BackendEnv, "html": DesignEnv}


def make_env(task_type: str, *args, **kwargs) -> CollaborationEnv:
    if task_type not in ENVIRONMENTS:
        raise ValueError(f"unknown task_type {task_type!r}; choose from {sorted(ENVIRONMENTS)}")
    return ENVIRONMENTS[task_type](*args, **kwargs)


__all__ = ["BackendEnv", "CollaborationEnv", "DesignEnv", "ENVIRONMENTS", "make_env"]
