"""A configured desk's nearest-examples layer keeps its examples' vectors in the data directory: the next start of
the same desk with the same encoder embeds nothing; an edited example, another encoder, or a cache file that is
damaged, forged or not a file at all is embedded again (and the answer is the encoder's, never the file's).
Checked through the desk's public seam (:func:`~routegate.apps.configured.fitted.desk_embedding_layer`) by counting
the texts the encoder is asked to embed, and on the disk."""

from __future__ import annotations

import io
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.apps.configured.config import builtin_desk_dir, load_config
from routegate.apps.configured.fitted import desk_embedding_layer
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.embed import HashingEncoder
from routegate.embed.protocol import Vectors


class Counting(HashingEncoder):
    """A hashing encoder (unit rows, no model) that counts what it is asked to embed; ``model`` names its model."""

    def __init__(self, model: str = "counting-a") -> None:
        super().__init__(dim=32)
        self.model = model
        self.texts: list[str] = []

    @property
    def model_id(self) -> str:
        return self.model

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return super().encode(texts)


@pytest.fixture
def desk(tmp_path: Path) -> Path:
    """The built-in desk's directory, routing with the nearest examples (not a router fitted at start)."""
    copy = Path(shutil.copytree(builtin_desk_dir(), tmp_path / "desk"))
    toml = copy / "desk.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace("fit_at_start = true\n", "fit_at_start = false\n"), encoding="utf-8"
    )
    return copy


def _layer(desk: Path, encoder: Counting, data: Path) -> ExampleEmbeddingLayer:
    layer = desk_embedding_layer(load_config(desk), desk, encoder, cache_dir=data)
    assert isinstance(layer, ExampleEmbeddingLayer)
    return layer


def _cached(data: Path) -> list[Path]:
    return sorted(data.glob("desk-examples-*.npy"))


def _question_scores(layer: ExampleEmbeddingLayer) -> dict[str, float]:
    return layer.scores("where is my refund for the broken kettle")


def test_a_second_start_embeds_no_example(desk: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first_encoder = Counting()
    first = _layer(desk, first_encoder, data)
    examples = len(first_encoder.texts)
    assert examples > 20 and len(_cached(data)) == 1

    again = Counting()
    second = _layer(desk, again, data)
    assert again.texts == []  # nothing embedded at start
    assert _question_scores(second) == _question_scores(first)
    assert again.texts == ["where is my refund for the broken kettle"]


def test_no_data_dir_embeds_every_time(desk: Path) -> None:
    encoder = Counting()
    desk_embedding_layer(load_config(desk), desk, encoder, cache_dir=None)
    once = len(encoder.texts)
    desk_embedding_layer(load_config(desk), desk, encoder, cache_dir=None)
    assert once > 20 and len(encoder.texts) == 2 * once


def test_an_edited_example_is_embedded_again_and_the_old_file_removed(desk: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _layer(desk, Counting(), data)
    (old,) = _cached(data)
    toml = desk / "desk.toml"
    text = toml.read_text(encoding="utf-8")
    assert '  "sorry",\n' in text
    toml.write_text(text.replace('  "sorry",\n', '  "my apologies",\n'), encoding="utf-8")

    encoder = Counting()
    _layer(desk, encoder, data)
    assert "my apologies" in encoder.texts and "sorry" not in encoder.texts
    (new,) = _cached(data)
    assert new != old and not old.exists()
    again = Counting()
    _layer(desk, again, data)
    assert again.texts == []


def test_another_encoder_embeds_again_and_keeps_its_own_file(desk: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _layer(desk, Counting("counting-a"), data)
    other = Counting("counting-b")
    _layer(desk, other, data)
    assert other.texts  # a vector of another model is never reused
    assert len(_cached(data)) == 2
    for model in ("counting-a", "counting-b"):
        encoder = Counting(model)
        _layer(desk, encoder, data)
        assert encoder.texts == []


def test_another_desk_with_the_same_examples_has_its_own_file(desk: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    twin = Path(shutil.copytree(desk, tmp_path / "twin"))
    _layer(desk, Counting(), data)
    _layer(twin, Counting(), data)
    assert len(_cached(data)) == 2


def _damage(file: Path, how: str, rows: int, dim: int) -> None:
    if how == "truncated":
        file.write_bytes(file.read_bytes()[:-100])
    elif how == "garbage":
        file.write_bytes(b"not an array at all")
    elif how in ("shape", "dtype", "nan", "not unit", "zeroed", "one row zeroed", "pickle"):
        array: np.ndarray
        if how == "shape":
            array = np.ones((rows - 1, dim), dtype=np.float32) / np.sqrt(dim)
        elif how == "dtype":
            array = np.ones((rows, dim), dtype=np.float64) / np.sqrt(dim)
        elif how == "nan":
            array = np.full((rows, dim), np.nan, dtype=np.float32)
        elif how == "not unit":
            array = np.full((rows, dim), 7.0, dtype=np.float32)
        elif how == "zeroed":  # a block of zeros where the rows were: the right header, every row zero
            array = np.zeros((rows, dim), dtype=np.float32)
        elif how == "one row zeroed":
            array = np.load(io.BytesIO(file.read_bytes()))
            array[rows // 2] = 0.0
        else:
            array = np.array([{"a": 1}] * rows, dtype=object)
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=True)
        file.write_bytes(buffer.getvalue())
    elif how == "symlink":
        target = file.with_name("elsewhere.npy")
        file.rename(target)
        file.symlink_to(target)
    elif how == "fifo":
        file.unlink()
        os.mkfifo(file)
    elif how == "directory":
        file.unlink()
        file.mkdir()
    else:
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "truncated",
        "garbage",
        "shape",
        "dtype",
        "nan",
        "not unit",
        "zeroed",
        "one row zeroed",
        "pickle",
        "symlink",
        "fifo",
        "directory",
    ],
)
def test_a_damaged_or_foreign_cache_is_embedded_again(
    desk: Path, tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    first_encoder = Counting()
    first = _layer(desk, first_encoder, data)
    (file,) = _cached(data)
    _damage(file, how, rows=len(first_encoder.texts), dim=first_encoder.dim)

    encoder = Counting()
    with caplog.at_level(logging.WARNING):
        layer = _layer(desk, encoder, data)  # a FIFO is not waited on: the test would hang here
    assert sorted(encoder.texts) == sorted(first_encoder.texts)  # every example embedded again
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert str(file) in warning and "embedding the examples again" in warning and "router" not in warning
    assert _question_scores(layer) == _question_scores(first)
    if how not in ("symlink", "fifo", "directory"):
        again = Counting()
        _layer(desk, again, data)  # the damaged file was replaced by a good one
        assert again.texts == []


def test_an_oversized_cache_file_is_not_read(desk: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    _layer(desk, Counting(), data)
    (file,) = _cached(data)
    with file.open("r+b") as grown:
        grown.truncate(256 << 20)  # 256 MiB (sparse) where about 10 KB are expected
    encoder = Counting()
    with caplog.at_level(logging.WARNING):
        _layer(desk, encoder, data)
    assert encoder.texts
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "bytes allowed" in warning and str(file) in warning


def test_an_unwritable_data_dir_still_routes(desk: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("a file where the directory should be")
    encoder = Counting()
    layer = _layer(desk, encoder, data)
    assert encoder.texts and _question_scores(layer)
    assert data.read_text() == "a file where the directory should be"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=4096) | st.binary(max_size=512).map(lambda tail: b"\x93NUMPY\x01\x00" + tail))
def test_any_bytes_in_the_cache_file_give_the_encoders_vectors(desk: Path, tmp_path: Path, content: bytes) -> None:
    data = tmp_path / "data"
    reference = Counting()
    expected = _question_scores(_layer(desk, reference, data))
    (file,) = _cached(data)
    file.write_bytes(content)
    encoder = Counting()
    assert _question_scores(_layer(desk, encoder, data)) == expected
    assert len(encoder.texts) > 1  # embedded again, whatever the bytes were


def test_vectors_with_a_zero_row_are_not_written(desk: Path, tmp_path: Path) -> None:
    class ZeroFirst(Counting):  # an encoder that embeds its first example as zero
        def encode(self, texts: Sequence[str]) -> Vectors:
            vectors = super().encode(texts).copy()
            vectors[0] = 0.0
            return vectors

    data = tmp_path / "data"
    _layer(desk, ZeroFirst(), data)
    assert _cached(data) == []  # such a file would be refused as damaged at every read
    again = ZeroFirst()
    _layer(desk, again, data)
    assert again.texts  # embedded again, as it would be with no data directory
