"""icl_core: models, task samplers, baselines and closed-form theory for the icl-book.

Conventions (one for the whole library, see :mod:`icl_core.embed`): tensors are batch
first ``(B, tokens, features)``; the label is the last feature of a stacked token; the
prediction is read with a plus sign; float32 to train, float64 for theory checks.
"""
__version__ = "0.1.0"

from .prompts import Prompt, Streams, derive_seed
from .tasks import LinearRegression, SparseLinearRegression, TaskSampler, make_task
from .models import SoftmaxUnit, Transformer
from .training import Curriculum, TrainingDiverged, train
from .results import Result
from .records import Records
from .devices import pick_device

__all__ = ["Prompt", "Streams", "derive_seed", "LinearRegression", "SparseLinearRegression",
           "TaskSampler", "make_task", "SoftmaxUnit", "Transformer", "Curriculum", "TrainingDiverged", "train",
           "Result", "Records", "pick_device", "__version__"]
