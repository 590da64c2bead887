"""Theory helpers for Cheng, Chen, Sra (ICML 2024): the exact symmetrised loss and the
stationary points of Theorems 4.5 / 4.6.

On a batch closed under every signed permutation P of the whitened covariates (``xi -> P xi``,
``x = Sigma^{1/2} P xi``, the same labels: the kernels here depend on inner products only), the
finite-sample loss has the rotation symmetry of Assumptions 4.1-4.3 exactly, because
``E_P[P^T R P] = tr(R)/d I``. Stationarity on the family
``B_l = b_l Sigma^{-1/2}, C_l = c_l Sigma^{-1/2}, A_l = 0 (or a_l I)`` can then be checked to
machine precision, as the spec recommends.
"""
from __future__ import annotations

import itertools

import torch

from ..models import KernelTransformer


def signed_permutations(d: int) -> torch.Tensor:
    """All ``2^d d!`` signed permutation matrices, ``(2^d d!, d, d)`` float64."""
    mats = []
    for perm in itertools.permutations(range(d)):
        P = torch.zeros(d, d, dtype=torch.float64)
        P[range(d), perm] = 1.0
        for signs in itertools.product((1.0, -1.0), repeat=d):
            mats.append(torch.tensor(signs, dtype=torch.float64)[:, None] * P)
    return torch.stack(mats)


def augmented_batch(task, n_base: int, n_points: int, seed: int = 0):
    """``(x, y)`` in float64: ``n_base`` prompts of ``task`` (a :class:`GPTask`) with their
    whitened covariates mapped by every signed permutation; shapes ``(n_base 2^d d!, T, d)``."""
    p = task.sample(n_base, n_points, seed=seed)
    xi, y = p.task["xi"].double(), p.y.double()
    Ps = signed_permutations(task.d)
    xi_aug = torch.einsum("kde,bte->kbtd", Ps, xi).reshape(-1, n_points, task.d)
    x_aug = xi_aug @ task.sqrt_sigma.double()
    return x_aug, y.repeat(len(Ps), 1)


def model_on_family(task, n_layers: int, activation: str, gammas, rs, a=None) -> KernelTransformer:
    """A one-head model with ``B_l = sqrt|g_l| Sigma^{-1/2}``, ``C_l = sign(g_l) sqrt|g_l| Sigma^{-1/2}``
    (so ``B_l^T C_l = g_l Sigma^{-1}``), ``r_l``, and ``A_l = a_l I`` (or A fixed at 0)."""
    d = task.d
    m = KernelTransformer(d, n_layers, [activation], fix_A=a is None, init_std=0.0).double()
    S = task.inv_sqrt_sigma.double()
    with torch.no_grad():
        for l in range(n_layers):
            g = float(gammas[l])
            m.B[l, 0] = abs(g) ** 0.5 * S
            m.C[l, 0] = (1.0 if g >= 0 else -1.0) * abs(g) ** 0.5 * S
            m.r[l, 0] = float(rs[l])
            if a is not None:
                m.A[l, 0] = float(a[l]) * torch.eye(d, dtype=torch.float64)
    return m


def loss(model, x, y, n_context: int) -> torch.Tensor:
    """Mean squared error at the queries."""
    return ((model(x, y, n_context) - y[:, n_context:]) ** 2).mean()


def fit_scalars(task, x, y, n_context: int, n_layers: int, activation: str, with_A: bool = False,
                iters: int = 200, seed: int = 0):
    """Minimise the loss over the scalars ``(g_l, r_l[, a_l])`` of :func:`model_on_family` with
    LBFGS; returns ``(model, history of the loss)``."""
    gen = torch.Generator().manual_seed(seed)
    g = (0.5 + 0.5 * torch.rand(n_layers, generator=gen, dtype=torch.float64)).requires_grad_()
    r = (-0.5 * torch.rand(n_layers, generator=gen, dtype=torch.float64)).requires_grad_()
    a = (0.1 * torch.randn(n_layers, generator=gen, dtype=torch.float64)).requires_grad_() if with_A else None
    S = task.inv_sqrt_sigma.double()
    params = [g, r] + ([a] if with_A else [])
    opt = torch.optim.LBFGS(params, lr=1, max_iter=iters, tolerance_grad=1e-14,
                            tolerance_change=1e-16, history_size=50, line_search_fn="strong_wolfe")
    d = task.d
    history = []

    base = KernelTransformer(d, n_layers, [activation], fix_A=not with_A, init_std=0.0).double()

    def predict():
        params = {"B": torch.stack([g[l].abs().sqrt() * S for l in range(n_layers)])[:, None],
                  "C": torch.stack([torch.sign(g[l]) * g[l].abs().sqrt() * S for l in range(n_layers)])[:, None],
                  "r": r[:, None]}
        if with_A:
            params["A"] = a[:, None, None, None] * torch.eye(d, dtype=torch.float64)
        return torch.func.functional_call(base, params, (x, y, n_context))

    def closure():
        opt.zero_grad()
        value = ((predict() - y[:, n_context:]) ** 2).mean()
        value.backward()
        history.append(float(value.detach()))
        return value
    opt.step(closure)
    model = model_on_family(task, n_layers, activation, g.detach(), r.detach(),
                            None if a is None else a.detach())
    return model, history


def full_gradient(model, x, y, n_context: int) -> dict[str, torch.Tensor]:
    """Gradient of the loss over every trainable tensor (r, A if free, B, C)."""
    model.zero_grad(set_to_none=True)
    for p in model.parameters():
        p.requires_grad_(True)
    loss(model, x, y, n_context).backward()
    return {name: p.grad.detach().clone() for name, p in model.named_parameters()}


def off_family_residual(grad: torch.Tensor, direction: torch.Tensor) -> float:
    """Relative size of the part of each layer's ``(L, H, d, d)`` gradient orthogonal to
    ``direction`` (d, d): 0 when the gradient is a multiple of it."""
    D = direction / direction.norm()
    coef = (grad * D).sum((-1, -2), keepdim=True)
    return float((grad - coef * D).norm() / grad.norm().clamp(min=1e-300))
