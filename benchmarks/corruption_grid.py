"""Figure: four CIFAR-10 test images, clean and under the 15 corruptions at severity 5.

Rows are ``test/{airplane,cat,horse,ship}/0000.jpg`` from /work/shared/data/cifar10-jpeg.tar.gz
(JPEG re-encodings of CIFAR-10, see that folder's README); columns are the clean image and
the 15 Hendrycks corruptions of protocol.md §7 (32×32 table, §7.2) at severity 5, seed 0.
The four files are read straight from the archive into memory; nothing is extracted to disk.

Usage: .venv/bin/python benchmarks/corruption_grid.py [--out figures/corruption_grid.png]
"""

from __future__ import annotations

import argparse
import io
import tarfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from stamplib.data.corruptions import CORRUPTIONS, corrupt  # noqa: E402

ARCHIVE = Path("/work/shared/data/cifar10-jpeg.tar.gz")
MEMBERS = (
    "test/airplane/0000.jpg",
    "test/cat/0000.jpg",
    "test/horse/0000.jpg",
    "test/ship/0000.jpg",
)
SEVERITY = 5
ROOT = Path(__file__).resolve().parents[1]


def load_images(archive: Path = ARCHIVE, members: tuple[str, ...] = MEMBERS) -> np.ndarray:
    """Decode the requested members of the ImageFolder tarball into a uint8 (N, 32, 32, 3)."""
    wanted = set(members)
    found: dict[str, np.ndarray] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.name in wanted:
                data = tar.extractfile(member).read()
                found[member.name] = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
                if len(found) == len(wanted):
                    break
    missing = wanted - set(found)
    if missing:
        raise FileNotFoundError(f"{sorted(missing)} not in {archive}")
    return np.stack([found[m] for m in members])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "figures" / "corruption_grid.png")
    args = ap.parse_args()
    clean = load_images()
    columns = [("clean", clean)] + [
        (name, corrupt(clean, name, SEVERITY, seed=0)) for name in CORRUPTIONS
    ]
    rows, cols = clean.shape[0], len(columns)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 0.9, rows * 0.9 + 0.9), squeeze=False)
    for j, (title, imgs) in enumerate(columns):
        for i in range(rows):
            ax = axes[i, j]
            ax.imshow(imgs[i], interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(title.replace("_", "\n"), fontsize=7)
    fig.suptitle(
        f"CIFAR-10 test images, Hendrycks corruptions at severity {SEVERITY} (32×32 table)",
        fontsize=9,
    )
    fig.tight_layout(pad=0.3, w_pad=0.1, h_pad=0.1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=150, metadata={"Software": None})
    plt.close(fig)
    print(args.out)


if __name__ == "__main__":
    main()
