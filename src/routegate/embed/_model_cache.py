"""The int8 MiniLM model, built once per machine and kept in the user's cache directory.

Building the int8 model from the packaged one (:func:`routegate.embed.minilm.packaged_int8_model`: importing the
``onnx`` package, rewriting every linear layer) costs 1-4 s, and a one-shot command (``routegate ask``) paid it on
every run. The file also holds onnxruntime's portable operator fusions
(:func:`routegate.embed.quantize.fuse_for_onnxruntime`), so a session made from it skips them (0.14 → 0.07 s on a
quiet 2-core machine). The result depends only on the packaged model file, the shipped activation ranges, the
rewrite's code and the onnxruntime version, so it is written once to
``<user cache dir>/routegate/minilm-int8-<key>.onnx`` (``platformdirs``: ``~/.cache/routegate`` on Linux), ``key`` a
digest of those four, and onnxruntime loads that file afterwards. A file
is written under a temporary name and renamed into place, so a concurrent reader sees it whole or not at all. When
the directory cannot be written the model is built in memory, as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

from routegate._atomic import write_atomically

logger = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``<user cache dir>/routegate`` (``~/.cache/routegate`` on Linux; ``XDG_CACHE_HOME`` moves it)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("routegate", appauthor=False))


def cache_key(model: object, ranges_path: Path, code_path: Path, *, runtime: str) -> str:
    """A digest of what the int8 model is built from: ``model``, what names the model file (JSON-ready: the
    packaged model's distribution and version, else the file's path, size and modification time: reading its 22 MB
    to hash them would cost what the cache saves), the ranges file and the rewrite's code (contents), and
    ``runtime``, the onnxruntime version whose fusions the file holds."""
    digest = hashlib.sha256(json.dumps([model, runtime]).encode())
    for path in (ranges_path, code_path):
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]


PREFIX = "minilm-int8-"


def cache_file(key: str, cache_dir: Path) -> Path:
    """Where the model cached under ``key`` lives in ``cache_dir``."""
    return cache_dir / f"{PREFIX}{key}.onnx"


def cached_model(key: str, build: Callable[[], bytes], cache_dir: Path) -> str | bytes:
    """The path of the model cached under ``key`` in ``cache_dir``, built with ``build`` and written there when
    missing; the built bytes themselves when it cannot be written."""
    target = cache_file(key, cache_dir)
    if target.is_file():
        return str(target)
    data = build()
    try:
        write_atomically(target, data, scratch_prefix=f".{PREFIX}")
    except OSError as exc:
        logger.info("the int8 encoder model is not cached (%s: %s); it is built at every start", cache_dir, exc)
        return data
    return str(target)
