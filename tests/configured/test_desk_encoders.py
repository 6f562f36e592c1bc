"""A desk chooses its encoders in ``desk.toml``: ``[router] encoder`` for the embedding layer, ``[knowledge] encoder``
(default: the router's) for the knowledge base; ``openai`` embeds at the ``ROUTEGATE_EMBEDDINGS_*`` endpoint."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest
from pydantic import SecretStr

from routegate.apps.configured.config import DeskConfigError, builtin_desk_dir, load_config
from routegate.apps.configured.encoders import desk_encoders
from routegate.embed import HashingEncoder, default_encoder
from routegate.embed.openai_encoder import OpenAIEncoder
from routegate.settings import Settings
from routegate.testing import EmbeddingReply, RecordedRequest, ScriptedOpenAIServer

EMBEDDINGS_MODEL = "scripted-embedder"
_WORDS = HashingEncoder(dim=384, char_ngrams=False)
"""What the scripted endpoint embeds with: texts sharing words get close vectors (hash-derived ones would not)."""


def _embed(request: RecordedRequest) -> EmbeddingReply:
    texts = request.body["input"]
    return EmbeddingReply(vectors=tuple(tuple(float(x) for x in row) for row in _WORDS.encode(texts)))


def _desk_with(tmp_path: Path, source: Path, name: str = "shopenc", **encoders: str) -> Path:
    """A copy of the desk at ``source`` (with the SQL file and the docs beside it), called ``name`` (its schemas its
    own), whose ``[router]`` / ``[knowledge]`` tables name ``encoders`` (``router="openai"``)."""
    shutil.copytree(source.parent, tmp_path / "base")
    desk = tmp_path / "base" / source.name
    config = desk / "desk.toml"
    text = re.sub(r"(?m)^encoder\s*=.*\n", "", config.read_text(encoding="utf-8"))
    text = text.replace('name = "shop"', f'name = "{name}"', 1).replace('"desk_shop"', f'"desk_{name}"', 1)
    for table, name in encoders.items():
        line = f'encoder = "{name}"\n'
        header = f"[{table}]\n"
        text = text.replace(header, header + line, 1) if header in text else f"{text}\n{header}{line}"
    config.write_text(text, encoding="utf-8")
    return desk


def test_a_desk_embeds_its_routes_and_its_documents_at_the_endpoint_it_names(
    shop_dir: Path,
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from routegate.cli import main

    desk = _desk_with(tmp_path, shop_dir, router="openai", knowledge="openai")
    config = desk / "desk.toml"  # only the routes' own rules: the embedding layer routes both questions
    config.write_text(config.read_text(encoding="utf-8").replace("[router]\n", "[router]\ngenerated_rules = false\n"))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ROUTEGATE_EMBEDDINGS_DIMENSIONS"):
        monkeypatch.delenv(name, raising=False)  # no chat model: the answers come from the offline path
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path / "data"))
    with ScriptedOpenAIServer(fallback=_embed) as server:
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_MODEL", EMBEDDINGS_MODEL)
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_BASE_URL", server.base_url)
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_API_KEY", server.api_key)
        assert main(["ask", "--desk", str(desk), "--json", "Tell me about shipping"]) == 0
        knowledge = json.loads(capsys.readouterr().out)
        assert main(["route", "--desk", str(desk), "--json", "details of product 102"]) == 0
        routed = json.loads(capsys.readouterr().out)
        requests = server.requests
    assert knowledge["route"] == "VECTOR" and knowledge["stop_reason"] == "success"
    assert knowledge["trace"][0]["layer"] == "semantic"  # routed on the endpoint's vectors
    assert knowledge["answer"].startswith("From docs/shipping.md")  # found on them too
    assert (routed["route"], routed["layer"]) == ("POSTGRES", "semantic")
    embedded = [r for r in requests if r.path.endswith("/embeddings")]
    assert embedded and len(embedded) == len(requests)  # every embedding at the endpoint, nothing else asked
    assert {r.model for r in embedded} == {EMBEDDINGS_MODEL}
    sent = {text for r in embedded for text in r.body["input"]}
    assert "Tell me about shipping" in sent  # the question, for the knowledge search
    assert any("3 to 5 business days" in text for text in sent)  # the documents, at ingest
    assert any(text in sent for text in load_config(desk).routes[0].examples)  # the routes' examples


async def test_a_knowledge_encoder_of_its_own_re_embeds_the_documents_and_recalibrates(
    shop_dir: Path, pg_url: str, tmp_path: Path
) -> None:
    from routegate.apps.support.factory import open_support_desk

    words = HashingEncoder(dim=384, char_ngrams=False)  # the router's, and the documents' at first
    desk = _desk_with(tmp_path, shop_dir, name="shopkb")
    settings = Settings(database_url=pg_url, data_dir=tmp_path / "data")
    async with open_support_desk(settings, desk, encoder=words) as opened:
        assert opened.kb_encoder is opened.encoder and opened.ingested is not None
        assert len(opened.ingested.added) == 4
    config = desk / "desk.toml"
    config.write_text(config.read_text(encoding="utf-8").replace("[knowledge]\n", '[knowledge]\nencoder = "openai"\n'))
    with ScriptedOpenAIServer(fallback=_embed) as server:
        at = settings.model_copy(
            update={
                "embeddings_model": EMBEDDINGS_MODEL,
                "embeddings_base_url": server.base_url,
                "embeddings_api_key": SecretStr(server.api_key),
            }
        )
        async with open_support_desk(at, desk, encoder=words) as opened:
            report = opened.ingested
            assert opened.encoder.inner is words and opened.kb_encoder.model_id == EMBEDDINGS_MODEL
            assert report is not None and len(report.updated) == 4 and report.chunks > 0  # all of them again
            assert report.calibration is not None  # and the cut-off from the new vectors
            async with opened.db.connection() as conn:
                cur = await conn.execute(
                    "SELECT DISTINCT model_id FROM kb_files UNION SELECT model_id FROM kb_calibration"
                )
                assert [r["model_id"] for r in await cur.fetchall()] == [EMBEDDINGS_MODEL]
            result = await opened.ask("Tell me about shipping", session_id="kb-encoder")
        sent = [text for r in server.requests for text in r.body["input"]]
    assert result.route == "VECTOR" and result.answer.startswith("From docs/shipping.md")
    assert "Tell me about shipping" in sent  # the question searched with the knowledge encoder
    assert not any(text in sent for text in load_config(desk).routes[0].examples)  # the router kept its own


def test_a_desk_fits_its_router_with_its_encoder_and_refuses_a_router_of_another(
    shop_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from routegate.cli import main

    desk = _desk_with(tmp_path, shop_dir, router="openai")
    config = desk / "desk.toml"  # only the routes' own rules: the fitted router routes the question
    config.write_text(config.read_text(encoding="utf-8").replace("[router]\n", "[router]\ngenerated_rules = false\n"))
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path / "data"))
    with ScriptedOpenAIServer(fallback=_embed) as server:
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_MODEL", EMBEDDINGS_MODEL)
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_BASE_URL", server.base_url)
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_API_KEY", server.api_key)
        assert main(["fit", "--desk", str(desk), "--no-progress"]) == 0  # with the desk's encoder: no --encoder
        capsys.readouterr()
        assert load_config(desk).router.fitted is not None
        assert main(["route", "--desk", str(desk), "--json", "details of product 102"]) == 0
        routed = json.loads(capsys.readouterr().out)
        config.write_text(config.read_text(encoding="utf-8").replace('encoder = "openai"', 'encoder = "minilm"'))
        assert main(["route", "--desk", str(desk), "details of product 102"]) != 0
        refused = capsys.readouterr().err
    manifest = json.loads((desk / "router" / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["encoder"]["name"], manifest["encoder"]["model_id"]) == ("openai", EMBEDDINGS_MODEL)
    assert routed["route"] == "POSTGRES" and routed["layer"] == "semantic"
    assert f"{config}: router.fitted: " in refused
    assert "was fitted with the 'openai' encoder, not router.encoder = 'minilm'" in refused
    assert f"routegate fit --desk {desk} --encoder minilm" in refused


def test_a_batch_of_route_on_ray_is_embedded_in_one_pass_of_the_encoder_the_desk_names(
    shop_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from routegate.apps.support.routing import batch_router, route_batch

    desk = _desk_with(tmp_path, shop_dir, router="openai")
    config = desk / "desk.toml"  # only the routes' own rules: the embedding layer routes the questions
    config.write_text(config.read_text(encoding="utf-8").replace("[router]\n", "[router]\ngenerated_rules = false\n"))
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path / "data"))
    questions = ["details of product 102", "Tell me about shipping", "what do you sell"]
    with ScriptedOpenAIServer(fallback=_embed) as server:
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_MODEL", EMBEDDINGS_MODEL)
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_BASE_URL", server.base_url)
        monkeypatch.setenv("ROUTEGATE_EMBEDDINGS_API_KEY", server.api_key)
        router, memo, _ = batch_router(Settings(desk=desk))  # what each Ray actor builds
        before = len(server.requests)  # the routes' examples, embedded when the layer was built
        batch = asyncio.run(route_batch(router, memo, [{"text": q} for q in questions], as_json=True))
        asked = server.requests[before:]
    lines = [json.loads(line) for line in batch]
    assert [line["layer"] for line in lines] == ["semantic"] * 3  # routed on the endpoint's vectors
    assert len(asked) == 1 and asked[0].body["input"] == questions  # one pass, at the endpoint the desk names


def test_an_unknown_encoder_is_refused_with_the_file_and_the_known_names(shop_dir: Path, tmp_path: Path) -> None:
    desk = _desk_with(tmp_path, shop_dir, knowledge="openia")
    with pytest.raises(DeskConfigError) as refused:
        load_config(desk)
    message = str(refused.value)
    assert message.startswith(f"{desk / 'desk.toml'}: knowledge.encoder: unknown encoder 'openia'")
    assert "(did you mean 'openai'?)" in message and "choose one of minilm, openai, multilingual-e5" in message


def test_the_endpoint_without_its_settings_is_refused_naming_them(
    shop_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ROUTEGATE_EMBEDDINGS_MODEL", raising=False)
    desk = _desk_with(tmp_path, shop_dir, router="openai")
    with pytest.raises(DeskConfigError) as refused:
        desk_encoders(load_config(desk), desk, Settings())
    message = str(refused.value)
    assert message.startswith(f"{desk / 'desk.toml'}: router.encoder = 'openai': no embeddings model is configured")
    assert "set ROUTEGATE_EMBEDDINGS_MODEL" in message and "ROUTEGATE_EMBEDDINGS_BASE_URL" in message


def test_a_knowledge_encoder_of_its_own_is_a_second_encoder_and_a_shared_name_one(
    shop_dir: Path, tmp_path: Path
) -> None:
    settings = Settings(
        embeddings_model=EMBEDDINGS_MODEL, embeddings_base_url="http://127.0.0.1:9/v1", embeddings_api_key="local"
    )
    desk = _desk_with(tmp_path / "own", shop_dir, knowledge="openai")
    router, knowledge = desk_encoders(load_config(desk), desk, settings)
    assert router is default_encoder() and isinstance(knowledge, OpenAIEncoder)
    assert knowledge.model_id == EMBEDDINGS_MODEL
    desk = _desk_with(tmp_path / "both", shop_dir, router="openai", knowledge="openai")
    router, knowledge = desk_encoders(load_config(desk), desk, settings)
    assert isinstance(router, OpenAIEncoder) and knowledge is router


def test_the_default_desk_embeds_as_before(tmp_path: Path) -> None:
    config = load_config(builtin_desk_dir())
    assert config.router.encoder is None and config.knowledge.encoder is None
    router, knowledge = desk_encoders(config, builtin_desk_dir(), Settings())
    assert router is default_encoder() and knowledge is router  # the process-wide MiniLM, once
    given = HashingEncoder(dim=16)
    assert desk_encoders(config, builtin_desk_dir(), Settings(), given) == (given, given)
