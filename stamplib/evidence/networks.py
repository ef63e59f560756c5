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
written by ``claims compute`` beside the cells and read by the page. In a committed store it is
guarded as the records are (its SHA-256 in the store's manifest, checked on read); a diagnostic
whose numbers would not change is not written again (:func:`put`: the command that wrote it is
provenance, not a reason to rewrite a tracked file).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from dataclasses import fields as fields_of
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
    """The diagnostic as ``<store>/networks/<checkpoint>.json`` (:func:`put`), naming ``command``."""
    put(store, diagnostic, command)
    return path(store, diagnostic.checkpoint)


def put(store: Path, diagnostic: NetworkDiagnostic, command: str) -> bool:
    """Store ``diagnostic`` as ``<store>/networks/<checkpoint>.json``, naming ``command``, whole
    (and, in a committed store, with its manifest entry: :meth:`ResultsStore.put_file`). Returns
    False, writing nothing, where the file already holds these numbers: only its command would
    change."""
    from stamplib.evaluation.store import ResultsStore

    target = path(store, diagnostic.checkpoint)
    name = f"{FOLDER}/{target.name}"
    if target.is_file():
        try:
            if read_one(target) == diagnostic:
                # the same numbers: the file stays; put_file only lists it where the manifest does not
                ResultsStore(store).put_file(name, target.read_bytes())
                return False
        except ValueError:  # a damaged or foreign file there: replaced by the diagnostic just computed
            pass
    payload = (json.dumps({**asdict(diagnostic), "command": command}, indent=1) + "\n").encode()
    return ResultsStore(store).put_file(name, payload)


def read_one(file: Path) -> NetworkDiagnostic:
    """The diagnostic stored in ``file``; a file that is not one (truncated, not JSON, another
    kind of JSON) is one ValueError naming it and what to do."""
    from stamplib.evaluation.store import _shown

    fix = f"restore it (git checkout -- {_shown(file)}) or compute it again (python -m stamplib claims diagnose)"
    try:
        fields = json.loads(file.read_text())
    except (ValueError, OSError) as exc:  # ValueError: not JSON, or not text
        raise ValueError(f"{_shown(file)} is no network diagnostic: it is not whole JSON "
                         f"({type(exc).__name__}: {exc}); {fix}") from None
    names = {f.name for f in fields_of(NetworkDiagnostic)}
    if not isinstance(fields, dict) or set(fields) - {"command"} != names:
        keys = sorted(fields) if isinstance(fields, dict) else type(fields).__name__
        raise ValueError(f"{_shown(file)} is no network diagnostic: it holds {keys}, not the fields "
                         f"{sorted(names)}; remove it, or {fix}")
    fields.pop("command", None)
    return NetworkDiagnostic(**fields)


def read_all(store: Path) -> list[NetworkDiagnostic]:
    """Every diagnostic of ``store``, by data set then network; in a committed store each file is
    checked against the manifest first (one line naming a file that differs or is unlisted)."""
    from stamplib.evaluation.store import ResultsStore

    folder = Path(store) / FOLDER
    files = sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")) if folder.is_dir() else []
    ResultsStore(store).check_guarded([f"{FOLDER}/{file.name}" for file in files])
    return sorted((read_one(file) for file in files), key=lambda d: (d.dataset, d.network))


def recorded_sha256(store: Path, checkpoint: str) -> str | None:
    """The SHA-256 that ``store``'s diagnostic of ``checkpoint``, or else one of its records made by
    it, names for that network (None: nothing in the store names it), for a message about a
    network that is absent."""
    file = path(store, checkpoint)
    if file.is_file():
        try:
            return read_one(file).sha256
        except ValueError:
            pass
    for record in sorted(Path(store).glob("*.json")):
        try:
            made = json.loads(record.read_text()).get("provenance", {}).get("checkpoint") or {}
        except (ValueError, OSError, AttributeError):
            continue
        if made.get("name") == checkpoint and made.get("sha256"):
            return str(made["sha256"])
    return None
