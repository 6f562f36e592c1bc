"""A desk reads the regular files of its own directory, and nothing else: no symbolic link is followed (at ``desk
init``, at a start, at ``kb ingest``; a link added later is not taken), the paths of ``desk.toml`` stay in the desk
directory, a document's size is checked before it is read, and an error never quotes a foreign file. Attacks through
``routegate desk init``, ``kb ingest``, ``ask --desk``, ``route --desk`` and ``desk check``; the effect read from the
knowledge base's table, the process's memory, the command's output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import psycopg
import pytest

from routegate.cli import main

from .conftest import SHOP, desk_init
from .hostile import hostile_desk

SECRET = "the vault code is 9931-SECRET"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    """A file outside any desk, which the desk's user may read (as /etc/shadow would be for root)."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    path = outside / "private.md"
    path.write_text(f"# Private\n\n{SECRET}\n", encoding="utf-8")
    return path


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "returns.md").write_text("# Returns\n\nReturns are accepted within 30 days.\n", encoding="utf-8")
    return docs


def _run(pg_url: str, data_dir: Path, *argv: str) -> int:
    with mock.patch.dict(os.environ, {"DATABASE_URL": pg_url, "ROUTEGATE_DATA_DIR": str(data_dir)}):
        return main(list(argv))


def _chunks_with_secret(pg_url: str, desk: str) -> int:
    with psycopg.connect(pg_url) as conn:
        found = conn.execute(
            f"SELECT count(*) FROM desk_{desk}_state.kb_chunks WHERE content LIKE '%%SECRET%%'"
        ).fetchone()
    return int(found[0]) if found else 0


def test_desk_init_copies_the_regular_documents_and_passes_a_link_by(
    tmp_path: Path, pg_url: str, secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _docs(tmp_path)
    (docs / "vault.md").symlink_to(secret_file)
    (docs / "more").symlink_to(secret_file.parent, target_is_directory=True)
    desk = tmp_path / "linked"

    assert desk_init(pg_url, tmp_path, str(desk), "--from-sql", str(SHOP / "shop.sql"), "--kb", str(docs)) == 0

    out = capsys.readouterr().out
    assert "docs/returns.md: Returns" in out and "vault.md: " not in out
    assert "not read: docs/vault.md (a symbolic link" in out and "not read: docs/more (a symbolic link" in out
    assert sorted(p.name for p in (desk / "docs").iterdir()) == ["returns.md"]
    assert SECRET not in "".join(p.read_text(encoding="utf-8") for p in desk.rglob("*") if p.is_file())

    assert _run(pg_url, tmp_path, "kb", "ingest", "--desk", str(desk)) == 0
    assert _chunks_with_secret(pg_url, "linked") == 0


def test_a_link_added_later_is_not_taken_at_a_start_or_by_kb_ingest(
    tmp_path: Path, pg_url: str, secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _docs(tmp_path)
    desk = tmp_path / "later"
    assert desk_init(pg_url, tmp_path, str(desk), "--from-sql", str(SHOP / "shop.sql"), "--kb", str(docs)) == 0
    assert _run(pg_url, tmp_path, "kb", "ingest", "--desk", str(desk)) == 0
    capsys.readouterr()

    (desk / "docs" / "vault.md").symlink_to(secret_file)
    assert _run(pg_url, tmp_path, "ask", "--desk", str(desk), "What is the vault code?") == 0  # a start ingests
    assert SECRET not in capsys.readouterr().out
    assert _chunks_with_secret(pg_url, "later") == 0
    assert _run(pg_url, tmp_path, "kb", "ingest", "--desk", str(desk)) == 0

    out = capsys.readouterr().out
    assert "added: docs/vault.md" not in out and "not read: docs/vault.md (a symbolic link" in out
    assert _chunks_with_secret(pg_url, "later") == 0


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("{outside}", "is not relative to the desk directory"),
        ("../elsewhere", "leaves the desk directory (..)"),
        ("docs/../../elsewhere", "leaves the desk directory (..)"),
        ("~/elsewhere", "is not relative to the desk directory"),
        ("linked", "passes through the symbolic link"),
    ],
)
def test_knowledge_paths_stay_in_the_desk_directory(
    tmp_path: Path, pg_url: str, secret_file: Path, capsys: pytest.CaptureFixture[str], entry: str, said: str
) -> None:
    outside = secret_file.parent
    directory = hostile_desk(tmp_path / "desks", "", extra="")
    (directory / "linked").symlink_to(outside, target_is_directory=True)
    toml = (directory / "desk.toml").read_text(encoding="utf-8")
    knowledge = f'[knowledge]\npaths = ["{entry.format(outside=outside)}"]\n\n'
    toml = toml.replace("[[tables]]", knowledge + "[[tables]]", 1)
    toml += '\n[[routes]]\nname = "docs"\nkind = "kb"\nexamples = ["what is the vault code?"]\n'
    (directory / "desk.toml").write_text(toml, encoding="utf-8")

    assert _run(pg_url, tmp_path, "kb", "ingest", "--desk", str(directory)) == 2
    err = capsys.readouterr().err
    assert "knowledge.paths[0]: " in err and said in err and SECRET not in err
    assert main(["route", "--desk", str(directory), "what is the vault code?"]) == 2  # no database: the same check
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("/etc/passwd", "is not relative to the desk directory"),
        ("../passwd.sql", "leaves the desk directory (..)"),
        ("passwd.sql", "passes through the symbolic link"),
    ],
)
def test_the_sql_file_stays_in_the_desk_directory_and_is_never_quoted(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], entry: str, said: str
) -> None:
    directory = hostile_desk(tmp_path / "desks", "")
    (tmp_path / "desks" / "passwd.sql").symlink_to("/etc/passwd")
    (directory / "passwd.sql").symlink_to("/etc/passwd")
    toml = (directory / "desk.toml").read_text(encoding="utf-8").replace('"data.sql"', f'"{entry}"')
    (directory / "desk.toml").write_text(toml, encoding="utf-8")
    first_line = Path("/etc/passwd").read_text(encoding="utf-8").splitlines()[0]

    assert _run(pg_url, tmp_path, "ask", "--desk", str(directory), "hello") == 2

    captured = capsys.readouterr()
    assert f"database.sql_file: '{entry}' {said}" in captured.err
    assert first_line not in captured.err + captured.out and "root:" not in captured.err + captured.out


def test_a_huge_document_is_refused_before_it_is_read(tmp_path: Path, pg_url: str) -> None:
    """A 512 MiB (sparse) document: refused from its size, never read (the process stays small)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("# Fine\n\nA small document.\n", encoding="utf-8")
    with (docs / "huge.md").open("wb") as huge:
        huge.truncate(512 * 1024 * 1024)
    program = (  # VmHWM: this process's peak memory (getrusage's maxrss would keep the forking parent's)
        "import sys\nfrom pathlib import Path\nfrom routegate.cli import main\ncode = main(sys.argv[1:])\n"
        "peak = [l for l in Path('/proc/self/status').read_text().splitlines() if l.startswith('VmHWM:')][0]\n"
        "print('maxrss_kib', peak.split()[1])\nsys.exit(code)\n"
    )
    argv = ["desk", "init", str(tmp_path / "huge"), "--from-sql", str(SHOP / "shop.sql"), "--kb", str(docs)]
    env = {**os.environ, "DATABASE_URL": pg_url, "ROUTEGATE_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", program, *argv], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    assert done.returncode == 2, done.stderr
    assert f"{docs / 'huge.md'} is 536870912 bytes, over the 2097152-byte limit; split it" in done.stderr
    rss_mib = int(done.stdout.split("maxrss_kib")[1]) / 1024
    assert rss_mib < 256, f"the process grew to {rss_mib:.0f} MiB: the document was read"
    assert not (tmp_path / "huge").exists()
