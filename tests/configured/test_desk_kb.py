"""``routegate kb ingest --desk DIR``: only changed files are embedded again (content hash), deleted files leave the
knowledge base, and answers follow."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from unittest import mock

import pytest

from routegate.apps.support.factory import open_support_desk
from routegate.cli import main
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

from .conftest import SHOP, desk_init


def _ingest(pg_url: str, data_dir: Path, desk: Path) -> int:
    with mock.patch.dict(os.environ, {"DATABASE_URL": pg_url, "ROUTEGATE_DATA_DIR": str(data_dir)}):
        return main(["kb", "ingest", "--desk", str(desk)])


def test_ingest_is_incremental(
    tmp_path: Path, pg_url: str, encoder: MiniLMEncoder, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SHOP / "docs", docs)
    desk = tmp_path / "kbshop"
    assert desk_init(pg_url, tmp_path, str(desk), "--from-sql", str(SHOP / "shop.sql"), "--kb", str(docs)) == 0
    capsys.readouterr()

    assert _ingest(pg_url, tmp_path, desk) == 0
    assert "4 added, 0 updated, 0 removed, 0 unchanged" in capsys.readouterr().out
    assert _ingest(pg_url, tmp_path, desk) == 0
    assert "0 added, 0 updated, 0 removed, 4 unchanged; 0 chunks embedded" in capsys.readouterr().out

    docs = desk / "docs"  # desk init copied the documents into the desk directory, which reads them there
    shipping = docs / "shipping.md"
    shipping.write_text(
        shipping.read_text(encoding="utf-8").replace("3 to 5 business days", "2 to 4 business days"), encoding="utf-8"
    )
    (docs / "warranty.html").unlink()
    assert _ingest(pg_url, tmp_path, desk) == 0
    out = capsys.readouterr().out
    assert "updated: docs/shipping.md" in out and "removed: docs/warranty.html" in out
    assert "0 added, 1 updated, 1 removed, 2 unchanged" in out

    async def answers() -> None:
        settings = Settings(database_url=pg_url, data_dir=tmp_path)
        async with open_support_desk(settings, desk, encoder=encoder, ingest_on_start=False) as opened:
            assert list(await opened.kb.sources()) == ["docs/payments.txt", "docs/returns.md", "docs/shipping.md"]
            result = await opened.ask("How long does shipping take?", session_id="kb-1")
            assert "From docs/shipping.md" in result.answer and "2 to 4 business days" in result.answer
            passages = await opened.kb.search("How do I make a warranty claim?", top_k=5)
            assert all(p.source != "docs/warranty.html" for p in passages)

    asyncio.run(answers())
