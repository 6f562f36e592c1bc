"""routegate.sandbox: the supervisor that runs untrusted code under the operating system's boundary.

Bubblewrap namespaces, a seccomp filter, a per-run control group and resource limits; the verdict (a ``sandbox_*``
stop reason) is the supervisor's own observation. It needs nothing from the technique layer above it, which turns
a model's code block into a run (:mod:`routegate.technique.code`). The same names stay importable from
``routegate.technique``.
"""

from routegate.sandbox.supervisor import CodeRun, SandboxLimits, SandboxRunner

__all__ = ["CodeRun", "SandboxLimits", "SandboxRunner"]
