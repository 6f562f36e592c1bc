"""Saving and loading a fitted :class:`~routegate.routers.semantic.SemanticRouter`.

A saved router is a directory: ``manifest.json`` (routes, calibration, head parameters, encoder id, file list)
plus ``.npy`` arrays and the char n-gram vocabulary as JSON. Loading reads arrays with ``allow_pickle=False``, so
a router file from elsewhere cannot run code; every shape is checked against the manifest. Loading takes
milliseconds (the encoder model itself loads lazily on the first query).

A router fitted on a fine-tuned encoder (:mod:`routegate.routers.finetune`) also holds that encoder's int8 ONNX
model (``encoder.onnx``); the manifest's ``encoder`` entry names the file, its hash and its provenance
(``finetune``: base model, data hashes, hyper-parameters, validation figures). Loading it needs onnxruntime only.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from routegate._extras import needs

with needs("embed"):
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
    encoder_meta: dict[str, Any] = {"model_id": router.encoder.model_id, "dim": router.encoder.dim}
    encoder_meta |= _save_finetuned_model(router.encoder, path)
    files = {}
    for name, array in arrays.items():
        np.save(path / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        files[name] = {"file": f"{name}.npy", "shape": list(array.shape), "dtype": str(array.dtype)}
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


def _inside(path: Path, name: object, what: str) -> Path:
    """``path / name`` for a plain file name in the manifest; refused when it points outside the directory."""
    if not isinstance(name, str):
        raise ConfigurationError(f"{path / MANIFEST}: {what} has no file entry")
    file = path / name
    if file.resolve().parent != path.resolve():
        raise ConfigurationError(f"{path / MANIFEST}: {what} points outside the router directory")
    return file


def _load_array(path: Path, spec: Any, name: str) -> np.ndarray[Any, Any]:
    if not isinstance(spec, dict):
        raise ConfigurationError(f"{path / MANIFEST}: array {name!r} has no file entry")
    file = _inside(path, spec.get("file"), f"array {name!r}")
    try:
        array: np.ndarray[Any, Any] = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {file}: {exc}") from exc
    if list(array.shape) != list(spec.get("shape", [])):
        raise ConfigurationError(f"{file}: shape {list(array.shape)} differs from the manifest's {spec.get('shape')}")
    return array


def _read_manifest(path: Path) -> dict[str, Any]:
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
    return manifest


def saved_encoder(path: str | Path, *, intra_op_num_threads: int | None = None) -> Encoder:
    """The encoder the router saved at ``path`` was fitted with: its own fine-tuned model when it holds one,
    otherwise a new embedded MiniLM encoder computing as the one it was fitted with
    (``compute="float32"`` for routers saved before int8 products). ``intra_op_num_threads`` as for
    :class:`~routegate.embed.MiniLMEncoder`."""
    path = Path(path)
    return _encoder_of(path, _read_manifest(path).get("encoder"), intra_op_num_threads)


def _encoder_of(path: Path, expected: object, intra_op_num_threads: int | None) -> Encoder:
    if isinstance(expected, dict) and "file" in expected:
        from routegate.routers.finetune._encoder import FinetunedEncoder

        model = _inside(path, expected["file"], "the encoder model")
        if not model.is_file():
            raise ConfigurationError(f"{path} holds a fine-tuned router but its encoder model {model} is missing")
        card = expected.get("finetune")
        return FinetunedEncoder(
            model,
            model_id=str(expected.get("model_id")),
            card=card if isinstance(card, dict) else None,
            intra_op_num_threads=intra_op_num_threads,
        )
    from routegate.embed.minilm import MODEL_IDS, Compute, MiniLMEncoder

    model_id = expected.get("model_id") if isinstance(expected, dict) else None
    compute: Compute | None = next((c for c in ("int8", "float32") if MODEL_IDS[c] == model_id), None)
    return MiniLMEncoder(intra_op_num_threads=intra_op_num_threads, compute=compute)


def load_router(path: Path, *, encoder: Encoder | None = None, **kwargs: Any) -> SemanticRouter:
    manifest_file = path / MANIFEST
    manifest = _read_manifest(path)
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

        encoder = default_encoder()  # the shared instance, unless the router was fitted with another encoder:
        if isinstance(expected, dict) and ("file" in expected or expected.get("model_id") != encoder.model_id):
            encoder = _encoder_of(path, expected, None)  # its own fine-tuned model, or MiniLM computing in float32
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
