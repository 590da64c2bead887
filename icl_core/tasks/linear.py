"""Linear regression tasks: ``y = <w, x> + noise_std * eps`` with ``w ~ N(0, w_scale^2 I_d)``.

Covariates are Gaussian, ``x ~ N(0, c * Sigma)``, with ``Sigma`` either

* fixed (``cov="identity"`` or a given ``(d, d)`` positive-definite matrix): Garg et al.'s
  standard task, Zhang et al.'s fixed-covariance setting (their Lambda);
* random per prompt (``cov="random_diag"``): ``Sigma = diag(lambda_1..lambda_d)`` with
  ``lambda_j ~ Exp(1)`` i.i.d., redrawn for every prompt (Zhang et al., Theorem 8 /
  Figure 1). The diagonal is returned in ``prompt.task["cov_diag"]``.

``cov_scale`` (c) multiplies the covariance: Zhang et al.'s covariate-shift experiment
scales it by c in {1, 4, 9}.
"""
from __future__ import annotations

import torch

from ..validation import check_float
from .base import TaskSampler


class LinearRegression(TaskSampler):
    """Gaussian linear regression (Garg et al. 2022; Zhang, Frei, Bartlett 2024 eq. 1).

    Args:
        d: dimension.
        noise_std: label noise sigma (0 gives the noiseless task).
        cov: ``"identity"``, ``"random_diag"`` or a ``(d, d)`` SPD tensor.
        cov_scale: c > 0, multiplies the covariance.
        w_scale: standard deviation of each weight coordinate.
    """

    name = "linear"

    def __init__(self, d: int, noise_std: float = 0.0, cov="identity",
                 cov_scale: float = 1.0, w_scale: float = 1.0):
        super().__init__(d, noise_std)
        self.cov_scale = check_float("cov_scale", cov_scale, minimum=0.0, strict=True)
        self.w_scale = check_float("w_scale", w_scale, minimum=0.0, strict=True)
        if isinstance(cov, str):
            if cov not in ("identity", "random_diag"):
                raise ValueError(f"cov must be 'identity', 'random_diag' or a (d, d) tensor, "
                                 f"got {cov!r}")
            self.cov, self._sqrt = cov, None
        else:
            cov = torch.as_tensor(cov, dtype=torch.float64)
            if cov.shape != (self.d, self.d):
                raise ValueError(f"cov must have shape (d, d) = ({self.d}, {self.d}), "
                                 f"got {tuple(cov.shape)}")
            if not torch.allclose(cov, cov.T, rtol=1e-6, atol=1e-10):
                raise ValueError("cov must be symmetric (a covariance matrix); got one with "
                                 f"max |cov - cov^T| = {(cov - cov.T).abs().max().item():.3g}")
            evals, evecs = torch.linalg.eigh(cov)
            if evals.min() <= 0:
                raise ValueError("cov must be positive definite "
                                 f"(smallest eigenvalue {evals.min().item():.3g})")
            self.cov = cov
            self._sqrt = (evecs * evals.sqrt()) @ evecs.T  # symmetric square root

    def sample_x(self, batch_size, n_points, g):
        z = torch.randn(batch_size, n_points, self.d, generator=g)
        if self._sqrt is not None:
            z = z @ self._sqrt.to(z.dtype)
        elif self.cov == "random_diag":
            lam = torch.empty(batch_size, 1, self.d).exponential_(1.0, generator=g)
            return z * (self.cov_scale * lam).sqrt(), {"cov_diag": self.cov_scale * lam[:, 0]}
        return z * self.cov_scale ** 0.5

    def sample_task(self, batch_size, g):
        return {"w": self.w_scale * torch.randn(batch_size, self.d, generator=g)}

    def draw_runs(self, streams, batch_size, n_points, d_active=None):
        """Same numbers as the generic :meth:`TaskSampler.draw_runs`, written into
        preallocated tensors (the per-run Python overhead dominates small ensembles)."""
        cls = type(self)
        overridden = any(getattr(cls, f) is not getattr(LinearRegression, f)
                         for f in ("sample_x", "sample_task", "evaluate"))
        if self.cov == "random_diag" or overridden:
            return super().draw_runs(streams, batch_size, n_points, d_active)
        K, B, T, d = len(streams), batch_size, n_points, self.d
        x, w = torch.empty(K, B, T, d), torch.empty(K, B, d)
        for k, st in enumerate(streams):
            torch.randn(B, T, d, generator=st.x, out=x[k])
            torch.randn(B, d, generator=st.task, out=w[k])
        if self._sqrt is not None:
            x = x @ self._sqrt.to(x.dtype)
        x = x * self.cov_scale ** 0.5
        if d_active is not None and d_active < d:
            x[..., d_active:] = 0.0
        y = (x @ (self.w_scale * w).unsqueeze(-1)).squeeze(-1)      # (K, B, T)
        if self.noise_std > 0:
            noise = torch.empty(K, B, T)
            for k, st in enumerate(streams):
                torch.randn(B, T, generator=st.noise, out=noise[k])
            y = y + self.noise_std * noise
        return x, y

    def evaluate(self, x, task):
        return (x @ task["w"].to(x.dtype).unsqueeze(-1)).squeeze(-1)  # (B, T, d) @ (B, d, 1)

    def __repr__(self):
        cov = self.cov if isinstance(self.cov, str) else "matrix"
        return (f"LinearRegression(d={self.d}, noise_std={self.noise_std}, cov={cov!r}, "
                f"cov_scale={self.cov_scale}, w_scale={self.w_scale})")
