"""What the README and the docs tell a newcomer matches what they meet: how to reach ``routegate`` after setup
(README, and ``dev.py run`` says it once), and the settings' names (the ones ``Settings`` reads)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from routegate.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_says_how_to_reach_routegate_right_after_setup() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup_end = text.index("```", text.index("python3 dev.py test"))
    next_block = text.index("```", setup_end + 3)
    after_setup = text[setup_end:next_block]
    first_paragraph = after_setup.split("\n\n")[1]
    assert "source .venv/bin/activate" in first_paragraph
    assert ".venv/bin/routegate" in first_paragraph


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_under_test", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_py_run_says_once_how_to_reach_routegate(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dev = load_dev()
    monkeypatch.setattr(dev, "install", lambda extras: None)  # this interpreter's environment is set up already
    monkeypatch.setattr(dev, "ensure_bubblewrap", lambda: None)
    monkeypatch.setattr(dev, "BIN", Path(sys.executable).parent)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # not activated
    monkeypatch.chdir(tmp_path)  # the environment is not below here (in a clone it is below ROOT: shown relative)
    assert dev.run(["--version"]) == 0  # the real `routegate --version`, supervised as `dev.py run` does
    out = capfd.readouterr().out
    hints = [line for line in out.splitlines() if "not on PATH" in line]
    assert len(hints) == 1, out
    bin_dir = Path(sys.executable).parent  # not below the current directory: shown in full
    assert f"`source {bin_dir / 'activate'}`" in hints[0] and f"run {bin_dir / 'routegate'}" in hints[0]
    assert "routegate " in out.split(hints[0])[1]  # then the command itself ran


def _settings_table(page: str) -> list[str]:
    section = page.split("## Settings (environment)", 1)[1].split("\n## ", 1)[0]
    names = []
    for row in section.splitlines():
        if row.startswith("| `"):
            names += re.findall(r"`(ROUTEGATE_[A-Z_]+)`", row.split("|")[1])
    return names


def test_the_settings_tables_name_what_settings_reads() -> None:
    fields = {f"ROUTEGATE_{name.upper()}" for name in Settings.model_fields}
    table = _settings_table((ROOT / "docs" / "server.md").read_text(encoding="utf-8"))
    assert table and set(table) <= fields, set(table) - fields
    assert "ROUTEGATE_MAX_MESSAGE_CHARS" in table  # the name README gives, the field the CLI, API and HTTP read
    assert "ROUTEGATE_SERVER_MAX_MESSAGE_CHARS" not in table  # the former name, still read, is not the one to set
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    configuration = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    assert "`ROUTEGATE_MAX_MESSAGE_CHARS`" in configuration
