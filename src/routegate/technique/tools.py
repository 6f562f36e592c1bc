"""Tool calls: a shared pool of MCP clients (the official ``mcp`` SDK) and the tool-call handler.

:class:`MCPToolPool` keeps one client per configured server, opened on first use and closed with the pool.
Each client lives in its own task (the SDK's transports are anyio task groups, which must be entered and left
in the same task); calls reach it through a queue, so callers may use the pool from any task of one event loop.
A server that cannot be started, or dies, ends the call with ``tool_unavailable:<server>`` and is started
again on the next call; a tool that reports an error ends it with ``tool_error:mcp:<server>/<tool>``; a call
over its time limit with ``tool_timeout:mcp:<server>/<tool>``.

:class:`MCPToolHandler` names targets ``mcp:<server>/<tool>``; allowlist them in the dispatcher like any other
target. Before any part of an output runs, the handler checks each call's arguments against the tool's declared
``inputSchema`` (read once per connection with ``tools/list``, validated with ``jsonschema`` for the schema's
own draft): a tool the server does not list ends with ``tool_error:mcp:<server>/<tool>``, a schema that is not
valid JSON Schema with ``tool_schema_invalid:mcp:<server>/<tool>``, and arguments that do not fit with
``invalid_route:missing_<name>`` or ``invalid_route:bad_args``. An object schema that says nothing about other
properties (no ``additionalProperties``, ``patternProperties`` or ``unevaluatedProperties``) is taken as
closed: an argument it does not name is refused. A pydantic schema per target (``schemas=``) is checked too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from routegate._closing import ClosedOnExit
from routegate._extras import needs
from routegate.core._faults import fault_message

with needs("mcp"):
    from jsonschema import Draft202012Validator, SchemaError, validators
    from jsonschema.exceptions import best_match
    from jsonschema.protocols import Validator
    from mcp import Client, MCPError, StdioServerParameters
    from mcp.types import CallToolResult, TextContent

from routegate.core import stop_reasons as sr
from routegate.core._bounds import check_bounds
from routegate.core.contracts import ArgLimits
from routegate.core.outcome import HasStopReason
from routegate.core.policy import RouteRejection
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
class ToolOutcome(HasStopReason):
    """The result of one tool call: the text content, the structured content, and how it ended."""

    server: str
    method: str
    stop_reason: str
    text: str = ""
    structured: object = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"server": self.server, "method": self.method, "stop_reason": self.stop_reason}
        out["text"] = self.text
        if self.structured is not None:
            out["structured"] = self.structured
        if self.message:
            out["message"] = self.message
        return out


_Job = tuple[Callable[[Client], Awaitable[Any]], "asyncio.Future[Any]"]
_MAX_TOOL_PAGES = 20
_MAX_MESSAGE = 300
_OPEN_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")


class _ToolSchema:
    """One tool's argument check: a validator for its ``inputSchema``, or why the schema cannot be used."""

    __slots__ = ("problem", "validator")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.validator: Validator | None = None
        self.problem = ""
        try:
            cls = validators.validator_for(schema, default=Draft202012Validator)
            cls.check_schema(dict(schema))
            closed = dict(schema)
            if closed.get("type") == "object" and not any(key in closed for key in _OPEN_KEYWORDS):
                closed["additionalProperties"] = False
            self.validator = cls(closed)
        except SchemaError as exc:
            self.problem = f"its inputSchema is not valid JSON Schema: {exc.message[:_MAX_MESSAGE]}"
        except Exception as exc:  # a schema the library cannot even read (an unknown $schema, a bad type...)
            self.problem = f"its inputSchema cannot be used ({type(exc).__name__})"

    def check(self, target: str, args: Mapping[str, Any]) -> RouteRejection | None:
        if self.validator is None:
            return RouteRejection(tsr.tool_schema_invalid(target), f"tool {target!r} is refused: {self.problem}")
        try:
            error = best_match(self.validator.iter_errors(dict(args)))
        except Exception as exc:  # a schema that only fails on some instances (a $ref loop, a bad pattern...)
            logger.warning("inputSchema of %s failed on a call", target, exc_info=exc)
            message = f"tool {target!r} is refused: its inputSchema failed ({type(exc).__name__})"
            return RouteRejection(tsr.tool_schema_invalid(target), message)
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        if error.validator == "required" and not error.absolute_path:
            missing = next((name for name in error.validator_value if name not in args), "")
            if isinstance(missing, str) and missing:
                return RouteRejection(
                    sr.missing_arg(missing), f"tool {target!r}: required argument {missing!r} is missing"
                )
        return RouteRejection(
            sr.invalid_route(sr.BAD_ARGS),
            f"tool {target!r}: {where} does not fit its inputSchema: {error.message[:_MAX_MESSAGE]}",
        )


class _Connection:
    """One server's client, owned by one task; jobs arrive through a queue."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.queue: asyncio.Queue[_Job | None] = asyncio.Queue()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.tools: dict[str, _ToolSchema] | None = None
        self.broken = False
        self.task = asyncio.create_task(self._serve(), name=f"mcp-{config.name}")

    @property
    def alive(self) -> bool:
        return not self.broken and not self.task.done()

    async def _serve(self) -> None:
        try:
            async with self.config.client() as client:
                self.ready.set_result(None)
                while (job := await self.queue.get()) is not None:
                    run, future = job
                    try:
                        result = await run(client)
                    except MCPError as exc:  # a protocol-level refusal: the session is still usable
                        if not future.done():
                            future.set_exception(exc)
                        continue
                    except Exception as exc:  # the session broke: the caller hears it now, not at its timeout
                        self.broken = True  # the next call starts a new connection instead of queueing here
                        if not future.done():
                            future.set_exception(exc)
                        raise
                    if not future.done():
                        future.set_result(result)
        except Exception as exc:
            logger.warning("MCP server %s failed: %s", self.config.name, type(exc).__name__, exc_info=exc)
            if not self.ready.done():
                self.ready.set_exception(exc)
            self._fail_pending(exc)
        else:
            self._fail_pending(ConnectionError("the MCP pool is closed"))

    def _fail_pending(self, exc: BaseException) -> None:
        while not self.queue.empty():
            job = self.queue.get_nowait()
            if job is not None and not job[1].done():
                job[1].set_exception(exc)

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


async def _list_tools(client: Client) -> dict[str, _ToolSchema]:
    tools: dict[str, _ToolSchema] = {}
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        listed = await client.list_tools(cursor=cursor)
        for tool in listed.tools:
            tools.setdefault(tool.name, _ToolSchema(tool.input_schema))
        cursor = listed.next_cursor
        if not cursor:
            break
    return tools


class MCPToolPool(ClosedOnExit):
    """Shared MCP clients for the configured servers. Use as ``async with MCPToolPool([...]) as pool``.

    ``limits`` bound the arguments of every call (:class:`~routegate.core.ArgLimits`), checked before anything
    is sent: over a bound the call ends with ``invalid_route:too_deep`` / ``invalid_route:too_large``.
    """

    def __init__(self, servers: Iterable[MCPServerConfig], *, limits: ArgLimits | None = None) -> None:
        self.limits = limits or ArgLimits()
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

    async def _submit(self, connection: _Connection, run: Callable[[Client], Awaitable[Any]], seconds: float) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        connection.queue.put_nowait((run, future))
        if not connection.alive:  # it died before taking the job: nobody would answer
            connection._fail_pending(ConnectionError(f"MCP server {connection.config.name!r} is not running"))
        return await asyncio.wait_for(future, seconds)

    async def check_arguments(self, server: str, method: str, arguments: Mapping[str, Any]) -> RouteRejection | None:
        """Check ``arguments`` against the tool's ``inputSchema`` (listed once per connection); ``None`` if they fit.

        Never raises: a server that cannot be reached is ``tool_unavailable:<server>``.
        """
        target = f"mcp:{server}/{method}"
        config = self._configs.get(server)
        if config is None:
            return RouteRejection(tsr.tool_unavailable(server), f"no MCP server {server!r}")
        try:
            connection = await self._connection(server)
            if connection.tools is None:
                connection.tools = await self._submit(connection, _list_tools, config.call_timeout)
        except Exception as exc:
            message = fault_message(exc, f"listing the tools of MCP server {server!r}", logger)
            return RouteRejection(tsr.tool_unavailable(server), message)
        assert connection.tools is not None  # listed just above
        tool = connection.tools.get(method)
        if tool is None:
            return RouteRejection(tsr.tool_error(target), f"MCP server {server!r} lists no tool named {method!r}")
        return tool.check(target, arguments)

    async def call(self, server: str, method: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Call ``method`` on ``server``. Never raises for what the server does; the outcome says how it ended.

        The arguments are bounded by :attr:`limits` and must be JSON; they are not checked against the tool's
        ``inputSchema`` here (:meth:`check_arguments` does that; the dispatcher calls it for every part first).
        """
        target = f"mcp:{server}/{method}"
        config = self._configs.get(server)
        if config is None:
            return ToolOutcome(server, method, tsr.tool_unavailable(server), message=f"no MCP server {server!r}")
        breach = check_bounds(arguments, self.limits, json_only=True)
        if breach is not None:
            return ToolOutcome(server, method, sr.invalid_route(breach.detail), message=breach.message)
        try:
            connection = await self._connection(server)
        except Exception as exc:
            message = fault_message(exc, f"starting MCP server {server!r}", logger)
            return ToolOutcome(server, method, tsr.tool_unavailable(server), message=message)
        payload = dict(arguments)

        async def run(client: Client) -> CallToolResult:
            return await client.call_tool(method, payload)

        try:
            result: CallToolResult = await self._submit(connection, run, config.call_timeout)
        except TimeoutError:
            return ToolOutcome(
                server, method, tsr.tool_timeout(target), message=f"call_timeout={config.call_timeout}s reached"
            )
        except MCPError as exc:
            message = f"the server refused the call: {str(exc)[:_MAX_MESSAGE]}"
            return ToolOutcome(server, method, tsr.tool_error(target), message=message)
        except Exception as exc:
            message = fault_message(exc, f"the call to {method!r} on MCP server {server!r}", logger)
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

    async def check_args(self, target: str, args: Mapping[str, Any]) -> RouteRejection | None:
        """The tool's ``inputSchema`` check, run by the dispatcher for every part before any part runs."""
        server, sep, method = target.partition(":")[2].partition("/")
        if not sep or not method:
            return RouteRejection(sr.route_missing(target), f"{target!r} names no MCP server and tool")
        return await self.pool.check_arguments(server, method, args)

    def worker(self, target: str) -> Worker | None:
        server, sep, method = target.partition(":")[2].partition("/")
        if not sep or server not in self.pool.servers or not method:
            return None
        pool = self.pool

        async def call(**arguments: Any) -> ToolOutcome:
            return await pool.call(server, method, arguments)

        return Worker(name=target, fn=call, description=f"MCP tool {method} on {server}", args_model=ToolArguments)


__all__ = ["MCPServerConfig", "MCPToolHandler", "MCPToolPool", "ToolArguments", "ToolOutcome"]
