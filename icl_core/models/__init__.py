"""Models, one readable file each."""
from .kernel_attention import KernelTransformer
from .lsa import LSA
from .softmax_unit import SoftmaxUnit
from .transformer import Transformer

__all__ = ["KernelTransformer", "LSA", "SoftmaxUnit", "Transformer"]
