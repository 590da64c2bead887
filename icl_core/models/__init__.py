"""Models, one readable file each."""
from .softmax_unit import SoftmaxUnit
from .transformer import Transformer

__all__ = ["SoftmaxUnit", "Transformer"]
