"""The sandbox's seccomp filter: a small classic-BPF program built with :mod:`struct` (no libseccomp binding).

The program checks the architecture first (any other ABI, including 32-bit ``int 0x80`` calls and x32 numbers
on x86_64, kills the process), then answers ``EPERM`` for the system calls that would let code leave the
sandbox or reach the kernel's larger attack surfaces: ``execve``/``execveat`` (no other program, and no
``memfd_create`` + exec), ``ptrace`` and ``process_vm_*``, namespace and mount calls, ``bpf``,
``userfaultfd``, ``perf_event_open``, the key ring, module and kexec loading, ``io_uring``; ``clone`` with a
namespace flag; ``clone3`` answers ``ENOSYS`` (its flags sit behind a pointer the filter cannot read, and libc
falls back to ``clone``). Everything else is allowed: the namespaces, the read-only mounts and the limits are
the rest of the boundary.

The sandbox's bootstrap installs the filter on itself (``PR_SET_NO_NEW_PRIVS`` + ``PR_SET_SECCOMP``) after the
interpreter has started and before any sandboxed code runs; it then applies to every thread and child.
"""

from __future__ import annotations

import errno
import platform
import struct
from typing import Final

# classic BPF opcodes (linux/filter.h)
_LD_W_ABS: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K: Final = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K: Final = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K: Final = 0x06  # BPF_RET | BPF_K

RET_KILL_PROCESS: Final = 0x80000000
RET_ERRNO: Final = 0x00050000
RET_ALLOW: Final = 0x7FFF0000

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
OFFSET_NR: Final = 0
OFFSET_ARCH: Final = 4
OFFSET_ARG0_LOW: Final = 16  # little-endian: the low 32 bits of args[0]

X32_SYSCALL_BIT: Final = 0x40000000
NAMESPACE_FLAGS: Final = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

AUDIT_ARCH: Final = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

_DENIED_NAMES: Final = (
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "memfd_create",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
)

SYSCALLS: Final[dict[str, dict[str, int]]] = {
    "x86_64": {
        "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
        "pidfd_getfd": 438, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "keyctl": 250,
        "add_key": 248, "request_key": 249, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "unshare": 272, "setns": 308, "memfd_create": 319, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179,
        "clone": 56, "clone3": 435,
    },
    "aarch64": {
        "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
        "pidfd_getfd": 438, "bpf": 280, "userfaultfd": 282, "perf_event_open": 241, "keyctl": 219,
        "add_key": 217, "request_key": 218, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "unshare": 97, "setns": 268, "memfd_create": 279, "kexec_load": 104, "kexec_file_load": 294,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60,
        "clone": 220, "clone3": 435,
    },
}  # fmt: skip
"""System call numbers per machine (from the kernel's ``unistd`` tables)."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(machine: str | None = None) -> bytes:
    """The filter program for ``machine`` (default: this one) as packed ``struct sock_filter`` entries.

    Raises ``ValueError`` for a machine without a table: the caller refuses to run code there.
    """
    machine = machine or platform.machine()
    if machine not in SYSCALLS:
        raise ValueError(f"no seccomp table for machine {machine!r} (known: {', '.join(sorted(SYSCALLS))})")
    numbers = SYSCALLS[machine]
    prog = [
        _insn(_LD_W_ABS, OFFSET_ARCH),
        _insn(_JEQ_K, AUDIT_ARCH[machine], jt=1, jf=0),
        _insn(_RET_K, RET_KILL_PROCESS),
        _insn(_LD_W_ABS, OFFSET_NR),
    ]
    if machine == "x86_64":
        prog += [_insn(_JGE_K, X32_SYSCALL_BIT, jt=0, jf=1), _insn(_RET_K, RET_KILL_PROCESS)]
    for name in _DENIED_NAMES:
        prog += [_insn(_JEQ_K, numbers[name], jt=0, jf=1), _insn(_RET_K, RET_ERRNO | errno.EPERM)]
    prog += [
        _insn(_JEQ_K, numbers["clone3"], jt=0, jf=1),
        _insn(_RET_K, RET_ERRNO | errno.ENOSYS),
        _insn(_JEQ_K, numbers["clone"], jt=0, jf=3),
        _insn(_LD_W_ABS, OFFSET_ARG0_LOW),
        _insn(_JSET_K, NAMESPACE_FLAGS, jt=0, jf=1),
        _insn(_RET_K, RET_ERRNO | errno.EPERM),
        _insn(_RET_K, RET_ALLOW),
    ]
    return b"".join(prog)


def denied_syscalls() -> tuple[str, ...]:
    """The names answered with ``EPERM`` (plus ``clone`` with namespace flags, and ``clone3`` with ``ENOSYS``)."""
    return tuple(_DENIED_NAMES)
