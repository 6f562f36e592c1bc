"""A saved router directory from elsewhere can neither hang nor exhaust the loader: every file it holds is a regular
file inside the directory, within its size cap, and bad contents end as a ConfigurationError naming the file.

The router here is fitted on the HashingEncoder (384-dim) and its manifest is then pointed at an ``encoder.onnx``,
as a fine-tuned router's is, so that every kind of file a saved router can hold is present."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.embed import HashingEncoder
from routegate.errors import ConfigurationError
from routegate.routers import LabelledExample, SemanticRouter
from routegate.routers._files import (
    ARRAY_MAX_BYTES,
    MANIFEST_MAX_BYTES,
    MODEL_MAX_BYTES,
    VOCABULARY_MAX_BYTES,
)
from routegate.routers.finetune._encoder import FinetunedEncoder
from routegate.routers.persist import saved_encoder

ROUTES = {
    "TICKETS": ["show ticket 12", "status of ticket 3", "open tickets of John", "how many tickets are open"],
    "DOCS": ["how do I reset my password", "refund policy", "escalation process", "password reset article"],
    "EXTERNAL": ["weather in Paris", "bitcoin price", "forecast for London", "price of ethereum today"],
}
OOS = ["tell me a joke", "who won the match", "sing a song"]
MODEL_BYTES = b"not an onnx model: the loader only checks the file; the session reads it"
MODEL_ID = "routegate-finetuned:all-MiniLM-L6-v2:test"

CAPS = {
    "manifest.json": MANIFEST_MAX_BYTES,
    "char_vocab.json": VOCABULARY_MAX_BYTES,
    "encoder.onnx": MODEL_MAX_BYTES,
}
FILES = [
    "manifest.json",
    "char_vocab.json",
    "coef.npy",
    "intercept.npy",
    "bank.npy",
    "offsets.npy",
    "char_coef.npy",
    "char_intercept.npy",
    "char_idf.npy",
    "gauss_whiten.npy",
    "gauss_centers.npy",
    "gauss_background_whiten.npy",
    "gauss_background_center.npy",
    "encoder.onnx",
]
HANG_BOUND_S = 60  # a bound on a hang, not a speed requirement: a refused FIFO returns at once
MEMORY_BOUND = 16 << 20  # loading the tiny router allocates well under 1 MB


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved router holding every kind of file: manifest, char vocabulary, arrays, a fine-tuned encoder model."""
    examples = [LabelledExample(t, r) for r, texts in ROUTES.items() for t in texts]
    examples += [LabelledExample(t, "oos") for t in OOS]
    router = SemanticRouter.fit(examples, encoder=HashingEncoder(dim=384), default_route="LLM")
    path = router.save(tmp_path_factory.mktemp("saved") / "router")
    (path / "encoder.onnx").write_bytes(MODEL_BYTES)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["encoder"] |= {"model_id": MODEL_ID, "file": "encoder.onnx"}
    manifest["encoder"]["sha256"] = hashlib.sha256(MODEL_BYTES).hexdigest()
    (path / "manifest.json").write_text(json.dumps(manifest))
    assert sorted(p.name for p in path.iterdir()) == sorted(FILES), "a new kind of file: add it to FILES"
    return path


@pytest.fixture
def copy(saved: Path, tmp_path: Path) -> Path:
    target = tmp_path / "router"
    shutil.copytree(saved, target)
    return target


def _load(path: Path) -> SemanticRouter:
    return SemanticRouter.load(path)  # encoder=None: the fine-tuned model file is checked too


def _refused_within_bound(load: Callable[[], object], fifo: Path) -> BaseException | None:
    """What ``load`` raised (None if it returned), run in a thread so that a hang fails the test, not the run."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            load()
            outcome.append(None)
        except BaseException as exc:  # handed back to the test to assert on
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_BOUND_S)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release the reader blocked on the FIFO
        worker.join(HANG_BOUND_S)
        pytest.fail(f"loading blocked on the FIFO {fifo.name} for {HANG_BOUND_S} s")
    return outcome[0]


@pytest.fixture
def peak_allocation() -> Iterator[Callable[[], int]]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield lambda: tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_router_with_every_kind_of_file_loads(saved: Path) -> None:
    router = _load(saved)
    encoder = router.encoder
    assert isinstance(encoder, FinetunedEncoder) and encoder.model_id == MODEL_ID
    assert router.head.char is not None and router.routes == ("DOCS", "EXTERNAL", "TICKETS")


@pytest.mark.parametrize("name", FILES)
def test_a_file_linked_out_of_the_directory_is_refused(copy: Path, tmp_path: Path, name: str) -> None:
    outside = tmp_path / f"outside-{name}"
    (copy / name).rename(outside)  # the very bytes the router saved, only elsewhere
    (copy / name).symlink_to(outside)
    with pytest.raises(ConfigurationError, match=rf"{name} \(.*\) is a symbolic link"):
        _load(copy)


@pytest.mark.parametrize("name", FILES)
def test_a_link_to_dev_zero_is_refused_without_reading_it(
    copy: Path, name: str, peak_allocation: Callable[[], int]
) -> None:
    (copy / name).unlink()
    (copy / name).symlink_to("/dev/zero")
    with pytest.raises(ConfigurationError, match=rf"{name} \(.*\) is a symbolic link"):
        _load(copy)
    assert peak_allocation() < MEMORY_BOUND


@pytest.mark.parametrize("name", FILES)
def test_a_fifo_in_place_of_a_file_is_refused_without_waiting_on_it(copy: Path, name: str) -> None:
    (copy / name).unlink()
    os.mkfifo(copy / name)
    refused = _refused_within_bound(lambda: _load(copy), copy / name)
    assert isinstance(refused, ConfigurationError), refused
    assert f"{name} (" in str(refused) and "is not a regular file (it is a FIFO)" in str(refused)


@pytest.mark.parametrize("name", FILES)
def test_a_file_over_its_cap_is_refused_before_it_is_read(
    copy: Path, name: str, peak_allocation: Callable[[], int]
) -> None:
    cap = CAPS.get(name, ARRAY_MAX_BYTES)
    os.truncate(copy / name, cap + 1)  # sparse: gigabytes on paper, nothing on disk
    with pytest.raises(
        ConfigurationError, match=rf"{name} \(.*\) is {cap + 1} bytes, more than the {cap} bytes allowed"
    ):
        _load(copy)
    assert peak_allocation() < MEMORY_BOUND


@pytest.mark.parametrize("name", ["manifest.json", "char_vocab.json"])
def test_json_nested_100k_deep_is_refused(copy: Path, name: str) -> None:
    (copy / name).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigurationError, match=rf"{name} \(.*\): nested deeper than the 64 levels"):
        _load(copy)


def test_json_that_parses_but_nests_past_the_limit_is_refused(copy: Path) -> None:
    manifest = json.loads((copy / "manifest.json").read_text())
    deep: object = []
    for _ in range(64):
        deep = [deep]
    manifest["calibration"]["grid"] = deep  # 2 levels above it: 66 in all
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigurationError, match="nested deeper than the 64 levels"):
        _load(copy)


def test_a_npy_header_claiming_1_4_tib_is_refused_before_allocating(
    copy: Path, peak_allocation: Callable[[], int]
) -> None:
    real = np.load(copy / "bank.npy")
    rows = (14 << 40) // 10 // (4 * real.shape[1])  # 1.4 TiB of float32 rows
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (rows, 384)})
    (copy / "bank.npy").write_bytes(header.getvalue() + real.astype("<f4").tobytes())
    with pytest.raises(ConfigurationError, match=rf"bank\.npy \(array 'bank'\): its header declares shape \({rows}, "):
        _load(copy)
    assert peak_allocation() < MEMORY_BOUND


def test_a_npy_of_objects_is_refused(copy: Path) -> None:
    np.save(copy / "coef.npy", np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ConfigurationError, match=r"coef\.npy \(array 'coef'\): dtype object is not a plain number"):
        _load(copy)


def test_the_encoder_model_is_read_as_a_router_file_when_its_session_loads(copy: Path) -> None:
    encoder = saved_encoder(copy)
    (copy / "encoder.onnx").unlink()
    os.mkfifo(copy / "encoder.onnx")  # swapped after the load's check
    assert isinstance(encoder, FinetunedEncoder)
    refused = _refused_within_bound(encoder.warm_up, copy / "encoder.onnx")
    assert isinstance(refused, ConfigurationError) and "is not a regular file (it is a FIFO)" in str(refused)


def test_an_encoder_model_changed_after_saving_is_refused_by_its_hash(copy: Path) -> None:
    (copy / "encoder.onnx").write_bytes(MODEL_BYTES + b"!")
    encoder = saved_encoder(copy)
    with pytest.raises(ConfigurationError, match=r"encoder\.onnx: SHA-256 .* differs from the manifest's"):
        encoder.warm_up()


def _corrupt(data: bytes, edits: list[tuple[float, int]], cut: float | None) -> bytes:
    buffer = bytearray(data)
    for where, value in edits:
        buffer[int(where * (len(buffer) - 1))] = value
    return bytes(buffer[: int(cut * len(buffer))] if cut is not None else buffer)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(FILES),
    edits=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.none() | st.floats(0, 1),
)
def test_a_corrupted_file_loads_or_is_refused_with_a_configuration_error(
    saved: Path, name: str, edits: list[tuple[float, int]], cut: float | None
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "router"
        shutil.copytree(saved, copy)
        (copy / name).write_bytes(_corrupt((copy / name).read_bytes(), edits, cut))
        with contextlib.suppress(ConfigurationError):  # anything else fails the property
            _load(copy)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(value: object, at: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every place in a parsed JSON value (for replacing one with something else)."""
    inner = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [at] + [p for key, child in inner for p in _paths(child, (*at, key))]


@settings(max_examples=150, deadline=None)
@given(where=st.integers(0, 10_000), value=JSON_VALUES)
def test_a_manifest_with_any_entry_replaced_loads_or_is_refused_with_a_configuration_error(
    saved: Path, where: int, value: object
) -> None:
    manifest = json.loads((saved / "manifest.json").read_text())
    places = _paths(manifest)[1:]
    *parents, last = places[where % len(places)]
    holder = manifest
    for key in parents:
        holder = holder[key]
    holder[last] = value
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "router"
        shutil.copytree(saved, copy)
        (copy / "manifest.json").write_text(json.dumps(manifest))
        with contextlib.suppress(ConfigurationError):  # anything else fails the property
            _load(copy)
