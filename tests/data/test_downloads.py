"""Downloads without network: a local HTTP server on 127.0.0.1 serves files the tests create."""

from __future__ import annotations

import hashlib
import http.server
import io
import random
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from stamplib.data import downloads

PAYLOAD = bytes(range(256)) * 4096 + b"tail"  # ~1 MiB, not a multiple of the chunk size


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.files``; honours ``Range`` unless ``server.ignore_range``; the first
    ``server.cut_first`` responses stop after ``server.cut_after`` bytes."""

    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        server = self.server
        server.requests.append(dict(self.headers))
        body = server.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and not server.ignore_range:
            start = int(rng.removeprefix("bytes=").split("-")[0])
            if start >= len(body):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        part = body[start:]
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        if server.cut_first > 0:
            server.cut_first -= 1
            self.wfile.write(part[: server.cut_after])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(part)


@contextmanager
def serve(files: dict[str, bytes], cut_first: int = 0, cut_after: int = 0, ignore_range: bool = False) -> Iterator:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.files, server.cut_first, server.cut_after = files, cut_first, cut_after
    server.ignore_range, server.requests = ignore_range, []
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_download_verifies_and_renames(tmp_path: Path) -> None:
    with serve({"/f.bin": PAYLOAD}) as (_, url):
        out = downloads.download(f"{url}/f.bin", tmp_path / "f.bin", sha256=sha256(PAYLOAD), progress=False)
    assert out.read_bytes() == PAYLOAD
    assert not (tmp_path / "f.bin.part").exists()


def test_interrupted_download_resumes_with_range(tmp_path: Path) -> None:
    dest = tmp_path / "f.bin"
    with serve({"/f.bin": PAYLOAD}, cut_first=1, cut_after=300_000) as (server, url):
        with pytest.raises(downloads.DownloadError, match="resumes"):
            downloads.download(f"{url}/f.bin", dest, md5=hashlib.md5(PAYLOAD).hexdigest(), retries=0, progress=False)
        part = tmp_path / "f.bin.part"
        assert part.stat().st_size == 300_000 and not dest.exists()  # never under the final name
        downloads.download(f"{url}/f.bin", dest, md5=hashlib.md5(PAYLOAD).hexdigest(), retries=0, progress=False)
        assert server.requests[-1].get("Range") == "bytes=300000-"
    assert dest.read_bytes() == PAYLOAD and not part.exists()


def test_retries_resume_within_one_call(tmp_path: Path) -> None:
    with serve({"/f.bin": PAYLOAD}, cut_first=2, cut_after=100_000) as (server, url):
        downloads.download(f"{url}/f.bin", tmp_path / "f.bin", sha256=sha256(PAYLOAD), retries=3, backoff=0,
                           progress=False)
        ranges = [r.get("Range") for r in server.requests]
    assert ranges == [None, "bytes=100000-", "bytes=200000-"]
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD


def test_server_ignoring_range_restarts_cleanly(tmp_path: Path) -> None:
    (tmp_path / "f.bin.part").write_bytes(b"garbage from an older attempt")
    with serve({"/f.bin": PAYLOAD}, ignore_range=True) as (_, url):
        downloads.download(f"{url}/f.bin", tmp_path / "f.bin", sha256=sha256(PAYLOAD), progress=False)
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD


def test_checksum_mismatch_raises_and_discards(tmp_path: Path) -> None:
    with serve({"/f.bin": PAYLOAD}) as (_, url):
        with pytest.raises(downloads.ChecksumError, match="differs from the published"):
            downloads.download(f"{url}/f.bin", tmp_path / "f.bin", sha256="0" * 64, progress=False)
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()


def test_offline_error_names_file_and_place(tmp_path: Path) -> None:
    with serve({}) as (_, url):
        port = url.rsplit(":", 1)[1]
    # The server is closed now: connection refused, as on an offline machine.
    with pytest.raises(downloads.DownloadError) as info:
        downloads.download(f"http://127.0.0.1:{port}/CIFAR-10-C.tar", tmp_path / "CIFAR-10-C.tar",
                           md5="56bf5dcef84df0e2308c6dcbcbbd8499", retries=0, progress=False)
    message = str(info.value)
    assert str(tmp_path / "CIFAR-10-C.tar") in message and "56bf5dcef84df0e2308c6dcbcbbd8499" in message


def test_http_404_is_not_retried(tmp_path: Path) -> None:
    with serve({}) as (server, url):
        with pytest.raises(downloads.DownloadError, match="404"):
            downloads.download(f"{url}/missing", tmp_path / "x", retries=5, backoff=0, progress=False)
        assert len(server.requests) == 1


def _tar_gz(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_fetch_downloads_and_extracts_resource(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _tar_gz({"Toy-C/labels.npy": b"x", "Toy-C/fog.npy": b"y"})
    with serve({"/Toy-C.tar.gz": archive}) as (_, url):
        resource = downloads.Resource("toy", "Toy-C.tar.gz", f"{url}/Toy-C.tar.gz", sha256=sha256(archive),
                                      provides="Toy-C")
        monkeypatch.setitem(downloads.RESOURCES, "toy", resource)
        target = downloads.fetch("toy", tmp_path, progress=False)
    assert target == tmp_path / "Toy-C" and (target / "fog.npy").read_bytes() == b"y"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".extract")]
    # Second call: already there, no network needed.
    assert downloads.fetch("toy", tmp_path, download_missing=False) == target


def test_fetch_offline_uses_placed_archive_or_says_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _tar_gz({"Toy-C/labels.npy": b"x"})
    resource = downloads.Resource("toy", "Toy-C.tar.gz", "http://127.0.0.1:9/never", sha256=sha256(archive),
                                  provides="Toy-C")
    monkeypatch.setitem(downloads.RESOURCES, "toy", resource)
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "Toy-C.tar.gz")):
        downloads.fetch("toy", tmp_path, download_missing=False)
    (tmp_path / "Toy-C.tar.gz").write_bytes(archive)
    assert (downloads.fetch("toy", tmp_path, download_missing=False) / "labels.npy").is_file()


def test_unknown_checksum_warns(tmp_path: Path) -> None:
    f = tmp_path / "a"
    f.write_bytes(b"abc")
    with pytest.warns(UserWarning, match="no published checksum"):
        assert downloads.verify(f) is False
    assert downloads.verify(f, sha256=sha256(b"abc")) is True


def test_extract_rejects_damaged_archive_and_unsafe_paths(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(_tar_gz({"a/b": random.Random(0).randbytes(100_000)})[:20_000])
    with pytest.raises(downloads.DownloadError):
        downloads.extract(bad, tmp_path / "out")
    evil = tmp_path / "evil.tar.gz"
    evil.write_bytes(_tar_gz({"../escape": b"1"}))
    with pytest.raises(downloads.DownloadError):
        downloads.extract(evil, tmp_path / "out2")
    assert not (tmp_path / "escape").exists()


def test_registered_resources_are_consistent() -> None:
    for name, r in downloads.RESOURCES.items():
        assert r.name == name and r.provides
        assert r.md5 is None or len(r.md5) == 32
        assert r.sha256 is None or len(r.sha256) == 64
    assert set(downloads.IMAGENET_C_GROUP) == set(__import__("stamplib.data.corruptions", fromlist=["x"]).CORRUPTIONS)


def test_truncated_archive_placed_offline_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        payload = np.random.default_rng(0).bytes(50_000)
        info = tarfile.TarInfo("Toy-C/fog.npy")
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    archive = buf.getvalue()
    resource = downloads.Resource("toy", "Toy-C.tar.gz", "http://127.0.0.1:9/never",
                                  sha256=hashlib.sha256(archive).hexdigest(), provides="Toy-C")
    monkeypatch.setitem(downloads.RESOURCES, "toy", resource)
    (tmp_path / "Toy-C.tar.gz").write_bytes(archive[: len(archive) // 2])  # an interrupted copy
    with pytest.raises(downloads.ChecksumError, match="delete it and download again"):
        downloads.fetch("toy", tmp_path, download_missing=False)
    assert not (tmp_path / "Toy-C").exists()

