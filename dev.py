#!/usr/bin/env python3
"""Set up and drive routegate from a fresh clone with nothing but Python 3.11+ and pip.

    python3 dev.py run      # create .venv, install the product, start it on the embedded default (routegate up)
    python3 dev.py run triage "..."   # or any other routegate command
    python3 dev.py test     # create .venv, install with the development extras, lint, type check, whole test suite
    python3 dev.py check    # lint + type check only
    python3 dev.py install  # only create/update .venv (with the development extras)

The virtual environment lives in ./.venv and is reinstalled when pyproject.toml changes. ``run`` installs what
``routegate up`` and the README's commands need (the extras server, ui and plot: the desk, the encoder, the HTTP
server, the UI, ``eval --plot``); ``test`` installs the ``dev`` extra (every extra, pytest, mypy, the peers of the
benchmarks...). As root with apt-get, they also install Debian's bubblewrap (the code sandbox) and ``test``
Debian's chromium (the browser test), each announced in one line first.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".routegate-install-stamp"


def _say(message: str) -> None:
    print(f"[dev] {message}", flush=True)


def _run(*args: str | Path, env: dict[str, str] | None = None) -> int:
    return subprocess.call([str(a) for a in args], cwd=ROOT, env=env)


def _install_fingerprint() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


# what ``run`` installs: ``routegate up`` (server includes desk and embed; ui) and the README's commands (eval --plot);
# fit --finetune (train), serve --ray (ray) and the rest say which extra to add when used
RUN_EXTRAS = "server,ui,plot"


def install(extras: str = "dev") -> None:
    """Create .venv and install routegate with ``extras``: :data:`RUN_EXTRAS` (the product: what ``run`` needs)
    or ``dev`` (every extra, tests, type checks, peers for the benchmarks: what ``test`` needs)."""
    if sys.version_info < (3, 11):  # noqa: UP036  # dev.py may be started by an older python3
        sys.exit(f"routegate needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    if not PY.exists():
        _say(f"creating virtual environment in {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    fingerprint = _install_fingerprint()
    stamp = STAMP.read_text().split() if STAMP.exists() else []
    if stamp[:1] == [fingerprint] and (extras in stamp[1:] or "dev" in stamp[1:]):
        return
    what = "its development extras" if extras == "dev" else f"the extras {extras} (no development tools)"
    _say(f"installing routegate with {what} (first run takes a minute)")
    steps = (
        (PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip"),
        (PY, "-m", "pip", "install", "--quiet", "-e", f".[{extras}]"),
    )
    for step in steps:
        if _run(*step) != 0:
            sys.exit("[dev] installation failed: see the pip output above, fix it and run the command again.")
    STAMP.write_text(f"{fingerprint} {extras}")


_APT_UPDATED = False


def _apt_install(package: str, purpose: str, *, skipped: str) -> None:
    """Install a Debian package as root with apt-get, saying so in one line first; ``skipped`` says what the lack
    of it means, when it cannot be installed."""
    global _APT_UPDATED
    _say(f"installing Debian's {package} for {purpose} (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if not _APT_UPDATED:
        _APT_UPDATED = _run("apt-get", "update", "-qq", env=env) == 0
    if not _APT_UPDATED or _run("apt-get", "install", "-y", "-qq", "--no-install-recommends", package, env=env) != 0:
        _say(f"could not install {package}: {skipped}")


def _can_apt() -> bool:
    return sys.platform == "linux" and hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("apt-get"))


def ensure_browser() -> None:
    """The UI end-to-end test drives Debian's headless Chromium; install it when we can (root + apt-get)."""
    if shutil.which("chromium"):
        return
    if not _can_apt():
        _say("no 'chromium' on PATH and no root apt-get: the browser test will be skipped (install chromium to run it)")
        return
    _apt_install("chromium", "the browser test", skipped="the browser test will be skipped")


def ensure_bubblewrap() -> None:
    """The code sandbox runs model-written code under bubblewrap; install Debian's when we can (root + apt-get)."""
    if shutil.which("bwrap") or sys.platform != "linux":
        return
    if not _can_apt():
        _say("no 'bwrap' on PATH and no root apt-get: code runs will stop with sandbox_error:unavailable and the")
        _say("sandbox tests will be skipped (install bubblewrap to run them)")
        return
    _apt_install("bubblewrap", "the code sandbox", skipped="the sandbox tests will be skipped")


# After Ctrl-C, how long the command may take to stop by itself before it gets the signal from us too (a terminal
# sends SIGINT to the whole foreground group, the command included; ``kill -INT <dev.py>`` reaches only us), then
# how long it may take to stop what it started (server, UI, PostgreSQL) before it is killed.
_FORWARD_AFTER = 3.0
_STOP_WITHIN = 30.0


def run(extra: list[str]) -> int:
    install(RUN_EXTRAS)
    ensure_bubblewrap()
    _path_hint()
    args = extra or ["up"]
    return _supervise([str(BIN / "routegate"), *args])


def _path_hint() -> None:
    """Say once per run how to reach ``routegate`` itself: setup puts it in .venv, not on PATH."""
    script = BIN / "routegate"
    found = shutil.which("routegate")
    if found is not None and Path(found).resolve() == script.resolve():
        return  # the virtual environment is active already
    shown, activate = _shown(script), _shown(BIN / "activate")
    _say(f"routegate is in {shown} (not on PATH): `source {activate}` to type `routegate ...`, or run {shown} ...")


def _shown(path: Path) -> str:
    """``path`` as the user can type it from here: relative below the current directory, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _supervise(command: list[str]) -> int:
    """Run ``command`` in the foreground; on SIGINT/SIGTERM let it stop what it started, print one line and
    return 130/143 (no traceback, no kill while it is cleaning up)."""
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        child = subprocess.Popen(command, cwd=ROOT)
        while True:
            try:
                status = child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if received:
                    _stop_child(child, received[0])
                    status = child.wait()
                    break
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        name = signal.Signals(received[0]).name
        _say(f"stopped by {name}")
        return 128 + received[0]
    return status


def _stop_child(child: subprocess.Popen[bytes], signum: int) -> None:
    if signum == signal.SIGTERM:
        child.send_signal(signum)  # nobody else sent it: a terminal never sends SIGTERM
    else:
        try:
            child.wait(timeout=_FORWARD_AFTER)  # it got the terminal's Ctrl-C too: let it stop by itself
            return
        except subprocess.TimeoutExpired:
            child.send_signal(signum)
    try:
        child.wait(timeout=_STOP_WITHIN)
    except subprocess.TimeoutExpired:
        _say(f"the command did not stop within {_STOP_WITHIN:.0f} s: killing it")
        child.kill()


def check() -> int:
    install()
    _say("ruff")
    status = _run(PY, "-m", "ruff", "check", "src", "tests", "bench")
    status |= _run(PY, "-m", "ruff", "format", "--check", "src", "tests", "bench")
    _say("mypy --strict src/routegate")
    status |= _run(PY, "-m", "mypy")
    _say("import-linter")
    status |= _run(BIN / "lint-imports")
    return status


def test(extra: list[str]) -> int:
    status = check()
    ensure_browser()
    ensure_bubblewrap()
    _say("pytest")
    status |= _run(PY, "-m", "pytest", *extra)
    return status


def main() -> int:
    command, *rest = sys.argv[1:] or ["--help"]
    if command == "install":
        install()
        return 0
    if command == "run":
        return run(rest)
    if command == "test":
        return test(rest)
    if command == "check":
        return check()
    print(__doc__)
    return 0 if command in {"-h", "--help", "help"} else 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C while installing: one line, no traceback
        print("\n[dev] interrupted", file=sys.stderr)
        sys.exit(130)
