"""A command on a pseudo-terminal, driven as a person at a keyboard would: typed lines, Ctrl-C (the terminal sends
SIGINT to the foreground process group), Ctrl-D (end of input). Stdlib only (``os.openpty`` + ``select``), every
wait bounded."""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import termios
import time
from collections.abc import Sequence
from types import TracebackType

CTRL_C = b"\x03"
CTRL_D = b"\x04"


def _take_terminal() -> None:  # in the child, after setsid: the pty becomes its controlling terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``argv`` running with a pty as its stdin, stdout and stderr and controlling terminal."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str]) -> None:
        self._master, slave = os.openpty()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        self.output = b""

    def read_until(self, marker: bytes, within: float = 60.0) -> bytes:
        """Output up to and including the next ``marker``; fails if the process ends or time runs out first."""
        deadline = time.monotonic() + within
        while marker not in self.output:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} within {within} s; output so far: {self.output!r}"
            if not self._read(min(left, 0.5)) and self.proc.poll() is not None:
                raise AssertionError(f"exited with {self.proc.returncode} before {marker!r}: {self.output!r}")
        end = self.output.index(marker) + len(marker)
        seen, self.output = self.output[:end], self.output[end:]
        return seen

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self._master, 65536)
        except OSError:  # EIO: the child closed its side
            return False
        self.output += chunk
        return bool(chunk)

    def type(self, data: bytes) -> None:
        os.write(self._master, data)

    def until_reading(self, within: float = 30.0) -> None:
        """Wait until the process is blocked reading the terminal (Linux: ``/proc/<pid>/wchan`` is the tty read's
        ``wait_woken``). Python's ``input()`` writes its prompt and then calls ``read()``: a SIGINT that lands
        between the two only marks the handler as pending, and the ``read()`` that follows blocks with it unrun
        until the next signal. A person cannot type that fast; a test that sends Ctrl-C on seeing the prompt can,
        so it waits for the read first. Elsewhere (no ``/proc``) it returns at once."""
        deadline = time.monotonic() + within
        while True:
            try:
                with open(f"/proc/{self.proc.pid}/wchan") as wchan:
                    if wchan.read().strip() == "wait_woken":
                        return
            except OSError:
                return
            assert self.proc.poll() is None, f"exited with {self.proc.returncode}: {self.output!r}"
            assert time.monotonic() < deadline, f"not reading the terminal within {within} s: {self.output!r}"
            time.sleep(0.005)

    def wait(self, within: float = 60.0) -> tuple[int, bytes]:
        """The exit status and the rest of the output; fails if the process is still running after ``within``."""
        deadline = time.monotonic() + within
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, f"still running after {within} s: {self.output!r}"
            self._read(0.2)
        while self._read(0.05):  # what it wrote before exiting
            pass
        return self.proc.returncode, self.output

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self._master)
