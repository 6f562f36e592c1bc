"""MiniLM's tokenizer and the files shipped in ``embed/data``: shared by the encoder (:mod:`.minilm`) and the
quantiser (:mod:`.quantize`), which import this module rather than each other."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from routegate._extras import needs
from routegate.errors import ConfigurationError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MAX_TOKENS = 256


def _data_path(name: str) -> Path:
    return Path(str(resources.files("routegate.embed") / "data" / name))


def _default_tokenizer_path() -> Path:
    return _data_path("tokenizer.json")


def load_tokenizer(path: str | Path | None = None, *, max_tokens: int = MAX_TOKENS) -> Tokenizer:
    """MiniLM's tokenizer (or the ``tokenizer.json`` at ``path``): truncation at ``max_tokens``, no padding."""
    with needs("embed"):
        from tokenizers import Tokenizer

    path = Path(path) if path is not None else _default_tokenizer_path()
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ConfigurationError(f"cannot load the tokenizer from {path}: {exc}") from exc
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()  # padding is done per batch, to the longest member
    return tokenizer
