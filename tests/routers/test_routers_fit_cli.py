"""``routegate fit`` says what it optimises and warns when an option cannot apply; ``eval`` routes on one thread by
default; a fit shows progress while it embeds."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from routegate.cli import build_parser, main
from routegate.cli.routers import ProgressEncoder
from routegate.embed import HashingEncoder

ROUTES = {
    "billing": ["refund my last charge", "I was billed twice", "update my credit card", "cancel my invoice"],
    "tech": ["the app crashes on start", "I cannot log in", "reset my password", "the page will not load"],
}


def write(path: Path, rows: list[tuple[str, str]]) -> str:
    path.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in rows))
    return str(path)


def rows(oos: int = 0) -> list[tuple[str, str]]:
    out = [(text, label) for label, texts in ROUTES.items() for text in texts]
    return out + [(f"what is the weather in city {i}", "oos") for i in range(oos)]


def test_a_floor_without_oos_rows_is_said_not_to_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train = write(tmp_path / "train.jsonl", rows())
    code = main(["fit", "--train", train, "-o", str(tmp_path / "r"), "--oos-recall-floor", "0.9", "--no-progress"])
    assert code == 0
    err = capsys.readouterr().err
    assert "warning: --oos-recall-floor cannot apply: --train/--val hold no 'oos' rows" in err
    assert "objective: keep 0.97 of in-scope queries routed" in err


def test_few_oos_rows_say_the_detector_is_off_and_coverage_does_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = write(tmp_path / "train.jsonl", rows(oos=3))
    out = str(tmp_path / "r")
    assert main(["fit", "--train", train, "-o", out, "--inscope-coverage", "0.9", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "warning: --inscope-coverage does not apply" in err
    assert "only 3 'oos' rows: the out-of-scope detector needs 20" in err
    assert "objective: max in-scope accuracy with OOS recall >= 0.85" in err


def test_no_warning_when_the_options_fit_the_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train = write(tmp_path / "train.jsonl", rows())
    assert main(["fit", "--train", train, "-o", str(tmp_path / "r"), "--no-progress"]) == 0
    assert "warning:" not in capsys.readouterr().err


def test_a_large_batch_shows_progress_and_encodes_the_same() -> None:
    inner = HashingEncoder()
    stream = io.StringIO()
    texts = [f"text number {i}" for i in range(600)]
    vectors = ProgressEncoder(inner, stream, chunk=256).encode(texts)
    assert np.array_equal(vectors, inner.encode(texts))
    assert "600/600" in stream.getvalue()
    assert ProgressEncoder(inner, stream).dim == inner.dim


def test_eval_routes_on_one_thread_by_default() -> None:
    args = build_parser().parse_args(["eval", "data.jsonl", "--router", "r"])
    assert args.threads == 1
