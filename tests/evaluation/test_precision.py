"""Fidelity on a GPU without a GPU (issue 27): records are computed with TF32 off unless asked,
and say so in their provenance; --deterministic names the method and the operation it cannot
serve. The GPU half is tests/cuda (pytest -m cuda)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import stamplib
from stamplib import cli, determinism, paths
from stamplib.evaluation import precision
from stamplib.evaluation.spec import RunSpec
from tests.support import pretend_gpus


@pytest.fixture
def tf32_flags() -> Iterator[None]:
    before = precision.tf32_state()
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before["matmul"], before["cudnn"]


def test_records_are_computed_without_tf32_unless_asked_and_say_which(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tf32_flags: None, digits_model) -> None:
    spec = RunSpec(method="source", corruptions=("none",), profile="smoke")
    monkeypatch.delenv("STAMPLIB_TF32", raising=False)
    precision.set_tf32(True)  # e.g. PyTorch's own default for cuDNN
    record = stamplib.run(spec, paths.RunContext.build(results=tmp_path / "fidelity"))
    assert record.provenance.tf32 == {"matmul": False, "cudnn": False} == precision.tf32_state()
    monkeypatch.setenv("STAMPLIB_TF32", "1")  # read at the edge, into the context
    record = stamplib.run(spec, paths.RunContext.build(results=tmp_path / "fast"))
    assert record.provenance.tf32 == {"matmul": True, "cudnn": True}


def _refused_by_torch() -> RuntimeError:
    """PyTorch's own refusal of an operation without a deterministic kernel (one refused on the
    CPU too, so that no GPU is needed to see the message)."""
    with determinism.deterministic():
        try:
            torch.zeros(3).put_(torch.tensor([0]), torch.tensor([1.0]))
        except RuntimeError as err:
            return err
    raise AssertionError("put_ ran under deterministic algorithms")


def test_a_deterministic_refusal_names_the_operation_and_the_way_out() -> None:
    reason = determinism.refusal(_refused_by_torch())
    assert reason is not None and "put_" in reason and "without --deterministic" in reason
    assert determinism.refusal(RuntimeError("CUDA out of memory")) is None


def test_run_deterministic_names_the_method_it_cannot_serve(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    refused = _refused_by_torch()
    pretend_gpus(monkeypatch)  # a GPU machine's command line: the context takes --device cuda
    monkeypatch.setattr(determinism, "set_deterministic", lambda *a, **k: None)

    def run(*args: object, **kwargs: object) -> None:
        raise refused

    monkeypatch.setattr(stamplib, "run", run)
    argv = ["run", "--method", "owttt", "--profile", "smoke", "--device", "cuda"]
    assert cli.main([*argv, "--deterministic"]) == 2
    err = capsys.readouterr().err
    assert "--deterministic cannot serve method 'owttt' on cuda" in err and "put_" in err
    with pytest.raises(RuntimeError, match="deterministic implementation"):  # not asked for: a bug, with its traceback
        cli.main(argv)
