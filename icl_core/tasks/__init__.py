"""Task families, all with the :class:`TaskSampler` interface.

``make_task(name, **kwargs)`` builds one by name: ``"linear"``, ``"noisy_linear"`` (linear
with ``noise_std`` required > 0), ``"sparse_linear"``, ``"lipschitz"``, ``"low_rank"``, ``"gp"``, ``"relu_net"``.
"""
from .base import TaskSampler
from .gp import GPTask, ReluNetTask
from .linear import LinearRegression
from .lipschitz import LipschitzTask, LowRankTask
from .sparse import SparseLinearRegression

TASKS = {"linear": LinearRegression, "sparse_linear": SparseLinearRegression,
         "lipschitz": LipschitzTask, "low_rank": LowRankTask, "gp": GPTask,
         "relu_net": ReluNetTask}


def make_task(name: str, **kwargs) -> TaskSampler:
    """Build a task sampler by name (see module docstring)."""
    if name == "noisy_linear":
        if kwargs.get("noise_std", 0) <= 0:
            raise ValueError("noise_std must be > 0 for 'noisy_linear', "
                             f"got {kwargs.get('noise_std', 0)}")
        return LinearRegression(**kwargs)
    if name not in TASKS:
        raise ValueError(f"task must be one of {sorted([*TASKS, 'noisy_linear'])}, got {name!r}")
    return TASKS[name](**kwargs)


__all__ = ["TaskSampler", "LinearRegression", "SparseLinearRegression", "LipschitzTask",
           "LowRankTask", "GPTask", "ReluNetTask", "make_task", "TASKS"]
