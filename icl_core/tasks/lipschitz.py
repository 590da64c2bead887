"""Lipschitz task families on the sphere (Collins et al., NeurIPS 2024, Definition 3.2,
Section 3.2, Appendix J).

Covariates (``covariates=``):

* ``"sphere"``: uniform on the unit sphere S^{d-1} (the theory's U^d);
* ``"nonisotropic"``: ``x = S x~ / ||S x~||``, ``S = diag(1, ..., d)``, ``x~ ~ N(0, I)``
  (Figure 3's non-isotropic panels; on the sphere but not uniform).

Function families (``family=``), with Lipschitz constant L:

* ``"affine"``: ``f(x) = l w^T x + b``, ``w ~ U^d``, ``l, b ~ Unif[-L, L]``;
* ``"relu"``: ``f(x) = l1 (w^T x)_+ + l2 (-w^T x)_+ + b``, ``l1, l2, b ~ Unif[-L, L]``;
* ``"cosine"``: ``f(x) = cos(L w^T x)``;
* ``"hills"`` (d = 2, Figure 1): ``f(x) = L cos(theta - b)``, ``theta`` the angle of x and
  ``b ~ Unif[-pi, pi]`` (the paper's formula read literally: a linear function of x with
  Lipschitz constant L); ``hills="wrapped"`` gives the other reading, ``cos(L (theta - b))``
  with the angle difference wrapped to (-pi, pi] (L hills; constant 1 at L = 0).
"""
from __future__ import annotations

import math

import torch

from ..validation import check_choice, check_float, check_int
from .base import TaskSampler

FAMILIES = ("affine", "relu", "cosine", "hills")


def sphere(batch_size: int, n_points: int, d: int, g: torch.Generator) -> torch.Tensor:
    """``(B, T, d)`` points uniform on the unit sphere."""
    z = torch.randn(batch_size, n_points, d, generator=g)
    return z / z.norm(dim=-1, keepdim=True)


class LipschitzTask(TaskSampler):
    """Args: d; family in {"affine", "relu", "cosine", "hills"}; L > 0 (L >= 0 for hills);
    noise_std; covariates in {"sphere", "nonisotropic"}; hills in {"literal", "wrapped"}."""

    name = "lipschitz"

    def __init__(self, d: int, family: str = "relu", L: float = 1.0, noise_std: float = 0.0,
                 covariates: str = "sphere", hills: str = "literal"):
        super().__init__(d, noise_std)
        self.family = check_choice("family", family, set(FAMILIES))
        self.L = check_float("L", L, minimum=0.0, strict=family != "hills")
        self.covariates = check_choice("covariates", covariates, {"sphere", "nonisotropic"})
        self.hills = check_choice("hills", hills, {"literal", "wrapped"})
        if family == "hills" and self.d != 2:
            raise ValueError(f"d must be 2 for the hills family, got {self.d}")
        self._S = torch.arange(1, self.d + 1, dtype=torch.float32)

    def sample_x(self, batch_size, n_points, g):
        if self.covariates == "sphere":
            return sphere(batch_size, n_points, self.d, g)
        z = torch.randn(batch_size, n_points, self.d, generator=g) * self._S
        return z / z.norm(dim=-1, keepdim=True)

    def sample_task(self, batch_size, g):
        if self.family == "hills":
            return {"b": (torch.rand(batch_size, generator=g) * 2 - 1) * math.pi}
        w = sphere(batch_size, 1, self.d, g)[:, 0]
        coef = (torch.rand(batch_size, 3, generator=g) * 2 - 1) * self.L
        return {"w": w, "coef": coef}

    def evaluate(self, x, task):
        if self.family == "hills":
            theta = torch.atan2(x[..., 1], x[..., 0])
            delta = theta - task["b"].to(x.dtype)[:, None]
            if self.hills == "literal":
                return self.L * torch.cos(delta)
            delta = torch.remainder(delta + math.pi, 2 * math.pi) - math.pi
            return torch.cos(self.L * delta)
        s = (x @ task["w"].to(x.dtype).unsqueeze(-1)).squeeze(-1)       # (B, T) = w^T x
        l1, l2, b = (task["coef"][:, i:i + 1].to(x.dtype) for i in range(3))
        if self.family == "affine":
            return l1 * s + b
        if self.family == "relu":
            return l1 * s.clamp(min=0) + l2 * (-s).clamp(min=0) + b
        return torch.cos(self.L * s)

    def __repr__(self):
        return (f"LipschitzTask(d={self.d}, family={self.family!r}, L={self.L}, "
                f"noise_std={self.noise_std}, covariates={self.covariates!r})")


def random_subspace(d: int, k: int, seed: int) -> torch.Tensor:
    """A ``(d, k)`` matrix with orthonormal columns (QR of a Gaussian matrix)."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, k, generator=g))
    return q


class LowRankTask(TaskSampler):
    """Tasks that vary only along ``col(B)`` (Collins et al. Section 4, Appendix J.1).

    Families, with ``a ~ U^k``: ``"linear"`` ``a^T B^T x`` (Definition 4.2), ``"affine"``
    ``a^T B^T x + 2``, ``"quadratic"`` ``(a^T B^T x)^2``, ``"cosine"`` ``cos(4 a^T B^T x)``.
    Covariates: ``"assumption43"``: ``x = c_u B u + c_v B_perp v`` with ``u ~ U^k``,
    ``v ~ U^{d-k}`` (Assumption 4.3); ``"random_J_per_task"``: ``x = J x~ / ||J x~||`` with
    ``J = (G^T G)^{1/2}``, ``x~ ~ N(0, I)`` and G a Gaussian matrix drawn afresh for each task
    (Appendix J.1: "We draw {x_i} i.i.d. from a non-uniform distribution on S^{d-1} for each
    task", the paper's reading); ``"random_J"``: the same with one G fixed per sampler (per
    trial), our earlier reading.
    """

    name = "low_rank"

    def __init__(self, d: int, k: int, family: str = "linear", noise_std: float = 0.0,
                 covariates: str = "assumption43", c_u: float = 2 ** -0.5, c_v: float = 2 ** -0.5,
                 seed: int = 0):
        super().__init__(d, noise_std)
        self.k = check_int("k", k, minimum=1, maximum=self.d - 1)
        self.family = check_choice("family", family, {"linear", "affine", "quadratic", "cosine"})
        self.covariates = check_choice("covariates", covariates, {"assumption43", "random_J", "random_J_per_task"})
        self.c_u = check_float("c_u", c_u, minimum=0.0, strict=True)
        self.c_v = check_float("c_v", c_v, minimum=0.0)
        full = random_subspace(self.d, self.d, seed)
        self.B, self.B_perp = full[:, :self.k].contiguous(), full[:, self.k:].contiguous()
        G = torch.randn(self.d, self.d, generator=torch.Generator().manual_seed(seed + 1))
        evals, evecs = torch.linalg.eigh(G.T @ G)
        self.J = (evecs * evals.clamp(min=0).sqrt()) @ evecs.T

    def sample_x(self, batch_size, n_points, g):
        if self.covariates == "assumption43":
            u = sphere(batch_size, n_points, self.k, g)
            v = sphere(batch_size, n_points, self.d - self.k, g)
            return self.c_u * u @ self.B.T + self.c_v * v @ self.B_perp.T
        if self.covariates == "random_J":
            J = self.J
        else:                                                   # one J per task (prompt)
            G = torch.randn(batch_size, self.d, self.d, generator=g)
            evals, evecs = torch.linalg.eigh(G.transpose(1, 2) @ G)
            J = (evecs * evals.clamp(min=0).sqrt()[:, None, :]) @ evecs.transpose(1, 2)
        z = torch.randn(batch_size, n_points, self.d, generator=g) @ J
        return z / z.norm(dim=-1, keepdim=True)

    def sample_task(self, batch_size, g):
        return {"a": sphere(batch_size, 1, self.k, g)[:, 0]}

    def evaluate(self, x, task):
        s = ((x @ self.B.to(x.dtype)) * task["a"].to(x.dtype)[:, None]).sum(-1)   # a^T B^T x
        if self.family == "linear":
            return s
        if self.family == "affine":
            return s + 2.0
        if self.family == "quadratic":
            return s ** 2
        return torch.cos(4 * s)
