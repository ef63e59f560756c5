"""OSTTA (newer_methods.md; gaozhengqing/UniEnt cifar/ostta.py): only samples whose adapted
probability of the source prediction has not dropped below the source confidence are
adapted on; the diversity term; the energy score; reset; a run on the digits benchmark."""

from __future__ import annotations

import pytest
import torch

from stamplib import data, methods
from stamplib.blocks.entropy import energy_score, logit_entropy, marginal_entropy
from stamplib.evaluation import runner
from stamplib.methods.ostta import OSTTA
from tests.support import batch, tiny_net

C = 4


def test_filter_keeps_samples_whose_confidence_in_the_source_class_did_not_drop():
    # adapted probabilities of the source classes ŷ₀ = 0, 1, 2, 3: up, down, unchanged (kept:
    # ≥), down (the adapted model now predicts class 0).
    adapted_logits = torch.tensor([[0.8, 0.1, 0.05, 0.05], [0.5, 0.3, 0.1, 0.1], [0.3, 0.2, 0.4, 0.1],
                                   [0.7, 0.1, 0.1, 0.1]]).log()
    source_probs = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1], [0.0, 0.0, 0.0, 0.0],
                                 [0.1, 0.1, 0.1, 0.7]])
    source_probs[2] = torch.softmax(adapted_logits, dim=1)[2]  # the very same bits as the filter's
    assert int(source_probs[2].argmax()) == 2
    assert OSTTA.keep(adapted_logits, source_probs).tolist() == [True, False, True, False]


def test_loss_is_entropy_of_the_kept_samples_minus_the_diversity_term():
    m = methods.create("ostta", tiny_net(C), C, alpha_marginal=0.2)
    logits = torch.randn(8, C, generator=torch.Generator().manual_seed(0))
    kept = torch.tensor([True, False, True, True, False, False, True, False])
    h = logit_entropy(logits)
    assert torch.allclose(m.loss(logits, kept), h[kept].mean() - 0.2 * marginal_entropy(logits))
    nothing = torch.zeros(8, dtype=torch.bool)
    assert torch.allclose(m.loss(logits, nothing), -0.2 * marginal_entropy(logits))


def scale_adapted_head(m: methods.TTAMethod, factor: float) -> None:
    """Multiply the adapted model's logits by ``factor`` (the frozen source copy is untouched):
    < 1 lowers every sample's confidence in its top class below the source's, > 1 raises it."""
    with torch.no_grad():
        m.model.fc.weight.mul_(factor)
        m.model.fc.bias.mul_(factor)


def test_no_update_when_every_sample_lost_confidence_and_full_update_when_none_did():
    x = batch(0)
    lost = methods.create("ostta", tiny_net(C), C, lr=0.05, alpha_marginal=0.0)
    scale_adapted_head(lost, 0.5)
    before = [p.detach().clone() for p in lost.adapted_parameters()]
    lost.step(x)
    assert lost.num_kept == 0 and lost.num_seen == 16
    assert all(torch.equal(p, q) for p, q in zip(lost.adapted_parameters(), before))

    gained = methods.create("ostta", tiny_net(C), C, lr=0.05, alpha_marginal=0.0)
    scale_adapted_head(gained, 2.0)
    before = [p.detach().clone() for p in gained.adapted_parameters()]
    gained.step(x)
    assert gained.num_kept == 16
    assert any(not torch.equal(p, q) for p, q in zip(gained.adapted_parameters(), before))


def test_first_batch_keeps_everything_and_the_source_copy_stays_frozen():
    m = methods.create("ostta", tiny_net(C), C, lr=0.05)
    frozen = {k: v.clone() for k, v in m.frozen.state_dict().items()}
    m.step(batch(0))
    assert m.num_kept == 16  # adapted model = source copy before the first step
    for seed in (1, 2):
        m.step(batch(seed))
    assert all(torch.equal(v, m.frozen.state_dict()[k]) for k, v in frozen.items())
    assert not torch.equal(m.model.conv1[1].weight, m.frozen.conv1[1].weight)


def test_score_is_energy_of_the_pre_update_logits_and_reset_is_exact():
    m = methods.create("ostta", tiny_net(C), C, lr=0.05)
    xs = [batch(seed) for seed in range(3)]
    first = []
    for x in xs:
        with torch.no_grad():
            logits = m.model(x)
        out = m.step(x)
        assert torch.equal(out.ood_score, energy_score(logits))
        first.append(out)
    m.reset()
    assert m.num_kept == 0
    for x, out in zip(xs, first):
        again = m.step(x)
        assert torch.equal(again.probs, out.probs) and torch.equal(again.ood_score, out.ood_score)


def test_imagenet_setting_uses_sgd_with_momentum():
    m = methods.create("ostta", tiny_net(C), C, hyperparameter_set="imagenet_c")
    assert isinstance(m.optimizer, torch.optim.SGD) and m.optimizer.defaults["momentum"] == 0.9
    assert isinstance(methods.create("ostta", tiny_net(C), C).optimizer, torch.optim.Adam)


@pytest.mark.parametrize("dataset", ["digits"])
def test_runs_on_the_digits_benchmark(dataset, digits_model):
    stream = data.build_stream(data.CorruptionStreamSpec(
        dataset, "noise", "gaussian_noise", max_id=48, seed=3, stream=data.StreamSpec(batch_size=20)))
    m = methods.create("ostta", digits_model, 8, hyperparameter_set=data.hyperparameter_set_of(dataset))
    result = runner.run_stream(m, stream)
    assert result.probs.shape == (60, 8) and torch.isfinite(result.ood_score).all()
    assert runner.collapse_reason(result) is None and 0 < m.num_kept <= 60
