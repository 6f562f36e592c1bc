"""Embeddings from an OpenAI-compatible endpoint: batches, checked answers, every failure named; a router fitted
with it records it, loads with it and refuses any other encoder."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest

from routegate.cli import main
from routegate.embed import HashingEncoder, MiniLMEncoder, OpenAIEncoder
from routegate.embed.errors import (
    EmbeddingAnswerError,
    EmbeddingAuthError,
    EmbeddingBadRequestError,
    EmbeddingConnectError,
    EmbeddingError,
    EmbeddingTimeoutError,
    EmbeddingUpstreamError,
)
from routegate.errors import ConfigurationError
from routegate.routers import SemanticRouter
from routegate.routers.persist import encoder_identity
from routegate.settings import Settings
from routegate.testing import EmbeddingReply, ErrorReply, Hang, RawReply, ScriptedOpenAIServer

ROUTES = {
    "billing": ["refund my last charge", "I was billed twice", "update my credit card", "cancel my invoice"],
    "tech": ["the app crashes on start", "I cannot log in", "reset my password", "the page will not load"],
}


def _encoder(server: ScriptedOpenAIServer, **options: object) -> OpenAIEncoder:
    return OpenAIEncoder(model="embed-small", api_key=server.api_key, base_url=server.base_url, **options)  # type: ignore[arg-type]


def _body(data: list[dict[str, object]]) -> bytes:
    return json.dumps({"object": "list", "data": data, "model": "embed-small", "usage": {}}).encode()


def test_texts_go_in_batches_and_come_back_unit_length_in_order() -> None:
    with ScriptedOpenAIServer(fallback=EmbeddingReply(dimensions=8)) as server:
        encoder = _encoder(server, batch_size=2)
        texts = ["a", "b", "c", "d", "e"]
        vectors = encoder.encode(texts)
        assert vectors.shape == (5, 8) and vectors.dtype == np.float32
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
        assert np.allclose(encoder.encode(["c"])[0], vectors[2])  # batch mates change nothing
        bodies = [r.body for r in server.requests if r.path == "/v1/embeddings"]
        assert [b["input"] for b in bodies[:3]] == [["a", "b"], ["c", "d"], ["e"]]
        assert all(b["model"] == "embed-small" and b["encoding_format"] == "float" for b in bodies)
        assert "dimensions" not in bodies[0]
        assert encoder.dim == 8 and encoder.model_id == "embed-small" and encoder.name == "openai"
        assert encoder.encode([]).shape == (0, 8)


async def test_aencode_embeds_from_a_coroutine() -> None:
    with ScriptedOpenAIServer(fallback=EmbeddingReply(dimensions=8)) as server:
        encoder = _encoder(server, dimensions=8)
        vectors = await encoder.aencode(["a", "b"])
        assert np.allclose(vectors, encoder.encode(["a", "b"]))
        await encoder.aclose()


def test_the_dimension_is_asked_once_when_unknown_and_sent_when_asked() -> None:
    with ScriptedOpenAIServer(fallback=EmbeddingReply(dimensions=12)) as server:
        assert _encoder(server).dim == 12
        assert server.requests[-1].body["input"] == ["dimension probe"]
        shortened = _encoder(server, dimensions=6, request_dimensions=True)
        assert shortened.encode(["x"]).shape == (1, 6)
        assert server.requests[-1].body["dimensions"] == 6


@pytest.mark.parametrize(
    ("step", "error", "says"),
    [
        (EmbeddingReply(dimensions=16), EmbeddingAnswerError, "16-dim vectors; this encoder's are 8-dim"),
        (RawReply(_body([{"index": 0, "embedding": [1.0] * 8}])), EmbeddingAnswerError, "1 vectors for 2 texts"),
        (
            RawReply(_body([{"index": 0, "embedding": [1.0] * 8}, {"index": 0, "embedding": [1.0] * 8}])),
            EmbeddingAnswerError,
            "index 0",
        ),
        (
            RawReply(_body([{"index": i, "embedding": [0.0] * 8} for i in range(2)])),
            EmbeddingAnswerError,
            "zero vector",
        ),
        (
            RawReply(_body([{"index": i, "embedding": ["x"] * 8} for i in range(2)])),
            EmbeddingAnswerError,
            "lists of numbers",
        ),
        (
            RawReply(_body([{"index": 0, "embedding": [1.0] * 8}, {"index": 1, "embedding": [1.0] * 7}])),
            EmbeddingAnswerError,
            "one length",
        ),
        (
            RawReply(b'{"data": [{"index": 0, "embedding": [1e999]}, {"index": 1, "embedding": [1.0]}]}'),
            EmbeddingAnswerError,
            "not finite",
        ),
        (ErrorReply(401), EmbeddingAuthError, "refused the key"),
        (ErrorReply(400, "model 'nope' not found"), EmbeddingBadRequestError, "model 'nope' not found"),
    ],
)
def test_a_bad_answer_or_a_refusal_is_named(step: object, error: type[EmbeddingError], says: str) -> None:
    with ScriptedOpenAIServer([step]) as server:  # type: ignore[list-item]
        encoder = _encoder(server, dimensions=8 if "16-dim" in says else None)
        with pytest.raises(error, match=says) as raised:
            encoder.encode(["first", "second"])
    assert raised.value.reason.startswith("embed_error:")
    assert "embeddings endpoint http://127.0.0.1" in str(raised.value)


def test_server_errors_are_retried_then_named() -> None:
    with (
        ScriptedOpenAIServer([ErrorReply(500), ErrorReply(503)]) as server,
        pytest.raises(EmbeddingUpstreamError, match="503"),
    ):
        _encoder(server, max_retries=1).encode(["x"])


def test_no_answer_in_time_and_no_server_are_named() -> None:
    with ScriptedOpenAIServer([Hang()]) as server, pytest.raises(EmbeddingTimeoutError, match=r"within 0\.5s"):
        _encoder(server, timeout=0.5, max_retries=0).encode(["x"])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(EmbeddingConnectError, match="could not be reached"):
            OpenAIEncoder(model="m", api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0).encode(["x"])


def test_misconfiguration_is_refused_when_built() -> None:
    for options, says in [
        ({"model": ""}, "needs a model name"),
        ({"api_key": " "}, "needs an API key"),
        ({"batch_size": 0}, "batch_size must be"),
        ({"timeout": float("inf")}, "timeout must be"),
        ({"dimensions": True}, "dimensions must be"),
        ({"request_dimensions": True}, "needs dimensions"),
        ({"base_url": "localhost:11434"}, "ROUTEGATE_EMBEDDINGS_BASE_URL must be an http"),
    ]:
        with pytest.raises(ConfigurationError, match=says):
            OpenAIEncoder(**{"model": "m", "api_key": "k", **options})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ROUTEGATE_EMBEDDINGS_MODEL"):
        OpenAIEncoder.from_settings(Settings())


def test_settings_build_the_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_MODEL", "nomic-embed-text")
    monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_BATCH_SIZE", "16")
    monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_TIMEOUT_SECONDS", "5")
    monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_DIMENSIONS", "768")
    encoder = OpenAIEncoder.from_settings(Settings())
    assert (encoder.model, encoder.base_url, encoder.batch_size, encoder.timeout, encoder.dim) == (
        "nomic-embed-text",
        "http://127.0.0.1:11434/v1",
        16,
        5.0,
        768,
    )


def test_an_endpoint_router_is_fitted_saved_loaded_and_refused_with_another_encoder(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(fallback=EmbeddingReply(dimensions=16)) as server:
        encoder = _encoder(server)
        router = SemanticRouter.from_routes(ROUTES, encoder=encoder, default_route="oos")
        path = router.save(tmp_path / "router")
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["encoder"] == {"name": "openai", "model_id": "embed-small", "dim": 16, "identity": 1}
        assert encoder_identity(path) == {"name": "openai", "model_id": "embed-small", "dim": 16}
        loaded = SemanticRouter.load(path, encoder=_encoder(server))
        assert loaded.route("I was billed twice").route == router.route("I was billed twice").route == "billing"
        with pytest.raises(
            ConfigurationError, match=r"fitted with encoder 'embed-small' \(16-dim, openai\); got 'other'"
        ):
            SemanticRouter.load(
                path, encoder=OpenAIEncoder(model="other", api_key="k", base_url=server.base_url, dimensions=16)
            )
        with pytest.raises(ConfigurationError, match=r"fitted with encoder 'embed-small'.*got 'hashing-16"):
            SemanticRouter.load(path, encoder=HashingEncoder(dim=16, char_ngrams=False))
        with pytest.raises(ConfigurationError, match="fitted with the embeddings endpoint model 'embed-small': pass"):
            SemanticRouter.load(path)


def test_a_router_saved_before_encoder_names_loads_as_minilm(tmp_path: Path) -> None:
    encoder = MiniLMEncoder()
    path = SemanticRouter.from_routes(ROUTES, encoder=encoder, default_route="oos").save(tmp_path / "old")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["encoder"]["name"] == "minilm"
    del manifest["encoder"]["name"], manifest["encoder"]["identity"]  # what routegate wrote before
    (path / "manifest.json").write_text(json.dumps(manifest))
    assert encoder_identity(path)["name"] == "minilm"
    assert SemanticRouter.load(path).route("I was billed twice").route == "billing"


def test_fit_and_eval_with_the_endpoint_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [(t, label) for label, texts in ROUTES.items() for t in texts]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in rows))
    with ScriptedOpenAIServer(fallback=EmbeddingReply(dimensions=16)) as server:
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_BASE_URL", server.base_url)
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_MODEL", "embed-small")
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_API_KEY", server.api_key)
        out = tmp_path / "router"
        assert main(["fit", "--train", str(data), "-o", str(out), "--encoder", "openai", "--no-progress"]) == 0
        assert encoder_identity(out)["name"] == "openai"
        capsys.readouterr()
        assert main(["eval", str(data), "--router", str(out), "--json", "--no-progress"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["n_in_scope"] == len(rows)
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_MODEL", "another-model")
        assert main(["eval", str(data), "--router", str(out), "--no-progress"]) == 2
        assert "fitted with encoder 'embed-small' (16-dim, openai); got 'another-model'" in capsys.readouterr().err
