"""Saving and loading a fitted :class:`~routegate.routers.semantic.SemanticRouter`.

A saved router is a directory: ``manifest.json`` (routes, calibration, head parameters, encoder id, file list)
plus ``.npy`` arrays and the char n-gram vocabulary as JSON. Every file is read by :mod:`routegate.routers._files`
(regular files inside the directory only, size caps, bounded JSON nesting, arrays without pickle with their headers
checked against their size), so a router directory from elsewhere can neither run code nor hang or exhaust the
loader; every shape is checked against the manifest. Loading takes milliseconds (the encoder model itself loads
lazily on the first query).

The manifest's ``encoder`` entry is the encoder's identity: its family (``name``: ``minilm``, ``openai``,
``multilingual-e5``...), ``model_id`` and ``dim`` (``identity``: the version of these fields, 1). A router loads only
with an encoder of the same model id and dimension; without one given, the family says which to build (an
embeddings endpoint's cannot be built from the manifest: it needs its URL and key, so it is asked for). Routers saved
before the family was recorded are MiniLM's.

Each array's entry in the manifest holds its SHA-256 (format version 2): an array changed after it was saved (a
disk error, a hand edit) is refused on load, naming the file. Version 2 also holds the class-conditional Gaussians
(``gauss_*``: :mod:`routegate.routers._gauss`) and names the calibration's chosen score;
version 1 directories (saved before them) still load, without the Mahalanobis score.

A router fitted on a fine-tuned encoder (:mod:`routegate.routers.finetune`) also holds that encoder's int8 ONNX
model (``encoder.onnx``); the manifest's ``encoder`` entry names the file, its hash and its provenance
(``finetune``: base model, data hashes, hyper-parameters, validation figures). Loading it needs onnxruntime only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.embed.protocol import Encoder, encoder_name
from routegate.errors import ConfigurationError
from routegate.routers._charngrams import CharNgrams
from routegate.routers._files import (
    MANIFEST_MAX_BYTES,
    MODEL_MAX_BYTES,
    VOCABULARY_MAX_BYTES,
    check_router_file,
    read_router_array,
    read_router_json,
)
from routegate.routers._gauss import Gaussian
from routegate.routers._head import CharHead, Head
from routegate.routers._rule import Calibration

if TYPE_CHECKING:
    from routegate.routers.semantic import SemanticRouter

FORMAT = "routegate.semantic_router"
ENCODER_IDENTITY = 1  # the version of the manifest's encoder fields (name, model_id, dim)
MINILM = "minilm"  # the family of routers saved before it was recorded
VERSION = 2
READS = (1, 2)
"""Format versions this module loads: 1 (no Gaussians, no array hashes) and 2."""
MANIFEST = "manifest.json"
_REFIT = "save or fit the router again"
_MAX_NGRAM = 64


def save_router(router: SemanticRouter, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    head = router.head
    arrays: dict[str, np.ndarray[Any, Any]] = {
        "coef": head.coef,
        "intercept": head.intercept,
        "bank": head.bank,
        "offsets": head.offsets,
    }
    if head.gauss is not None:
        gauss = head.gauss
        arrays |= {"gauss_whiten": gauss.whiten, "gauss_centers": gauss.centers}
        arrays |= {
            "gauss_background_whiten": gauss.background_whiten,
            "gauss_background_center": gauss.background_center,
        }
    char_meta: dict[str, Any] | None = None
    if head.char is not None:
        arrays |= {"char_coef": head.char.coef, "char_intercept": head.char.intercept, "char_idf": head.char.ngrams.idf}
        (path / "char_vocab.json").write_text(
            json.dumps(head.char.ngrams.ordered_vocabulary(), ensure_ascii=False), encoding="utf-8"
        )
        char_meta = {"lo": head.char.ngrams.lo, "hi": head.char.ngrams.hi, "vocabulary": "char_vocab.json"}
    encoder_meta: dict[str, Any] = {
        "name": encoder_name(router.encoder),
        "model_id": router.encoder.model_id,
        "dim": router.encoder.dim,
        "identity": ENCODER_IDENTITY,
    }
    encoder_meta |= _save_finetuned_model(router.encoder, path)
    files = {}
    for name, array in arrays.items():
        file = path / f"{name}.npy"
        np.save(file, np.ascontiguousarray(array), allow_pickle=False)
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        files[name] = {"file": file.name, "shape": list(array.shape), "dtype": str(array.dtype), "sha256": digest}
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "encoder": encoder_meta,
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


def _save_finetuned_model(encoder: Encoder, path: Path) -> dict[str, Any]:
    """A fine-tuned encoder's model copied into the router directory; its manifest entries (none otherwise)."""
    from routegate.routers.finetune._encoder import MODEL_FILE, finetuned_of

    finetuned = finetuned_of(encoder)
    if finetuned is None:
        return {}
    target = path / MODEL_FILE
    if finetuned.model_path.resolve() != target.resolve():
        shutil.copyfile(finetuned.model_path, target)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    return {"file": MODEL_FILE, "sha256": digest, "finetune": finetuned.card}


def _load_array(path: Path, spec: object, name: str, version: int) -> np.ndarray[Any, Any]:
    if not isinstance(spec, dict):
        raise ConfigurationError(f"{path / MANIFEST}: array {name!r} has no file entry")
    expected = spec.get("sha256")
    if version >= 2 and not isinstance(expected, str):
        raise ConfigurationError(f"{path / MANIFEST}: array {name!r} has no sha256 entry; {_REFIT}")
    array = read_router_array(
        path, spec.get("file"), what=f"array {name!r}", sha256=expected if isinstance(expected, str) else None
    )
    if list(array.shape) != spec.get("shape"):
        raise ConfigurationError(
            f"{path / str(spec.get('file'))}: shape {list(array.shape)} differs from the manifest's {spec.get('shape')}"
        )
    return array


def _read_manifest(path: Path) -> dict[str, Any]:
    manifest_file = path / MANIFEST
    if not path.is_dir() or not os.path.lexists(manifest_file):
        raise ConfigurationError(
            f"no saved router at {path}: not a directory holding {MANIFEST} (SemanticRouter.save and routegate fit "
            "write one)"
        )
    manifest = read_router_json(path, MANIFEST, MANIFEST_MAX_BYTES, what="the manifest")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ConfigurationError(f"{manifest_file}: not a routegate semantic router (format != {FORMAT!r})")
    if manifest.get("version") not in READS:
        raise ConfigurationError(
            f"{manifest_file}: version {manifest.get('version')!r}, this routegate reads versions "
            f"{', '.join(map(str, READS))}; upgrade routegate or fit the router again with this one"
        )
    if not isinstance(manifest.get("encoder"), dict):
        raise ConfigurationError(f"{manifest_file}: no encoder entry; {_REFIT}")
    return manifest


def saved_encoder(path: str | Path, *, intra_op_num_threads: int | None = None) -> Encoder:
    """The encoder the router saved at ``path`` was fitted with: its own fine-tuned model when it holds one,
    otherwise a new embedded MiniLM encoder computing as the one it was fitted with
    (``compute="float32"`` for routers saved before int8 products). ``intra_op_num_threads`` as for
    :class:`~routegate.embed.MiniLMEncoder`."""
    path = Path(path)
    return _encoder_of(path, _read_manifest(path).get("encoder"), intra_op_num_threads)


def encoder_identity(path: str | Path) -> dict[str, Any]:
    """The encoder the router saved at ``path`` was fitted with: ``{"name", "model_id", "dim"}`` (``name``
    ``"minilm"`` for a router saved before the family was recorded)."""
    path = Path(path)
    entry = _read_manifest(path)["encoder"]
    return {"name": _family(entry), "model_id": entry.get("model_id"), "dim": entry.get("dim")}


def _family(entry: dict[str, Any]) -> str:
    name = entry.get("name")
    return name if isinstance(name, str) and name else MINILM


def _encoder_of(path: Path, expected: object, intra_op_num_threads: int | None) -> Encoder:
    if isinstance(expected, dict) and "file" in expected:
        from routegate.routers.finetune._encoder import FinetunedEncoder

        model = check_router_file(path, expected["file"], MODEL_MAX_BYTES, what="the encoder model")
        card, sha256 = expected.get("finetune"), expected.get("sha256")
        return FinetunedEncoder(
            model,
            model_id=str(expected.get("model_id")),
            card=card if isinstance(card, dict) else None,
            intra_op_num_threads=intra_op_num_threads,
            sha256=sha256 if isinstance(sha256, str) else None,
        )
    family = _family(expected) if isinstance(expected, dict) else MINILM
    model_id = expected.get("model_id") if isinstance(expected, dict) else None
    if family != MINILM:
        from routegate.embed.choice import saved_family_encoder

        return saved_family_encoder(family, str(model_id), path, intra_op_num_threads=intra_op_num_threads)
    from routegate.embed.minilm import MODEL_IDS, Compute, MiniLMEncoder

    compute: Compute | None = next((c for c in ("int8", "float32") if MODEL_IDS[c] == model_id), None)
    return MiniLMEncoder(intra_op_num_threads=intra_op_num_threads, compute=compute)


def load_router(
    path: Path, router: type[SemanticRouter], /, *, encoder: Encoder | None = None, **kwargs: Any
) -> SemanticRouter:
    """The router saved at ``path``, built as ``router`` (the class is passed in: this module and
    :mod:`routegate.routers.semantic` do not import each other)."""
    manifest_file = path / MANIFEST
    manifest = _read_manifest(path)
    expected: dict[str, Any] = manifest["encoder"]
    try:
        routes = tuple(str(r) for r in manifest["routes"])
        version = int(manifest["version"])
        arrays = {name: _load_array(path, spec, name, version) for name, spec in manifest["arrays"].items()}
        head_meta = manifest["head"]
        char: CharHead | None = None
        if head_meta.get("char"):
            char = _char_head(path, head_meta["char"], arrays)
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
            _gaussian(arrays),
        )
        calibration = Calibration.from_dict(manifest["calibration"])
        options: dict[str, Any] = {
            "default_route": str(manifest["default_route"]),
            "clarify_target": _optional_str(manifest.get("clarify_target")),
            "name": str(manifest.get("name") or "semantic"),
        }
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        if isinstance(exc, ConfigurationError):
            raise
        raise ConfigurationError(
            f"{manifest_file}: incomplete or inconsistent saved router ({exc!r}); {_REFIT}"
        ) from exc
    _check_consistent(manifest_file, head)
    if encoder is None:
        from routegate.embed import default_encoder

        encoder = default_encoder()  # the shared instance, unless the router was fitted with another encoder:
        if "file" in expected or expected.get("model_id") != encoder.model_id:
            encoder = _encoder_of(path, expected, None)  # its own fine-tuned model, or MiniLM computing in float32
    if encoder.model_id != expected.get("model_id") or encoder.dim != expected.get("dim"):
        raise ConfigurationError(
            f"{path} was fitted with encoder {expected.get('model_id')!r} ({expected.get('dim')}-dim, "
            f"{_family(expected)}); got {encoder.model_id!r} ({encoder.dim}-dim, {encoder_name(encoder)}) — refit "
            "the router or pass the matching encoder"
        )
    options.update(kwargs)
    return router(head, calibration, encoder=encoder, **options)


def _char_head(path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray[Any, Any]]) -> CharHead:
    lo, hi = int(meta["lo"]), int(meta["hi"])
    if not 1 <= lo <= hi <= _MAX_NGRAM:
        raise ConfigurationError(f"{path / MANIFEST}: char n-gram lengths {lo}..{hi} outside 1..{_MAX_NGRAM}; {_REFIT}")
    vocab_list = read_router_json(
        path, meta.get("vocabulary", "char_vocab.json"), VOCABULARY_MAX_BYTES, what="the char n-gram vocabulary"
    )
    if not isinstance(vocab_list, list):
        raise ConfigurationError(f"{path / str(meta.get('vocabulary'))}: the char n-gram vocabulary is not a list")
    ngrams = CharNgrams({str(g): i for i, g in enumerate(vocab_list)}, arrays["char_idf"].astype(np.float32), lo, hi)
    return CharHead(ngrams, arrays["char_coef"].astype(np.float32), arrays["char_intercept"].astype(np.float32))


def _gaussian(arrays: dict[str, np.ndarray[Any, Any]]) -> Gaussian | None:
    names = ("gauss_whiten", "gauss_centers", "gauss_background_whiten", "gauss_background_center")
    if not any(name in arrays for name in names):
        return None  # saved before the class-conditional scores (format version 1)
    return Gaussian(*(arrays[name].astype(np.float32) for name in names))


def _gauss_arrays(gauss: Gaussian) -> tuple[np.ndarray[Any, Any], ...]:
    return gauss.whiten, gauss.centers, gauss.background_whiten, gauss.background_center


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


def _check_consistent(manifest_file: Path, head: Head) -> None:
    """The arrays fit together: one row per route, one dimension, offsets that cut the example bank."""
    k = len(head.routes)
    if head.coef.ndim != 2 or head.bank.ndim != 2 or head.coef.shape[0] != k:
        raise ConfigurationError(f"{manifest_file}: array shapes do not match {k} routes; {_REFIT}")
    d = head.coef.shape[1]
    if head.intercept.shape != (k,) or head.bank.shape[1:] != (d,) or head.offsets.shape != (k + 1,):
        raise ConfigurationError(f"{manifest_file}: array shapes do not match {k} routes of dimension {d}; {_REFIT}")
    if (
        int(head.offsets[0]) != 0
        or int(head.offsets[-1]) != head.bank.shape[0]
        or bool((np.diff(head.offsets) < 0).any())
    ):
        raise ConfigurationError(f"{manifest_file}: example offsets are inconsistent with the example bank; {_REFIT}")
    if head.knn_k < 1 or not (np.isfinite(head.alpha) and np.isfinite(head.beta)):
        raise ConfigurationError(
            f"{manifest_file}: head parameters out of range (alpha={head.alpha}, beta={head.beta}, "
            f"knn_k={head.knn_k}); {_REFIT}"
        )
    char = head.char
    if char is not None and (char.coef.shape != (k, char.ngrams.size) or char.ngrams.idf.shape != (char.ngrams.size,)):
        raise ConfigurationError(f"{manifest_file}: char n-gram arrays do not match the vocabulary; {_REFIT}")
    if char is not None and char.intercept.shape != (k,):
        raise ConfigurationError(f"{manifest_file}: char n-gram intercepts do not match {k} routes; {_REFIT}")
    gauss = head.gauss
    shapes = ((d, d), (k, d), (d, d), (d,))
    if gauss is not None and tuple(a.shape for a in _gauss_arrays(gauss)) != shapes:
        raise ConfigurationError(f"{manifest_file}: the Gaussians' arrays do not match {k} routes of dimension {d}")
    if gauss is not None and not all(np.isfinite(a).all() for a in _gauss_arrays(gauss)):
        raise ConfigurationError(f"{manifest_file}: the Gaussians' arrays hold NaN or infinite values; {_REFIT}")
