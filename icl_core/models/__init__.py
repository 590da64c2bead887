"""Models, one readable file each."""
from .lsa import LSA
from .softmax_unit import SoftmaxUnit
from .transformer import Transformer

__all__ = ["LSA", "SoftmaxUnit", "Transformer"]
