"""Models, one readable file each."""
from .transformer import Transformer

__all__ = ["Transformer"]
