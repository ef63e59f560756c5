"""Tent+COME (newer_methods.md; BlueWhaleLab/COME tent_come.py): the opinion entropy against
the authors' formula, its norm-preserving gradient, the uncertainty mass, the −max-belief
score, reset, and a run on the digits benchmark."""

from __future__ import annotations

import torch

from stamplib import data, methods
from stamplib.blocks.entropy import logit_entropy, opinion_belief, opinion_entropy
from stamplib.evaluation import runner
from tests.support import batch, tiny_net

C = 4


def authors_opinion_entropy(x: torch.Tensor, k: float) -> torch.Tensor:
    """``dirichlet_entropy`` of tent_come.py, written out (with its e^x) for comparison."""
    x = x / x.norm(dim=1, keepdim=True) * x.norm(dim=1, keepdim=True).detach()
    total = x.exp().sum(dim=1, keepdim=True) + k
    p = torch.cat([x.exp() / total, k / total], dim=1) + 1e-7
    return -(p * p.log()).sum(dim=1)


def logits64(seed: int = 0, n: int = 8, c: int = 10, scale: float = 2.0) -> torch.Tensor:
    return scale * torch.randn(n, c, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_opinion_entropy_is_the_authors_entropy_over_beliefs_and_uncertainty():
    for k in (10.0, 1000.0):
        x = logits64()
        assert torch.allclose(opinion_entropy(x, k), authors_opinion_entropy(x, k), rtol=1e-12, atol=1e-12)
        a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        opinion_entropy(a, k).sum().backward()
        authors_opinion_entropy(b, k).sum().backward()
        assert torch.allclose(a.grad, b.grad, rtol=1e-10, atol=1e-12)


def test_beliefs_and_uncertainty_form_an_opinion():
    x = logits64()
    belief = opinion_belief(x, 10.0)
    u = 1 - belief.sum(dim=1)
    assert torch.allclose(u, 10.0 / (x.exp().sum(dim=1) + 10.0))
    assert (belief < torch.softmax(x, dim=1)).all()  # the uncertainty mass comes out of every class
    big = torch.tensor([[500.0, 0.0, 0.0]])  # e^500 overflows float32 in the authors' formula
    assert torch.isfinite(opinion_entropy(big, 3.0)).all() and torch.isfinite(opinion_belief(big, 3.0)).all()


def test_gradient_turns_the_logits_but_cannot_lengthen_them():
    x = logits64().requires_grad_(True)
    opinion_entropy(x, 10.0).sum().backward()
    radial = (x.grad * x.detach()).sum(dim=1)
    assert (radial.abs() <= 1e-10 * x.grad.norm(dim=1) * x.detach().norm(dim=1)).all()
    y = logits64().requires_grad_(True)
    logit_entropy(y).sum().backward()
    assert ((y.grad * y.detach()).sum(dim=1) < 0).all()  # plain entropy pushes the norm up


def test_logit_norm_stays_bounded_under_come_but_grows_under_entropy_minimisation():
    start = logits64()
    norms = {}
    for name, loss in (("entropy", logit_entropy), ("come", lambda z: opinion_entropy(z, 10.0))):
        x = start.clone().requires_grad_(True)
        sgd = torch.optim.SGD([x], lr=1.0)
        for _ in range(500):
            sgd.zero_grad()
            loss(x).sum().backward()
            sgd.step()
        norms[name] = x.detach().norm(dim=1) / start.norm(dim=1)
    assert (norms["entropy"] > 1.2).all()
    assert (norms["come"] < 1.05).all()


def test_uncertainty_mass_defaults_to_the_number_of_classes():
    assert methods.create("tent_come", tiny_net(C), C).uncertainty_mass == C
    assert methods.create("tent_come", tiny_net(C), C, uncertainty_mass=1000.0).uncertainty_mass == 1000.0


def test_step_minimises_the_opinion_entropy_and_scores_by_max_belief():
    m = methods.create("tent_come", tiny_net(C), C, lr=0.05)
    x = batch(0)
    with torch.no_grad():
        logits = m.model(x)
    out = m.step(x)
    assert torch.equal(out.probs, torch.softmax(logits, dim=1))
    assert torch.equal(out.ood_score, -opinion_belief(logits, C).max(dim=1).values)
    with torch.no_grad():
        after = m.model(x)
    assert opinion_entropy(after, C).mean() < opinion_entropy(logits, C).mean()


def test_imagenet_setting_is_the_authors_sgd():
    m = methods.create("tent_come", tiny_net(C), C, hyperparameter_set="imagenet_c")
    assert isinstance(m.optimizer, torch.optim.SGD)
    assert m.optimizer.defaults["lr"] == 2.5e-4 and m.optimizer.defaults["momentum"] == 0.9


def test_reset_is_exact():
    m = methods.create("tent_come", tiny_net(C), C, lr=0.05)
    xs = [batch(seed) for seed in range(3)]
    first = [m.step(x) for x in xs]
    m.reset()
    for x, out in zip(xs, first):
        again = m.step(x)
        assert torch.equal(again.probs, out.probs) and torch.equal(again.ood_score, out.ood_score)


def test_runs_on_the_digits_benchmark(digits_model):
    stream = data.build_stream(data.CorruptionStreamSpec(
        "digits", "noise", "gaussian_noise", max_id=48, seed=3, stream=data.StreamSpec(batch_size=20)))
    m = methods.create("tent_come", digits_model, 8, hyperparameter_set=data.hyperparameter_set_of("digits"))
    result = runner.run_stream(m, stream)
    assert result.probs.shape == (60, 8) and torch.isfinite(result.ood_score).all()
    assert runner.collapse_reason(result) is None
