"""What every in-context model shares: ``forward(x, y, n_context)`` plus ``target_of(y,
n_context)`` (which labels the predictions are scored against); ``predict`` / ``targets``
are the same two on a :class:`~icl_core.prompts.Prompt`."""
from __future__ import annotations

import torch
import torch.nn as nn


class InContextModel(nn.Module):
    d: int

    def target_of(self, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """The labels of the query points, ``(B, T - n_context)`` (override for other layouts)."""
        return y[..., n_context:]

    def predict(self, prompt) -> torch.Tensor:
        """``forward`` on a prompt, after checking its dimension against the model's."""
        if prompt.d != self.d:
            raise ValueError(f"x has d={prompt.d} but the model was built for d={self.d}")
        return self(prompt.x, prompt.y, prompt.n_context)

    def targets(self, prompt) -> torch.Tensor:
        """The labels ``predict(prompt)`` is scored against, same shape."""
        return self.target_of(prompt.y, prompt.n_context)
