"""Saving and loading a fitted :class:`~routegate.routers.semantic.SemanticRouter`.

A saved router is a directory: ``manifest.json`` (routes, calibration, head parameters, encoder id, file list)
plus ``.npy`` arrays and the char n-gram vocabulary as JSON. Loading reads arrays with ``allow_pickle=False``, so
a router file from elsewhere cannot run code; every shape is checked against the manifest. Loading takes
milliseconds (the encoder model itself loads lazily on the first query).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from routegate.embed.protocol import Encoder
from routegate.errors import ConfigurationError
from routegate.routers._charngrams import CharNgrams
from routegate.routers._head import CharHead, Head
from routegate.routers._rule import Calibration
from routegate.routers.semantic import SemanticRouter

FORMAT = "routegate.semantic_router"
VERSION = 1
MANIFEST = "manifest.json"


def save_router(router: SemanticRouter, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    head = router.head
    arrays: dict[str, np.ndarray[Any, Any]] = {
        "coef": head.coef,
        "intercept": head.intercept,
        "bank": head.bank,
        "offsets": head.offsets,
    }
    char_meta: dict[str, Any] | None = None
    if head.char is not None:
        arrays |= {"char_coef": head.char.coef, "char_intercept": head.char.intercept, "char_idf": head.char.ngrams.idf}
        (path / "char_vocab.json").write_text(
            json.dumps(head.char.ngrams.ordered_vocabulary(), ensure_ascii=False), encoding="utf-8"
        )
        char_meta = {"lo": head.char.ngrams.lo, "hi": head.char.ngrams.hi, "vocabulary": "char_vocab.json"}
    files = {}
    for name, array in arrays.items():
        np.save(path / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        files[name] = {"file": f"{name}.npy", "shape": list(array.shape), "dtype": str(array.dtype)}
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "encoder": {"model_id": router.encoder.model_id, "dim": router.encoder.dim},
        "routes": list(head.routes),
        "default_route": router.default_route,
        "clarify_target": router.clarify_target,
        "name": router.name,
        "head": {"alpha": head.alpha, "beta": head.beta, "knn_k": head.knn_k, "char": char_meta},
        "calibration": router.calibration.to_dict(),
        "arrays": files,
    }
    (path / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def _load_array(path: Path, spec: Any, name: str) -> np.ndarray[Any, Any]:
    if not isinstance(spec, dict) or not isinstance(spec.get("file"), str):
        raise ConfigurationError(f"{path / MANIFEST}: array {name!r} has no file entry")
    file = path / spec["file"]
    if file.resolve().parent != path.resolve():
        raise ConfigurationError(f"{path / MANIFEST}: array {name!r} points outside the router directory")
    try:
        array: np.ndarray[Any, Any] = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {file}: {exc}") from exc
    if list(array.shape) != list(spec.get("shape", [])):
        raise ConfigurationError(f"{file}: shape {list(array.shape)} differs from the manifest's {spec.get('shape')}")
    return array


def load_router(path: Path, *, encoder: Encoder | None = None, **kwargs: Any) -> SemanticRouter:
    manifest_file = path / MANIFEST
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"no saved router at {path}: cannot read {MANIFEST} ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{manifest_file}: not valid JSON ({exc.msg})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ConfigurationError(f"{manifest_file}: not a routegate semantic router (format != {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise ConfigurationError(
            f"{manifest_file}: version {manifest.get('version')!r}, this routegate reads {VERSION}"
        )
    try:
        routes = tuple(str(r) for r in manifest["routes"])
        arrays = {name: _load_array(path, spec, name) for name, spec in manifest["arrays"].items()}
        head_meta = manifest["head"]
        char: CharHead | None = None
        if head_meta.get("char"):
            meta = head_meta["char"]
            vocab_list = json.loads((path / "char_vocab.json").read_text(encoding="utf-8"))
            ngrams = CharNgrams(
                {str(g): i for i, g in enumerate(vocab_list)},
                arrays["char_idf"].astype(np.float32),
                int(meta["lo"]),
                int(meta["hi"]),
            )
            char = CharHead(ngrams, arrays["char_coef"].astype(np.float32), arrays["char_intercept"].astype(np.float32))
        head = Head(
            routes,
            arrays["coef"].astype(np.float32),
            arrays["intercept"].astype(np.float32),
            arrays["bank"].astype(np.float32),
            arrays["offsets"].astype(np.int64),
            char,
            float(head_meta["alpha"]),
            float(head_meta["beta"]),
            int(head_meta["knn_k"]),
        )
        calibration = Calibration.from_dict(manifest["calibration"])
        expected = manifest["encoder"]
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise ConfigurationError(f"{manifest_file}: incomplete or inconsistent saved router ({exc!r})") from exc
    k, d = head.coef.shape
    if (
        k != len(routes)
        or head.intercept.shape != (k,)
        or head.bank.shape[1:] != (d,)
        or head.offsets.shape != (k + 1,)
    ):
        raise ConfigurationError(f"{manifest_file}: array shapes do not match {len(routes)} routes of dimension {d}")
    if int(head.offsets[-1]) != head.bank.shape[0] or bool((np.diff(head.offsets) < 0).any()):
        raise ConfigurationError(f"{manifest_file}: example offsets are inconsistent with the example bank")
    if char is not None and (char.coef.shape != (k, char.ngrams.size) or char.ngrams.idf.shape != (char.ngrams.size,)):
        raise ConfigurationError(f"{manifest_file}: char n-gram arrays do not match the vocabulary")
    if encoder is None:
        from routegate.embed import default_encoder

        encoder = default_encoder()
    if encoder.model_id != expected.get("model_id") or encoder.dim != expected.get("dim"):
        raise ConfigurationError(
            f"{path} was fitted with encoder {expected.get('model_id')!r} ({expected.get('dim')}-dim); "
            f"got {encoder.model_id!r} ({encoder.dim}-dim) — refit the router or pass the matching encoder"
        )
    options: dict[str, Any] = {
        "default_route": str(manifest["default_route"]),
        "clarify_target": manifest.get("clarify_target"),
        "name": str(manifest.get("name") or "semantic"),
    }
    options.update(kwargs)
    return SemanticRouter(head, calibration, encoder=encoder, **options)
