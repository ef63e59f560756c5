"""UniEnt and UniEnt+ (newer_methods.md; gaozhengqing/UniEnt cifar/tent.py): the
two-Gaussian split of the csOOD score, the frozen outlier model, the loss's sign on each group,
the soft weighting of UniEnt+, the energy score, reset, and a run on the digits benchmark."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from stamplib import data, methods
from stamplib.blocks.entropy import energy_score, logit_entropy, marginal_entropy
from stamplib.blocks.gmm import fit_two_gaussians, upper_component_posterior
from stamplib.evaluation import runner
from tests.support import assert_same, batch, tiny_net

C = 4


# -- the two-component mixture (blocks.gmm) ---------------------------------------------------------
def two_clusters(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    low = 0.2 + 0.05 * torch.randn(40, generator=g)
    high = 0.8 + 0.05 * torch.randn(12, generator=g)
    is_high = torch.cat([torch.zeros(40, dtype=torch.bool), torch.ones(12, dtype=torch.bool)])
    return torch.cat([low, high]), is_high


def test_mixture_separates_two_clusters_and_orders_components_by_mean():
    scores, is_high = two_clusters()
    fit = fit_two_gaussians(scores)
    assert fit.converged and fit.means[0] < fit.means[1]
    assert abs(float(fit.means[0]) - float(scores[~is_high].mean())) < 1e-3
    assert abs(float(fit.weights[1]) - 12 / 52) < 1e-3
    posterior = upper_component_posterior(scores)
    assert torch.equal(posterior > 0.5, is_high)


def test_mixture_agrees_with_scikit_learn_on_separated_scores():
    from sklearn.mixture import GaussianMixture

    scores, _ = two_clusters(seed=3)
    ref = GaussianMixture(n_components=2, random_state=0).fit(scores.double().numpy().reshape(-1, 1))
    upper = int(ref.means_[:, 0].argmax())
    ref_post = torch.from_numpy(ref.predict_proba(scores.double().numpy().reshape(-1, 1))[:, upper])
    ours = fit_two_gaussians(scores)
    assert torch.allclose(ours.means, torch.from_numpy(ref.means_[:, 0]).sort().values, atol=1e-3)
    assert torch.equal(ours.posterior(scores)[:, 1] > 0.5, ref_post > 0.5)


def test_mixture_leaves_a_batch_without_spread_unsplit():
    assert torch.equal(upper_component_posterior(torch.full((5,), 0.3)), torch.zeros(5))
    assert torch.equal(upper_component_posterior(torch.tensor([0.7])), torch.zeros(1))


# -- the split on controlled features ---------------------------------------------------------------
def controlled(name: str, **overrides) -> methods.TTAMethod:
    """A method whose frozen encoder is replaced by the identity on 4-D "features" and whose
    prototypes are the 4 unit vectors, so the csOOD score is known exactly."""
    m = methods.create(name, tiny_net(C), C, **overrides)
    m.encode = lambda feats: feats
    m.prototypes = torch.eye(C)
    return m


def id_and_ood_features(n_id: int = 12, n_ood: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    # ID: a prototype plus a little noise (cos ≈ 1); OOD: equal parts of every class (cos = ½).
    id_feats = torch.eye(C)[torch.arange(n_id) % C] + 0.05 * torch.rand(n_id, C, generator=g)
    ood_feats = torch.ones(n_ood, C) + 0.05 * torch.rand(n_ood, C, generator=g)
    is_ood = torch.cat([torch.zeros(n_id, dtype=torch.bool), torch.ones(n_ood, dtype=torch.bool)])
    return torch.cat([id_feats, ood_feats]), is_ood


def test_csood_score_is_one_minus_max_cosine_min_max_normalised():
    m = controlled("unient")
    feats, is_ood = id_and_ood_features()
    max_cos = F.normalize(feats, dim=1).max(dim=1).values
    expected = 1 - (max_cos - max_cos.min()) / (max_cos.max() - max_cos.min())
    score = m.csood_score(feats)
    assert torch.allclose(score, expected) and score.min() == 0 and score.max() == 1
    assert score[is_ood].min() > score[~is_ood].max()


@pytest.mark.parametrize("name", ["unient", "unient_plus"])
def test_split_puts_clearly_id_and_clearly_ood_samples_in_their_groups(name):
    m = controlled(name)
    feats, is_ood = id_and_ood_features()
    weights = m.ood_weights(feats)
    assert torch.equal(weights > 0.5, is_ood)
    if name == "unient":
        assert set(weights.tolist()) == {0.0, 1.0}


def test_unient_plus_weights_are_the_posterior_and_unient_thresholds_it():
    hard, soft = controlled("unient"), controlled("unient_plus")
    g = torch.Generator().manual_seed(5)
    feats = torch.rand(24, C, generator=g)  # no clear split: posteriors strictly between 0 and 1
    posterior = upper_component_posterior(hard.csood_score(feats))
    assert ((posterior > 0.01) & (posterior < 0.99)).any()
    assert torch.equal(soft.ood_weights(feats), posterior)
    assert torch.equal(hard.ood_weights(feats), (posterior > 0.5).float())


# -- the loss -----------------------------------------------------------------------------------------
def test_loss_minimises_entropy_on_pseudo_id_and_raises_it_on_pseudo_ood():
    m = controlled("unient", alpha_marginal=0.0, alpha_ood=1.0)
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(16, C, generator=g)
    is_ood = torch.arange(16) >= 12
    x = logits.clone().requires_grad_(True)
    loss = m.loss(x, is_ood.float())
    h = logit_entropy(logits)
    assert torch.allclose(loss, h[~is_ood].mean() - h[is_ood].mean())
    loss.backward()
    stepped = logits - 0.05 * x.grad  # one small gradient step on the logits
    change = logit_entropy(stepped) - h
    assert (change[~is_ood] < 0).all() and (change[is_ood] > 0).all()


def test_loss_subtracts_the_weighted_marginal_entropy_and_survives_an_empty_group():
    m = controlled("unient", alpha_marginal=0.2, alpha_ood=0.5)
    logits = torch.randn(8, C, generator=torch.Generator().manual_seed(2))
    h = logit_entropy(logits)
    none_ood = m.loss(logits, torch.zeros(8))
    assert torch.allclose(none_ood, h.mean() - 0.2 * marginal_entropy(logits))
    all_ood = m.loss(logits, torch.ones(8))
    assert torch.allclose(all_ood, -0.5 * h.mean() - 0.2 * marginal_entropy(logits))


def test_unient_plus_with_hard_posteriors_weights_each_group_by_its_share():
    """The authors' soft loss averages the weighted entropies over the whole batch, so with 0/1
    weights each group's mean entropy is scaled by its share of the batch."""
    hard = controlled("unient", alpha_marginal=0.3, alpha_ood=0.5)
    soft = controlled("unient_plus", alpha_marginal=0.3, alpha_ood=0.5)
    logits = torch.randn(16, C, generator=torch.Generator().manual_seed(3))
    w = (torch.arange(16) >= 12).float()
    h = logit_entropy(logits)
    expected = 12 / 16 * h[:12].mean() - 0.5 * 4 / 16 * h[12:].mean() - 0.3 * marginal_entropy(logits)
    assert torch.allclose(soft.loss(logits, w), expected)
    assert not torch.allclose(hard.loss(logits, w), expected)


def test_marginal_entropy_of_a_uniform_batch_mean_is_log_c():
    logits = torch.tensor([[9.0, 0, 0, 0], [0, 9.0, 0, 0], [0, 0, 9.0, 0], [0, 0, 0, 9.0]])
    assert torch.allclose(marginal_entropy(logits), torch.log(torch.tensor(4.0)))
    assert float(marginal_entropy(torch.tensor([[200.0, -200, 0, 0]] * 3))) == pytest.approx(0.0, abs=1e-6)


# -- the method ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["unient", "unient_plus"])
def test_outlier_model_is_the_frozen_configured_source_and_only_bn_affine_adapts(name):
    m = methods.create(name, tiny_net(C), C, lr=0.05)
    frozen_before = {k: v.clone() for k, v in m.frozen.state_dict().items()}
    fc_before = m.model.fc.weight.detach().clone()
    assert torch.allclose(m.prototypes, F.normalize(fc_before, dim=1))
    assert all(not p.requires_grad for p in m.frozen.parameters())
    for seed in range(3):
        m.step(batch(seed))
    assert_same(m.frozen.state_dict(), frozen_before)
    assert torch.equal(m.model.fc.weight, fc_before)
    assert not torch.equal(m.model.conv1[1].weight, m.frozen.conv1[1].weight)


@pytest.mark.parametrize("name", ["unient", "unient_plus"])
def test_score_is_energy_of_the_pre_update_logits_and_reset_is_exact(name):
    m = methods.create(name, tiny_net(C), C, lr=0.05)
    xs = [batch(seed) for seed in range(3)]
    first = []
    for x in xs:
        with torch.no_grad():
            logits = m.model(x)
        out = m.step(x)
        assert torch.equal(out.ood_score, energy_score(logits))
        assert torch.equal(out.probs, torch.softmax(logits, dim=1))
        first.append(out)
    m.reset()
    for x, out in zip(xs, first):
        again = m.step(x)
        assert torch.equal(again.probs, out.probs) and torch.equal(again.ood_score, out.ood_score)


@pytest.mark.parametrize("name", ["unient", "unient_plus"])
def test_runs_on_the_digits_benchmark(name, digits_model):
    stream = data.build_stream(data.CorruptionStreamSpec("digits", "noise", "gaussian_noise", max_id=48, seed=3,
                               stream=data.StreamSpec(batch_size=20)))
    m = methods.create(name, digits_model, 8, hyperparameter_set=data.hyperparameter_set_of("digits"))
    result = runner.run_stream(m, stream)
    assert result.probs.shape == (60, 8) and torch.isfinite(result.ood_score).all()
    assert runner.collapse_reason(result) is None
