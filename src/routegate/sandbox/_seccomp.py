"""The sandbox's seccomp filter: a small classic-BPF program built with :mod:`struct` (no libseccomp binding).

The program checks the architecture first (any other ABI, including 32-bit ``int 0x80`` calls and x32 numbers
on x86_64, kills the process), then answers ``EPERM`` for the system calls that would let code leave the
sandbox or reach the kernel's larger attack surfaces: ``execve``/``execveat`` (no other program, and no
``memfd_create`` + exec), ``ptrace``, ``process_vm_*``, ``kcmp`` and the pidfd calls, namespace and mount calls,
``bpf``, ``userfaultfd``, ``perf_event_open``, the key ring, module and kexec loading, ``io_uring``, Landlock,
``modify_ldt``/``iopl``/``ioperm``/``personality``, the clock and host-name setters, NUMA placement,
``syslog``, ``fanotify_init``; ``clone`` with a namespace flag; ``clone3`` answers ``ENOSYS`` (its flags sit
behind a pointer the filter cannot read, and libc falls back to ``clone``). Sockets are an allowlist:
``socket``/``socketpair`` succeed for ``AF_UNIX``, ``AF_INET`` and ``AF_INET6`` only and answer
``EAFNOSUPPORT`` for every other family (``AF_VSOCK``, which no network namespace isolates, ``AF_PACKET``,
``AF_NETLINK``, ``AF_BLUETOOTH``, ``AF_ALG``...). Everything else is allowed: the namespaces, the read-only
mounts and the limits are the rest of the boundary. The refused calls follow what Docker's default profile
refuses, narrowed to what a Python run never needs.

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

MACHINES: Final = ("x86_64", "aarch64")
"""The machines the filter knows, in the order of the numbers in the tables below."""

_DENIED: Final[dict[str, tuple[int | None, int | None]]] = {
    "execve": (59, 221),
    "execveat": (322, 281),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "perf_event_open": (298, 241),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "memfd_create": (319, 279),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "kcmp": (312, 272),
    "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "process_madvise": (440, 440),
    "process_mrelease": (448, 448),
    "landlock_create_ruleset": (444, 444),
    "landlock_add_rule": (445, 445),
    "landlock_restrict_self": (446, 446),
    "modify_ldt": (154, None),
    "iopl": (172, None),
    "ioperm": (173, None),
    "personality": (135, 92),
    "uselib": (134, None),
    "ustat": (136, None),
    "sysfs": (139, None),
    "_sysctl": (156, None),
    "lookup_dcookie": (212, 18),
    "clock_adjtime": (305, 266),
    "clock_settime": (227, 112),
    "settimeofday": (164, 170),
    "adjtimex": (159, 171),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "mbind": (237, 235),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    "set_mempolicy": (238, 237),
    "get_mempolicy": (239, 236),
    "set_mempolicy_home_node": (450, 450),
    "syslog": (103, 116),
    "vhangup": (153, 58),
    "fanotify_init": (300, 262),
    "memfd_secret": (447, 447),
}
"""Answered with ``EPERM``: each call's number on x86_64 and on aarch64 (from the kernel's ``unistd`` tables);
``None`` where the machine has no such call (``modify_ldt`` on aarch64)."""

_INSPECTED: Final[dict[str, tuple[int | None, int | None]]] = {
    "clone": (56, 220),
    "clone3": (435, 435),
    "socket": (41, 198),
    "socketpair": (53, 199),
}
"""Calls the filter answers by their arguments: ``clone`` by its flags, ``socket``/``socketpair`` by the address
family; ``clone3`` is ``ENOSYS``."""

ALLOWED_FAMILIES: Final = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}
"""The only address families ``socket``/``socketpair`` accept; any other is ``EAFNOSUPPORT``."""


def _numbers_on(column: int) -> dict[str, int]:
    """The numbers of one machine's column of the tables, by name (a call the machine lacks is left out)."""
    numbers: dict[str, int] = {}
    for name, both in {**_DENIED, **_INSPECTED}.items():
        number = both[column]
        if number is not None:
            numbers[name] = number
    return numbers


SYSCALLS: Final[dict[str, dict[str, int]]] = {machine: _numbers_on(column) for column, machine in enumerate(MACHINES)}
"""System call numbers per machine, by name."""


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
    for name in denied_syscalls(machine):
        prog += [_insn(_JEQ_K, numbers[name], jt=0, jf=1), _insn(_RET_K, RET_ERRNO | errno.EPERM)]
    families = list(ALLOWED_FAMILIES.values())
    prog += [
        _insn(_JEQ_K, numbers["clone3"], jt=0, jf=1),
        _insn(_RET_K, RET_ERRNO | errno.ENOSYS),
        # socket / socketpair: arg0 is the family, an int (the kernel reads the low 32 bits)
        _insn(_JEQ_K, numbers["socket"], jt=1, jf=0),
        _insn(_JEQ_K, numbers["socketpair"], jt=0, jf=len(families) + 3),
        _insn(_LD_W_ABS, OFFSET_ARG0_LOW),
        *(_insn(_JEQ_K, family, jt=len(families) - index, jf=0) for index, family in enumerate(families)),
        _insn(_RET_K, RET_ERRNO | errno.EAFNOSUPPORT),
        _insn(_RET_K, RET_ALLOW),
        # clone: refused with any namespace flag (the accumulator still holds the call number here)
        _insn(_JEQ_K, numbers["clone"], jt=0, jf=3),
        _insn(_LD_W_ABS, OFFSET_ARG0_LOW),
        _insn(_JSET_K, NAMESPACE_FLAGS, jt=0, jf=1),
        _insn(_RET_K, RET_ERRNO | errno.EPERM),
        _insn(_RET_K, RET_ALLOW),
    ]
    return b"".join(prog)


def denied_syscalls(machine: str | None = None) -> tuple[str, ...]:
    """The names answered with ``EPERM`` on ``machine`` (plus ``clone`` with namespace flags; ``clone3`` is
    ``ENOSYS``; ``socket``/``socketpair`` outside :data:`ALLOWED_FAMILIES` are ``EAFNOSUPPORT``)."""
    numbers = SYSCALLS.get(machine or platform.machine(), {})
    return tuple(name for name in _DENIED if name in numbers)
