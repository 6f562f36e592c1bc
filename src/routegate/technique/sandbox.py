"""Where the code sandbox's names have always been importable: the handler and the supervisor, re-exported.

The supervisor (bubblewrap, seccomp, control group, limits, verdicts) is :mod:`routegate.sandbox.supervisor`;
the handler that turns a code block into a run is :mod:`routegate.technique.code`.
"""

from routegate.sandbox.supervisor import CodeRun, SandboxLimits, SandboxRunner
from routegate.sandbox.supervisor import Mode as Mode
from routegate.technique.code import MAX_CODE_CHARS as MAX_CODE_CHARS
from routegate.technique.code import CodeArgs, CodeHandler

__all__ = ["CodeArgs", "CodeHandler", "CodeRun", "SandboxLimits", "SandboxRunner"]
