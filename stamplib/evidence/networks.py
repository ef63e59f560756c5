"""Each source network's answer to the Noise outliers: what a reader needs to see that one
network's quirk is not a method's property.

A ReLU network's confidence far from its data is arbitrary (Hein et al., CVPR 2019), so two
networks of one recipe can answer synthetic noise in opposite ways: one calls nearly every Noise
image "truck" at high confidence, another spreads them. :func:`diagnose` measures it on the clean
test photographs of the network's data set and the first Noise images (protocol.md §6.1), the
network in eval mode, max-softmax as the score: its AUROC of photographs against Noise, the
largest share of Noise images given one class, and the share given it at max-softmax above 0.9
(the first photographs with the classes interleaved, so that every class takes part).
A diagnostic is a small JSON record under the benchmark's store (``networks/<checkpoint>.json``),
written by ``claims compute`` beside the cells and read by the page.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Photographs and Noise images a diagnostic reads (the first of each).
IMAGES = 2000
FOLDER = "networks"


@dataclass(frozen=True)
class NetworkDiagnostic:
    """One network's answer to the Noise outliers (module docstring)."""

    dataset: str
    network: int
    checkpoint: str
    sha256: str
    clean_accuracy: float | None  # the trainer's measurement on every JPEG test image, from the sidecar
    photographs: int
    noise_images: int
    auroc_clean_vs_noise: float  # max-softmax, photographs = known (higher = better rejection)
    top_class: str
    top_share: float  # of the Noise images
    confident_share: float  # of the Noise images given the top class at max-softmax > 0.9
    noise_confidence: float  # mean max-softmax on the Noise images
    photo_confidence: float  # mean max-softmax on the photographs


def diagnose(dataset: str, network: int, data_root: str | os.PathLike | None, count: int = IMAGES
             ) -> NetworkDiagnostic:
    """The diagnostic of ``dataset``'s source network ``network`` (module docstring)."""
    import torch

    from stamplib import data, models
    from stamplib.data.noise import noise_images
    from stamplib.evaluation.metrics import auroc
    from stamplib.evaluation.provenance import checkpoint_provenance
    from stamplib.models.training import to_float

    entry = data.dataset(dataset)
    model = models.source_model(dataset, progress=False, network=network).eval()
    photos = _photographs(dataset, data_root)[:count]
    noise = noise_images(count, photos.shape[1])

    @torch.no_grad()
    def probabilities(images: torch.Tensor) -> torch.Tensor:
        return torch.cat([model(to_float(images[i:i + 500])).softmax(dim=1) for i in range(0, len(images), 500)])

    p_photos, p_noise = probabilities(photos), probabilities(noise)
    photo_conf, noise_conf = p_photos.max(dim=1).values, p_noise.max(dim=1)
    shares = torch.bincount(noise_conf.indices, minlength=entry.known).float() / len(noise)
    top = int(shares.argmax())
    confident = float(((noise_conf.indices == top) & (noise_conf.values > 0.9)).float().mean())
    is_outlier = torch.cat([torch.zeros(len(photos)), torch.ones(len(noise))]).bool()
    score = -torch.cat([photo_conf, noise_conf.values])  # higher = more likely an outlier
    card = checkpoint_provenance(dataset, network)
    names = entry.class_names or tuple(str(k) for k in range(entry.known))
    return NetworkDiagnostic(
        dataset, network, str(card["name"]), str(card["sha256"]), card["clean_test_accuracy"], len(photos),
        len(noise), round(float(auroc(score, is_outlier)), 2), names[top],
        round(float(shares[top]), 4), round(confident, 4), round(float(noise_conf.values.mean()), 4),
        round(float(photo_conf.mean()), 4))


def _photographs(dataset: str, data_root: str | os.PathLike | None) -> Any:
    """The clean test photographs of the network's known classes, the classes interleaved."""
    import torch

    from stamplib import data

    entry = data.dataset(dataset)
    root = Path(data_root) if data_root is not None else Path(".")
    images, labels = entry.clean_test(root)
    labels = torch.as_tensor(labels)
    keep = data.interleave_classes(labels)  # class by class in turn, so that the first N cover every class
    keep = keep[labels[keep] < entry.known]
    return torch.as_tensor(images)[keep]


def path(store: Path, checkpoint: str) -> Path:
    return Path(store) / FOLDER / f"{checkpoint}.json"


def write(store: Path, diagnostic: NetworkDiagnostic, command: str) -> Path:
    """The diagnostic as ``<store>/networks/<checkpoint>.json`` (atomically), naming ``command``."""
    from stamplib import paths

    target = path(store, diagnostic.checkpoint)
    target.parent.mkdir(parents=True, exist_ok=True)
    paths.atomic_write_bytes(target, (json.dumps({**asdict(diagnostic), "command": command}, indent=1) + "\n").encode())
    return target


def read_all(store: Path) -> list[NetworkDiagnostic]:
    """Every diagnostic of ``store``, by data set then network."""
    folder = Path(store) / FOLDER
    found = []
    for file in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        fields = json.loads(file.read_text())
        fields.pop("command", None)
        found.append(NetworkDiagnostic(**fields))
    return sorted(found, key=lambda d: (d.dataset, d.network))
