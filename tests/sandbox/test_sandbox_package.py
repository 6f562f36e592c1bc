"""The supervisor is a package of its own: it loads nothing of the technique layer, and the names it moved out of
``routegate.technique.sandbox`` are the very same objects at every old import path, stop reasons byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import routegate.technique as technique
import routegate.technique.sandbox as technique_sandbox
from routegate import sandbox
from routegate.sandbox import stop_reasons as sandbox_reasons
from routegate.technique import stop_reasons as technique_reasons

PINNED_REASONS = {
    "SANDBOX_TIMEOUT_WALL": "sandbox_timeout:wall",
    "SANDBOX_TIMEOUT_CPU": "sandbox_timeout:cpu",
    "SANDBOX_MEMORY": "sandbox_memory:limit",
    "SANDBOX_FILESIZE": "sandbox_filesize:limit",
    "SANDBOX_NETWORK": "sandbox_network:blocked",
    "SANDBOX_FILESYSTEM": "sandbox_filesystem:write_outside",
    "SANDBOX_PROCESSES": "sandbox_processes:limit",
    "SANDBOX_EXEC": "sandbox_processes:exec_blocked",
    "SANDBOX_SIGNAL": "sandbox_processes:signal_blocked",
    "SANDBOX_NATIVE": "sandbox_native:blocked",
    "SANDBOX_INTROSPECTION": "sandbox_introspection:blocked",
    "SANDBOX_UNAVAILABLE": "sandbox_error:unavailable",
    "SANDBOX_SETUP_FAILED": "sandbox_error:setup_failed",
}


def test_importing_the_supervisor_loads_nothing_of_the_technique_layer() -> None:
    code = (
        "import json, sys\nimport routegate.sandbox\nfrom routegate.sandbox import SandboxRunner\n"
        "SandboxRunner().missing()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('routegate.'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "routegate.sandbox.supervisor" in loaded
    assert [m for m in loaded if m.startswith("routegate.technique")] == []


@pytest.mark.parametrize("name", ["CodeRun", "SandboxLimits", "SandboxRunner"])
def test_a_supervisor_name_is_the_same_object_at_every_import_path(name: str) -> None:
    assert getattr(technique, name) is getattr(sandbox, name) is getattr(technique_sandbox, name)


@pytest.mark.parametrize("name", ["CodeArgs", "CodeHandler"])
def test_the_handler_stays_importable_from_the_technique_layer(name: str) -> None:
    assert getattr(technique, name) is getattr(technique_sandbox, name)
    assert getattr(technique, name).__module__ == "routegate.technique.code"


def test_the_old_module_keeps_its_exports() -> None:
    assert sorted(technique_sandbox.__all__) == ["CodeArgs", "CodeHandler", "CodeRun", "SandboxLimits", "SandboxRunner"]
    assert technique_sandbox.MAX_CODE_CHARS == 200_000


@pytest.mark.parametrize(("name", "value"), sorted(PINNED_REASONS.items()))
def test_every_sandbox_stop_reason_is_the_same_string_from_both_modules(name: str, value: str) -> None:
    assert getattr(sandbox_reasons, name) == getattr(technique_reasons, name) == value


def test_the_built_sandbox_stop_reasons_are_unchanged() -> None:
    for module in (sandbox_reasons, technique_reasons):
        assert module.sandbox_exit(3) == "sandbox_exit:3"
        assert module.sandbox_signal("SIGSEGV") == "sandbox_signal:SIGSEGV"
        assert module.sandbox_error("start_failed") == "sandbox_error:start_failed"
    assert technique_reasons.VIOLATIONS is sandbox_reasons.VIOLATIONS
    assert technique_reasons.VIOLATIONS["exec"] == "sandbox_processes:exec_blocked"
