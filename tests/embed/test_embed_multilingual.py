"""The multilingual offline encoder: bundled model, unit vectors, one meaning across languages; a router fitted
with it is rebuilt by name when loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from routegate.embed.choice import encoder_named
from routegate.embed.multilingual import MODEL_ID, MultilingualE5Encoder
from routegate.routers import SemanticRouter
from routegate.routers.persist import encoder_identity

ROUTES = {
    "weather": ["what is the weather today", "will it rain tomorrow", "how hot is it outside"],
    "password": ["I forgot my password", "reset my login", "I cannot sign in to my account"],
}


def test_vectors_are_unit_length_and_a_meaning_crosses_languages() -> None:
    encoder = MultilingualE5Encoder()
    texts = ["What is the weather like today?", "Quel temps fait-il aujourd'hui ?", "Wie ist das Wetter heute?",
             "How do I reset my password?"]  # fmt: skip
    vectors = encoder.encode(texts)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors[0]
    assert similarity[1] > similarity[3] and similarity[2] > similarity[3]
    assert encoder.encode([]).shape == (0, 384)
    assert encoder.encode(["with a \x00 byte"]).shape == (1, 384)


def test_a_router_fitted_with_it_loads_by_name(tmp_path: Path) -> None:
    encoder = encoder_named("multilingual-e5")
    path = SemanticRouter.from_routes(ROUTES, encoder=encoder, default_route="oos").save(tmp_path / "r")
    assert encoder_identity(path) == {"name": "multilingual-e5", "model_id": MODEL_ID, "dim": 384}
    loaded = SemanticRouter.load(path)  # no encoder given: built from the recorded name
    assert isinstance(loaded.encoder, MultilingualE5Encoder)
    assert loaded.route("Va-t-il pleuvoir demain ?").route == "weather"
    assert loaded.route("J'ai oublié mon mot de passe").route == "password"


def test_the_translated_questions_are_the_held_out_ones_in_three_languages() -> None:
    import json

    data = Path(__file__).resolve().parents[1] / "data"
    held_out = [json.loads(line) for line in (data / "support_routes.jsonl").read_text(encoding="utf-8").splitlines()]
    english = {r["text"]: r["route"] for r in held_out if r["split"] == "test"}
    translated = [
        json.loads(line) for line in (data / "support_routes_translated.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(translated) == 3 * len(english)
    for lang in ("fr", "de", "es"):
        rows = [r for r in translated if r["lang"] == lang]
        assert {r["english"]: r["route"] for r in rows} == english
