"""Models, one readable file each."""
from .kernel_attention import KernelTransformer
from .lsa import LSA
from .multihead_linear import MultiHeadLinearTransformer
from .softmax_unit import SoftmaxUnit
from .transformer import Transformer

__all__ = ["KernelTransformer", "LSA", "MultiHeadLinearTransformer", "SoftmaxUnit", "Transformer"]
