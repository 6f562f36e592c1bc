"""The seccomp program, evaluated instruction by instruction: architecture first, the deny list, socket families.

A small classic-BPF interpreter (only the opcodes the builder emits; any other fails the test) runs the
program against ``struct seccomp_data`` values, the way the kernel does. The real kernel is exercised by the
hostile corpus (tests/technique/test_technique_sandbox_hostile.py).
"""

from __future__ import annotations

import errno
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routegate.sandbox._seccomp import (
    ALLOWED_FAMILIES,
    AUDIT_ARCH,
    RET_ALLOW,
    RET_ERRNO,
    RET_KILL_PROCESS,
    SYSCALLS,
    build_filter,
    denied_syscalls,
)

EPERM = RET_ERRNO | errno.EPERM
ENOSYS = RET_ERRNO | errno.ENOSYS
EAFNOSUPPORT = RET_ERRNO | errno.EAFNOSUPPORT
FAMILIES = {"AF_VSOCK": 40, "AF_PACKET": 17, "AF_NETLINK": 16, "AF_BLUETOOTH": 31, "AF_ALG": 38, "AF_KEY": 15}
I386 = 0x40000003


def evaluate(program: bytes, nr: int, arch: int, arg0: int = 0) -> int:
    """Run the filter on one system call (x86_64/aarch64 layout of ``struct seccomp_data``, little-endian)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack_from("=HBBI", program, offset) for offset in range(0, len(program), 8)]
    pc, acc = 0, 0
    for _ in range(len(insns)):
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            hit = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x} at {pc}")
    raise AssertionError("the program ran off its end")


@pytest.mark.parametrize("machine", sorted(SYSCALLS))
def test_every_denied_call_is_eperm_and_ordinary_calls_pass(machine: str) -> None:
    program, numbers, arch = build_filter(machine), SYSCALLS[machine], AUDIT_ARCH[machine]
    assert len(denied_syscalls(machine)) >= 65
    for name in denied_syscalls(machine):
        assert evaluate(program, numbers[name], arch) == EPERM, name
    assert evaluate(program, numbers["clone3"], arch) == ENOSYS
    assert evaluate(program, 0, arch) == RET_ALLOW  # read (x86_64) / io_setup (aarch64)
    assert evaluate(program, numbers["clone"], arch, arg0=0x01200011) == RET_ALLOW  # fork()'s flags
    assert evaluate(program, numbers["clone"], arch, arg0=0x003D0F00) == RET_ALLOW  # a thread's flags
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert evaluate(program, numbers["clone"], arch, arg0=flag | 17) == EPERM, hex(flag)


@pytest.mark.parametrize("machine", sorted(SYSCALLS))
def test_sockets_are_an_allowlist_of_families(machine: str) -> None:
    program, numbers, arch = build_filter(machine), SYSCALLS[machine], AUDIT_ARCH[machine]
    for call in ("socket", "socketpair"):
        for family in ALLOWED_FAMILIES.values():
            assert evaluate(program, numbers[call], arch, arg0=family) == RET_ALLOW, (call, family)
        for name, family in FAMILIES.items():
            assert evaluate(program, numbers[call], arch, arg0=family) == EAFNOSUPPORT, (call, name)
        assert evaluate(program, numbers[call], arch, arg0=(1 << 32) | 40) == EAFNOSUPPORT  # the kernel reads an int
    for name in ("modify_ldt", "personality", "kcmp", "pidfd_open", "landlock_create_ruleset"):
        if name in numbers:
            assert name in denied_syscalls(machine)


@given(family=st.integers(min_value=0, max_value=2**64 - 1))
def test_any_family_outside_the_allowlist_is_refused(family: int) -> None:
    program, numbers = build_filter("x86_64"), SYSCALLS["x86_64"]
    allowed = (family & 0xFFFFFFFF) in ALLOWED_FAMILIES.values()
    for call in ("socket", "socketpair"):
        answer = evaluate(program, numbers[call], AUDIT_ARCH["x86_64"], arg0=family)
        assert answer == (RET_ALLOW if allowed else EAFNOSUPPORT)


def test_the_architecture_is_checked_first() -> None:
    program = build_filter("x86_64")
    assert evaluate(program, 0, I386) == RET_KILL_PROCESS  # 32-bit int 0x80: other numbers, other meanings
    assert evaluate(program, 59, AUDIT_ARCH["aarch64"]) == RET_KILL_PROCESS
    assert evaluate(program, 0x40000000 | 59, AUDIT_ARCH["x86_64"]) == RET_KILL_PROCESS  # x32 execve


def test_an_unknown_machine_is_refused() -> None:
    with pytest.raises(ValueError, match="no seccomp table for machine 'riscv64'"):
        build_filter("riscv64")


@given(nr=st.integers(min_value=0, max_value=2**31 - 1), arch=st.integers(min_value=0, max_value=2**32 - 1))
def test_any_call_ends_in_one_of_the_five_answers(nr: int, arch: int) -> None:
    program = build_filter("x86_64")
    answer = evaluate(program, nr, arch)
    denied = {SYSCALLS["x86_64"][name] for name in denied_syscalls("x86_64")}
    if arch != AUDIT_ARCH["x86_64"] or nr >= 0x40000000:
        assert answer == RET_KILL_PROCESS
    elif nr in denied:
        assert answer == EPERM
    elif nr == SYSCALLS["x86_64"]["clone3"]:
        assert answer == ENOSYS
    elif nr in (SYSCALLS["x86_64"]["socket"], SYSCALLS["x86_64"]["socketpair"]):
        assert answer == EAFNOSUPPORT  # family 0 (AF_UNSPEC) is not on the allowlist
    else:
        assert answer == RET_ALLOW  # clone is only refused with a namespace flag, and arg0 is 0 here
