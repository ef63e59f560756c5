"""Checksummed, resumable downloads and archive extraction for the datasets of protocol.md §1.

Every file lands in the data root it is given (``--data-root`` at the edge). A download writes to
``<file>.part``, resumes it with an HTTP ``Range`` request after an interruption, verifies the
published checksum and only then renames the file into place; an archive is extracted into a
temporary sibling folder and its top-level entries are renamed into the data root. So a
killed process never leaves a file or folder under its final name that is incomplete.

Offline machines: every error names the file, where it must go and its checksum, so that it
can be fetched elsewhere and copied in (``python -m stamplib.data.downloads --list``).

Checksums are the published ones (Zenodo MD5 for the Hendrycks -C releases, torchvision's MD5
for CIFAR/SVHN/DTD/Places365). Where none is published (Tiny-ImageNet-C, LSUN_resize) the
resource says so and the file is used with a warning.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import shutil
import tarfile
import time
import urllib.error
import urllib.request
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from stamplib import flags, paths

_CHUNK = 1 << 20


class DownloadError(RuntimeError):
    """A file could not be fetched; the message says where to put it by hand."""


class ChecksumError(DownloadError):
    """A file's checksum differs from the published one."""


@dataclass(frozen=True)
class Resource:
    """A published file and what it provides once extracted into the data root.

    ``provides`` is the path (relative to the data root) that exists after extraction; loaders
    test it. ``torchvision`` names a torchvision dataset class that downloads it instead of us.
    """

    name: str
    filename: str
    url: str | None
    md5: str | None = None
    sha256: str | None = None
    provides: str = ""
    extract: bool = True
    torchvision: str | None = None
    extract_to: str | None = None  # folder (relative to the data root); default: the archive's
    note: str = ""

    @property
    def checksum_text(self) -> str:
        if self.sha256:
            return f"sha256 {self.sha256}"
        if self.md5:
            return f"md5 {self.md5}"
        return "checksum unknown (none published)"


_ZENODO_IMAGENET_C = "https://zenodo.org/records/2235448/files/{}.tar"

RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource(
            "cifar10", "cifar-10-python.tar.gz",
            "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
            md5="c58f30108f718f92721af3b95e74349a", provides="cifar-10-batches-py",
            torchvision="CIFAR10",
        ),
        Resource(
            "cifar100", "cifar-100-python.tar.gz",
            "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
            md5="eb9058c3a382ffc7106e4002c42a8d85", provides="cifar-100-python",
            torchvision="CIFAR100",
        ),
        Resource(
            "cifar10_c", "CIFAR-10-C.tar", "https://zenodo.org/records/2535967/files/CIFAR-10-C.tar",
            md5="56bf5dcef84df0e2308c6dcbcbbd8499", provides="CIFAR-10-C",
        ),
        Resource(
            "cifar100_c", "CIFAR-100-C.tar", "https://zenodo.org/records/3555552/files/CIFAR-100-C.tar",
            md5="11f0ed0f1191edbf9fa23466ae6021d3", provides="CIFAR-100-C",
        ),
        Resource(
            "svhn", "svhn/test_32x32.mat", "http://ufldl.stanford.edu/housenumbers/test_32x32.mat",
            md5="eb5a983be6a315427106f1b164d9cef3", provides="svhn/test_32x32.mat", extract=False,
            torchvision="SVHN",
        ),
        Resource(
            "tiny_imagenet_c", "Tiny-ImageNet-C.tar",
            "https://zenodo.org/records/2536630/files/Tiny-ImageNet-C.tar", provides="Tiny-ImageNet-C",
        ),
        Resource(
            "lsun_resize", "LSUN_resize.tar.gz",
            "https://www.dropbox.com/s/moqh2wh8696c3yl/LSUN_resize.tar.gz?dl=1", provides="LSUN_resize",
            note="the ODIN out-of-distribution benchmark set (10,000 images, 32×32)",
        ),
        Resource(
            "textures", "dtd-r1.0.1.tar.gz",
            "https://www.robots.ox.ac.uk/~vgg/data/dtd/download/dtd-r1.0.1.tar.gz",
            md5="fff73e5086ae6bdbea199a49dfb8a4c1", provides="dtd/images",
        ),
        Resource(
            "places365", "places365/val_256.tar",
            "http://data.csail.mit.edu/places/places365/val_256.tar",
            md5="e27b17d8d44f4af9a78502beb927f808", provides="places365/val_256",
            note="the subset the paper used is unspecified (protocol.md §6.4); the 36,500 val images",
        ),
        Resource(
            "cifar10_jpeg", "cifar10-jpeg.tar.gz", None,
            sha256="d877bdec11f54282b92da36e9f045bd305d663b1223e3822baff39ca9ff6690a",
            provides="cifar10-jpeg/test", extract_to="cifar10-jpeg",
            note="CIFAR-10 re-encoded as JPEG (no public URL; a copy is in the project's shared/data)",
        ),
        *(
            Resource(
                f"imagenet_c_{group}", f"ImageNet-C/{group}.tar", _ZENODO_IMAGENET_C.format(group),
                md5=md5, provides=f"ImageNet-C/{first}",
            )
            for group, md5, first in (
                ("noise", "e80562d7f6c3f8834afb1ecf27252745", "gaussian_noise"),
                ("blur", "2d8e81fdd8e07fef67b9334fa635e45c", "defocus_blur"),
                ("weather", "33ffea4db4d93fe4a428c40a6ce0c25d", "snow"),
                ("digital", "89157860d7b10d5797849337ca2e5c03", "contrast"),
            )
        ),
    )
}

#: Which ImageNet-C archive holds a corruption (Hendrycks' grouping).
IMAGENET_C_GROUP = {
    **dict.fromkeys(("gaussian_noise", "shot_noise", "impulse_noise"), "noise"),
    **dict.fromkeys(("defocus_blur", "glass_blur", "motion_blur", "zoom_blur"), "blur"),
    **dict.fromkeys(("snow", "frost", "fog", "brightness"), "weather"),
    **dict.fromkeys(("contrast", "elastic_transform", "pixelate", "jpeg_compression"), "digital"),
}


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: str | os.PathLike, *, md5: str | None = None, sha256: str | None = None) -> bool:
    """Check ``path`` against the given checksum(s); True if one was checked, False if none
    was known (with a warning). Raises :class:`ChecksumError` on a mismatch."""
    checked = False
    for algorithm, expected in (("sha256", sha256), ("md5", md5)):
        if expected:
            actual = file_digest(path, algorithm)
            if actual != expected.lower():
                raise ChecksumError(
                    f"{path}: {algorithm} {actual} differs from the published {expected}; the "
                    "file is damaged or not the published one — delete it and download again"
                )
            checked = True
    if not checked:
        warnings.warn(f"no published checksum for {path}; using it unverified", stacklevel=2)
    return checked


def offline_hint(url: str | None, dest: Path, md5: str | None = None, sha256: str | None = None) -> str:
    checksum = f"sha256 {sha256}" if sha256 else f"md5 {md5}" if md5 else "no published checksum"
    if url is None:
        return f"copy the file (no public URL) to {dest} ({checksum})"
    return f"get the file from {url} on a machine with internet access and put it at {dest} ({checksum})"


class _Incomplete(Exception):
    pass


def _fetch_into(url: str, part: Path, timeout: float, progress: bool, label: str) -> None:
    """Fetch ``url`` into ``part``, appending from its current size when the server honours a
    Range request (206); a full response (200) restarts the file."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "stamplib"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # nothing left to fetch: .part already holds it all
            return
        raise
    with response:
        resumed = offset > 0 and response.status == 206
        if resumed:
            content_range = response.headers.get("Content-Range", "")
            if not content_range.startswith(f"bytes {offset}-"):
                raise _Incomplete(f"server answered the range request with {content_range!r}")
        else:
            offset = 0
        length = response.headers.get("Content-Length")
        expected = int(length) if length is not None else None
        received = 0
        with open(part, "ab" if resumed else "wb") as fh, tqdm(
            total=None if expected is None else offset + expected, initial=offset, unit="B",
            unit_scale=True, desc=label, disable=not progress, leave=False,
        ) as bar:
            try:
                while block := response.read(_CHUNK):
                    fh.write(block)
                    received += len(block)
                    bar.update(len(block))
            finally:
                fh.flush()
                os.fsync(fh.fileno())
    if expected is not None and received < expected:
        raise _Incomplete(f"connection closed after {offset + received} of {offset + expected} bytes")


def download(
    url: str,
    dest: str | os.PathLike,
    *,
    md5: str | None = None,
    sha256: str | None = None,
    progress: bool = True,
    retries: int = 3,
    timeout: float = 60.0,
    backoff: float = 2.0,
) -> Path:
    """Download ``url`` to ``dest`` (resumable through ``dest.part``), verify it, rename it.

    An existing ``dest`` is verified and kept. After ``retries`` failed attempts the partial
    file stays in place, so the next call resumes; the error says how to fetch it by hand.
    """
    dest = Path(dest)
    if dest.is_file():
        verify(dest, md5=md5, sha256=sha256)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    attempt = 0
    while True:
        try:
            _fetch_into(url, part, timeout, progress, dest.name)
            break
        except (urllib.error.URLError, http.client.HTTPException, OSError, _Incomplete) as exc:
            permanent = isinstance(exc, urllib.error.HTTPError) and 400 <= exc.code < 500
            attempt += 1
            if permanent or attempt > retries:
                raise DownloadError(
                    f"could not download {url}: {exc}. To continue later, run the same call again "
                    f"(it resumes {part}); or {offline_hint(url, dest, md5, sha256)}"
                ) from exc
            time.sleep(backoff * attempt)
    try:
        verify(part, md5=md5, sha256=sha256)
    except ChecksumError:
        part.unlink()  # a wrong file cannot be resumed into a right one
        raise
    os.replace(part, dest)
    return dest


def extract(archive: str | os.PathLike, dest_dir: str | os.PathLike) -> list[Path]:
    """Extract a tar/zip archive into ``dest_dir`` via a temporary sibling folder, then rename
    its top-level entries into place (entries that already exist are kept). Returns them."""
    archive, dest_dir = Path(archive), Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    tmp = dest_dir / f".extract-{os.getpid()}-{archive.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tf:
                tf.extractall(tmp, filter="data")  # refuses absolute paths, "..", devices
        elif zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for member in zf.namelist():
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise DownloadError(f"{archive}: unsafe member path {member!r}")
                zf.extractall(tmp)
        else:
            raise DownloadError(f"{archive} is neither a tar nor a zip archive (truncated download?)")
        placed = []
        for entry in sorted(tmp.iterdir()):
            target = dest_dir / entry.name
            if not target.exists():
                os.replace(entry, target)
            placed.append(target)
        return placed
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise DownloadError(f"{archive} is damaged ({exc}); delete it and download again") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _torchvision_fetch(resource: Resource, root: Path, progress: bool) -> None:
    import torchvision.datasets as tvd

    if resource.torchvision == "SVHN":
        tvd.SVHN(str(root / "svhn"), split="test", download=True)
    else:
        getattr(tvd, resource.torchvision)(str(root), train=False, download=True)


def missing_hint(name: str, data_root: str | os.PathLike) -> str:
    """How to get resource ``name`` into the data root, for error messages."""
    resource = RESOURCES[name]
    root = paths.given_data_root(data_root, name)
    how = offline_hint(resource.url, root / resource.filename, resource.md5, resource.sha256)
    auto = f"`python -m stamplib.data.downloads {name}` downloads it, or " if resource.url else ""
    unpack = ", then it is unpacked automatically" if resource.extract else ""
    return f"{root / resource.provides} is missing: {auto}{how}{unpack}"


#: Written into an archive's own folder (``extract_to``) after a verified extraction: the
#: archive's SHA-256, so a data root that keeps only the unpacked folder (the archive deleted
#: to save space, or only one split copied to another machine) still says what it came from.
UNPACK_MARKER = ".archive-sha256"


def write_unpack_marker(folder: Path, archive: Path) -> None:
    """Record ``archive``'s SHA-256 in ``folder`` (atomically: a half-written marker never exists)."""
    paths.atomic_write_bytes(folder / UNPACK_MARKER, f"{file_digest(archive, 'sha256')}  {archive.name}\n".encode())


def unpacked_sha256(resource: Resource, data_root: Path) -> str | None:
    """The archive SHA-256 recorded when ``resource`` was unpacked into the data root (None
    without a marker)."""
    if not resource.extract_to:
        return None
    marker = data_root / resource.extract_to / UNPACK_MARKER
    if not marker.is_file():
        return None
    return marker.read_text().split()[0]


def fetch(
    name: str,
    data_root: str | os.PathLike,
    *,
    download_missing: bool = True,
    progress: bool = True,
) -> Path:
    """Make resource ``name`` available under the data root and return what it provides.

    An archive already placed at ``<data_root>/<filename>`` is verified and unpacked without
    any network access; otherwise it is downloaded (if ``download_missing``)."""
    if name not in RESOURCES:
        raise ValueError(f"unknown resource {name!r}; known: {', '.join(sorted(RESOURCES))}")
    resource = RESOURCES[name]
    root = paths.given_data_root(data_root, name)
    target = root / resource.provides
    if target.exists():
        return target
    archive = root / resource.filename
    if resource.torchvision and not archive.exists() and download_missing:
        try:
            _torchvision_fetch(resource, root, progress)
        except Exception as exc:  # torchvision raises URLError, RuntimeError, … when offline
            raise DownloadError(f"torchvision could not download {name}: {exc}; {missing_hint(name, root)}") from exc
    else:
        if not archive.exists():
            if not download_missing or resource.url is None:
                raise FileNotFoundError(missing_hint(name, root))
            download(resource.url, archive, md5=resource.md5, sha256=resource.sha256, progress=progress)
        else:
            verify(archive, md5=resource.md5, sha256=resource.sha256)
        if resource.extract:
            folder = root / resource.extract_to if resource.extract_to else archive.parent
            extract(archive, folder)
            if resource.extract_to and resource.sha256:
                write_unpack_marker(folder, archive)
    if not target.exists():
        raise DownloadError(f"{archive} did not provide {target}; is it the right file?")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stamplib.data.downloads", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="resources to fetch")
    flags.add(parser, data_root="where the files go (created if need be; default: $STAMPLIB_DATA_ROOT, else the user "
                                "data folder)")
    parser.add_argument("--list", action="store_true", help="list resources, files and checksums")
    args = parser.parse_args(argv)
    root = Path(args.data_root) if args.data_root else paths.RunContext.build().data_root
    if args.list or not args.names:
        for r in RESOURCES.values():
            state = "present" if (root / r.provides).exists() else "missing"
            print(f"{r.name:22s} {state:8s} {root / r.filename}  {r.checksum_text}  {r.url or '(no URL)'}")
        return 0
    for name in args.names:
        print(fetch(name, root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
