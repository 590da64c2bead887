"""The one place that chooses a device: cuda, then mps, then cpu. Nothing else in the
library hard-codes a CUDA device."""
from __future__ import annotations

import torch


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """``None`` or ``"auto"``: the best available of cuda, mps, cpu. Otherwise the named
    device, checked to exist (``ValueError`` naming it if not)."""
    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'mps', got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but no CUDA device is available")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None)
                                  and torch.backends.mps.is_available()):
        raise ValueError("device='mps' was asked for but MPS is not available")
    return dev


def device_name(device: torch.device) -> str:
    """A human-readable name for provenance, e.g. ``"cuda: NVIDIA H100"`` or ``"cpu"``."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return device.type
