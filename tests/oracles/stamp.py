"""A plain transcription of STAMP's step (stamp.md §8): the oracle of
``stamplib.methods.stamp``, compared step by step in tests/methods/test_stamp.py."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn


class OracleStamp:
    """Deliberately plain: standard BatchNorm2d in batch-statistics mode (the authors'
    configuration), one forward per view, Python lists for the memory, SAM written out."""

    def __init__(self, net: nn.Module, num_classes: int, lr: float, alpha: float, period: int, seed: int) -> None:
        self.model = copy.deepcopy(net)
        self.params = []
        for name, m in self.model.named_modules():
            if isinstance(m, nn.BatchNorm2d):
                m.track_running_stats, m.running_mean, m.running_var = False, None, None
                if "conv5_x" not in name:
                    self.params += [m.weight, m.bias]
        self.model.train()
        self.norm_model = copy.deepcopy(self.model)
        self.lr0, self.period, self.steps = lr, period, 0
        self.threshold = alpha * math.log(num_classes)
        self.memory = [[] for _ in range(num_classes)]
        self.xi = [0.0] * num_classes
        self.gen = torch.Generator().manual_seed(seed)

    def loss(self, data):
        logits = self.model(data)
        h = -(torch.softmax(logits, 1) * torch.log_softmax(logits, 1)).sum(1)
        w = 1 / torch.exp(h)
        return (h * 64 * (w / w.sum())).mean()

    def step(self, views):
        with torch.no_grad():
            z0 = self.model(views[0])
            keep = z0.argmax(1) == self.norm_model(views[0]).argmax(1)
            probs = sum(torch.softmax(self.model(v), 1) for v in views) / len(views)
            h = -(probs * torch.log(probs + 1e-5)).sum(1)
            keep = keep & (h < self.threshold)
            for i in range(views.shape[1]):
                if not keep[i]:
                    continue
                if sum(len(c) for c in self.memory) >= 64:
                    present = [c for c in range(len(self.memory)) if self.memory[c]]
                    top = max(0.0, max(self.xi[c] for c in present))
                    cands = [c for c in present if self.xi[c] == top]
                    self.memory[cands[int(torch.randint(len(cands), (1,), generator=self.gen))]].pop(0)
                self.memory[int(z0[i].argmax())].append(views[0][i].clone())
        if sum(len(c) for c in self.memory):
            data = torch.stack([s for c in self.memory for s in c])
            self.xi = [0.9 * self.xi[c] + 0.1 * len(self.memory[c]) for c in range(len(self.memory))]
            lr = self.lr0 * 0.5 * (1 + math.cos(math.pi * self.steps / self.period))
            grads = torch.autograd.grad(self.loss(data), self.params)
            norm = torch.norm(torch.stack([g.norm() for g in grads]))
            eps = [0.05 * g / (norm + 1e-12) for g in grads]
            with torch.no_grad():
                for p, e in zip(self.params, eps):
                    p.add_(e)
            grads = torch.autograd.grad(self.loss(data), self.params)
            with torch.no_grad():
                for p, e, g in zip(self.params, eps, grads):
                    p.sub_(e)
                    p.sub_(lr * g)
            self.steps += 1
        return probs, h
