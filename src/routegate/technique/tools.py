"""Tool calls: a shared pool of MCP clients (the official ``mcp`` SDK) and the tool-call handler.

:class:`MCPToolPool` keeps one client per configured server, opened on first use and closed with the pool.
Each client lives in its own task (the SDK's transports are anyio task groups, which must be entered and left
in the same task); calls reach it through a queue, so callers may use the pool from any task of one event loop.
A server that cannot be started, or dies, ends the call with ``tool_unavailable:<server>`` and is started
again on the next call; a tool that reports an error ends it with ``tool_error:mcp:<server>/<tool>``; a call
over its time limit with ``tool_timeout:mcp:<server>/<tool>``.

:class:`MCPToolHandler` names targets ``mcp:<server>/<tool>``; allowlist them in the dispatcher like any other
target, and give a pydantic schema per target (``schemas=``) to have arguments checked before the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from mcp import Client, MCPError, StdioServerParameters
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict

from routegate.core.stop_reasons import SUCCESS
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError
from routegate.technique import stop_reasons as tsr
from routegate.technique.types import OutputKind, TechniqueItem, ToolCallRequest

logger = logging.getLogger(__name__)

_SERVER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]{0,63}")


@dataclass(frozen=True, slots=True)
class MCPServerConfig:
    """One MCP server: a stdio command (``command`` + ``args``) or a Streamable HTTP ``url``."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    connect_timeout: float = 20.0
    call_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _SERVER_NAME.fullmatch(self.name):
            raise ConfigurationError(f"MCP server name must match {_SERVER_NAME.pattern}, got {self.name!r}")
        if (self.command is None) == (self.url is None):
            raise ConfigurationError(f"MCP server {self.name!r} needs exactly one of command= or url=")
        for what in ("connect_timeout", "call_timeout"):
            value = getattr(self, what)
            if not isinstance(value, int | float) or not 0 < value < 3600:
                raise ConfigurationError(f"MCPServerConfig.{what} must be in (0, 3600) seconds, got {value!r}")

    def client(self) -> Client:
        if self.url is not None:
            return Client(self.url, read_timeout_seconds=self.call_timeout)
        assert self.command is not None  # checked in __post_init__
        params = StdioServerParameters(
            command=self.command, args=list(self.args), env=dict(self.env) if self.env else None, cwd=self.cwd
        )
        return Client(params, read_timeout_seconds=self.call_timeout)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The result of one tool call: the text content, the structured content, and how it ended."""

    server: str
    method: str
    stop_reason: str
    text: str = ""
    structured: object = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.stop_reason == SUCCESS

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"server": self.server, "method": self.method, "stop_reason": self.stop_reason}
        out["text"] = self.text
        if self.structured is not None:
            out["structured"] = self.structured
        if self.message:
            out["message"] = self.message
        return out


_Job = tuple[str, dict[str, Any], "asyncio.Future[CallToolResult]"]


class _Connection:
    """One server's client, owned by one task; jobs arrive through a queue."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.queue: asyncio.Queue[_Job | None] = asyncio.Queue()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.task = asyncio.create_task(self._serve(), name=f"mcp-{config.name}")

    @property
    def alive(self) -> bool:
        return not self.task.done()

    async def _serve(self) -> None:
        try:
            async with self.config.client() as client:
                self.ready.set_result(None)
                while (job := await self.queue.get()) is not None:
                    method, arguments, future = job
                    try:
                        result = await client.call_tool(method, arguments)
                    except MCPError as exc:  # a protocol-level refusal: the session is still usable
                        if not future.done():
                            future.set_exception(exc)
                        continue
                    if not future.done():
                        future.set_result(result)
        except Exception as exc:
            logger.warning("MCP server %s failed: %s", self.config.name, exc)
            if not self.ready.done():
                self.ready.set_exception(exc)
            self._fail_pending(exc)
        else:
            self._fail_pending(ConnectionError("the MCP pool is closed"))

    def _fail_pending(self, exc: BaseException) -> None:
        while not self.queue.empty():
            job = self.queue.get_nowait()
            if job is not None and not job[2].done():
                job[2].set_exception(exc)

    async def close(self) -> None:
        self.queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(self.task), self.config.connect_timeout)
        except TimeoutError:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.ready.done() and not self.ready.cancelled():
            self.ready.exception()  # retrieved, so asyncio does not report it as never retrieved


class MCPToolPool:
    """Shared MCP clients for the configured servers. Use as ``async with MCPToolPool([...]) as pool``."""

    def __init__(self, servers: Iterable[MCPServerConfig]) -> None:
        self._configs: dict[str, MCPServerConfig] = {}
        for config in servers:
            if config.name in self._configs:
                raise ConfigurationError(f"two MCP servers are named {config.name!r}")
            self._configs[config.name] = config
        self._connections: dict[str, _Connection] = {}
        self._lock: asyncio.Lock | None = None

    @property
    def servers(self) -> Mapping[str, MCPServerConfig]:
        return self._configs

    async def __aenter__(self) -> MCPToolPool:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop every server this pool started."""
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()

    async def _connection(self, server: str) -> _Connection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            connection = self._connections.get(server)
            if connection is None or not connection.alive:
                if connection is not None:
                    await connection.close()
                connection = _Connection(self._configs[server])
                self._connections[server] = connection
        await asyncio.wait_for(asyncio.shield(connection.ready), self._configs[server].connect_timeout)
        return connection

    async def call(self, server: str, method: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Call ``method`` on ``server``. Never raises for what the server does; the outcome says how it ended."""
        target = f"mcp:{server}/{method}"
        config = self._configs.get(server)
        if config is None:
            return ToolOutcome(server, method, tsr.tool_unavailable(server), message=f"no MCP server {server!r}")
        try:
            connection = await self._connection(server)
        except Exception as exc:
            message = f"MCP server {server!r} could not be started: {type(exc).__name__}: {exc}"
            return ToolOutcome(server, method, tsr.tool_unavailable(server), message=message)
        future: asyncio.Future[CallToolResult] = asyncio.get_running_loop().create_future()
        connection.queue.put_nowait((method, dict(arguments), future))
        try:
            result = await asyncio.wait_for(future, config.call_timeout)
        except TimeoutError:
            return ToolOutcome(
                server, method, tsr.tool_timeout(target), message=f"call_timeout={config.call_timeout}s reached"
            )
        except MCPError as exc:
            return ToolOutcome(server, method, tsr.tool_error(target), message=f"the server refused the call: {exc}")
        except Exception as exc:
            message = f"MCP server {server!r} failed during the call: {type(exc).__name__}: {exc}"
            return ToolOutcome(server, method, tsr.tool_unavailable(server), message=message)
        text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
        if result.is_error:
            return ToolOutcome(server, method, tsr.tool_error(target), text, result.structured_content, text[:500])
        return ToolOutcome(server, method, SUCCESS, text, result.structured_content)


class ToolArguments(BaseModel):
    """A tool's arguments when no schema is given for its target: any JSON object."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, slots=True)
class MCPToolHandler:
    """Routes tool calls to ``mcp:<server>/<tool>`` targets served by an :class:`MCPToolPool`.

    A call that names no server (``{"name": "search", ...}``) goes to ``default_server``, or to the pool's only
    server; otherwise its target is ``mcp:<tool>``, which no allowlist names, so the policy refuses it.
    """

    pool: MCPToolPool
    default_server: str | None = None
    kind: OutputKind = field(default=OutputKind.TOOL_CALL, init=False)
    prefix: str = field(default="mcp", init=False)

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        if not isinstance(item, ToolCallRequest):
            raise ConfigurationError(f"MCPToolHandler got a {type(item).__name__}, not a ToolCallRequest")
        server = item.server or self.default_server
        if not server and len(self.pool.servers) == 1:
            server = next(iter(self.pool.servers))
        target = f"mcp:{server}/{item.method}" if server else f"mcp:{item.method}"
        return target, dict(item.arguments)

    def schema(self, target: str) -> type[BaseModel] | None:
        return None

    def worker(self, target: str) -> Worker | None:
        server, sep, method = target.partition(":")[2].partition("/")
        if not sep or server not in self.pool.servers or not method:
            return None
        pool = self.pool

        async def call(**arguments: Any) -> ToolOutcome:
            return await pool.call(server, method, arguments)

        return Worker(name=target, fn=call, description=f"MCP tool {method} on {server}", args_model=ToolArguments)


__all__ = ["MCPServerConfig", "MCPToolHandler", "MCPToolPool", "ToolArguments", "ToolOutcome"]
