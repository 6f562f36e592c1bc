"""The code-block handler: a model's ``code:<language>`` block becomes a run of the sandbox supervisor.

The handler owns the technique side only: the target name, the arguments' schema (non-blank, bounded code) and
the :class:`~routegate.core.workers.Worker` whose value is the run's :class:`~routegate.sandbox.supervisor.CodeRun`.
Starting the run, its limits and its verdict (the ``sandbox_*`` stop reasons) belong to
:class:`~routegate.sandbox.supervisor.SandboxRunner`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, Field

from routegate.core.workers import Worker, WorkerArgs
from routegate.errors import ConfigurationError
from routegate.sandbox.supervisor import CodeRun, SandboxRunner
from routegate.technique.types import CodeBlock, OutputKind, TechniqueItem

MAX_CODE_CHARS = 200_000


class CodeArgs(WorkerArgs):
    """Arguments of a ``code:<language>`` target: the code, non-blank and bounded."""

    code: Annotated[str, Field(min_length=1, max_length=MAX_CODE_CHARS, pattern=r"\S")]


@dataclass(frozen=True, slots=True)
class CodeHandler:
    """Routes code blocks to ``code:<language>`` targets run by a :class:`SandboxRunner`."""

    runner: SandboxRunner = field(default_factory=SandboxRunner)

    @property
    def kind(self) -> OutputKind:
        return OutputKind.CODE_BLOCK

    @property
    def prefix(self) -> str:
        return "code"

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        if not isinstance(item, CodeBlock):
            raise ConfigurationError(f"CodeHandler got a {type(item).__name__}, not a CodeBlock")
        return f"code:{item.language}", {"code": item.code}

    def schema(self, target: str) -> type[BaseModel] | None:
        return CodeArgs

    def worker(self, target: str) -> Worker | None:
        language = target.partition(":")[2]
        if language not in self.runner.languages:
            return None
        runner = self.runner

        async def run_code(code: str) -> CodeRun:
            return await runner.run(code, language)

        return Worker(name=target, fn=run_code, description=f"Run {language} code in the sandbox", args_model=CodeArgs)


__all__ = ["MAX_CODE_CHARS", "CodeArgs", "CodeHandler"]
