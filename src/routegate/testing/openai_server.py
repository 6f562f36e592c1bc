"""A scripted OpenAI-compatible HTTP server on loopback: the LLM provider's test double.

It runs the real client path (the ``openai`` SDK, httpx, sockets) against answers a test scripts in advance.
Stdlib only (``http.server.ThreadingHTTPServer`` in a background thread, a free port). Endpoints:

* ``POST /v1/chat/completions`` — plain and ``stream: true`` (SSE chunks in the OpenAI format), with usage; text
  answers (:class:`Reply`, also for ``json_object`` and ``json_schema`` requests) and tool calls
  (:class:`ToolCallReply`, streamed as the API streams them: one delta per call head, then argument pieces);
* ``GET /v1/models`` and ``GET /v1/models/<id>`` — the one scripted model (answered without using a step);
* ``POST /v1/embeddings`` — float or base64 vectors.

Each chat / embeddings request takes the next step of the script (:mod:`routegate.testing.steps`) and every
request is recorded. ``lacks=("tools",)`` (or ``"json_schema"``) plays a server without that output format: such a
request is refused as ``dialect``'s server refuses it (:mod:`routegate.testing.dialects`; no step is used), or, for
a server that ignores the format, answered by the next step as if it had not been asked. The double fails loudly: a request beyond the script (without a ``fallback``) gets HTTP 500
with ``x-should-retry: false`` and is recorded in :attr:`ScriptedOpenAIServer.failures`; :meth:`assert_consumed`
(also run when the ``with`` block ends without an exception) raises if a step was not used or a request failed.

Example::

    with ScriptedOpenAIServer([Reply('{"kind": "route", ...}'), ErrorReply(429)]) as server:
        model = OpenAIChatModel(model="m", api_key=server.api_key, base_url=server.base_url)
        ...
        assert server.requests[0].json_mode
"""

from __future__ import annotations

import array
import base64
import dataclasses
import hashlib
import itertools
import json
import logging
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from routegate.testing.dialects import Dialect, LackedMode, refusal
from routegate.testing.steps import (
    EmbeddingReply,
    ErrorReply,
    Hang,
    RawReply,
    RecordedRequest,
    Reply,
    ScriptItem,
    ServerStep,
    ToolCallReply,
)

logger = logging.getLogger(__name__)

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"
_MAX_BODY = 8 * 1024 * 1024
_POLL_SECONDS = 0.05  # how often serve_forever checks for shutdown (a close costs at most this)
_SOCKET_TIMEOUT = 30.0  # safety net: a client that opens a connection and sends nothing cannot pin a thread


def _tokens(text: str) -> int:
    return len(text.split())


def _hash_vector(text: str, dimensions: int) -> list[float]:
    seed = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [((seed[i % len(seed)] + 31 * (i // len(seed))) % 256) / 127.5 - 1.0 for i in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [v / norm for v in raw]


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads
    block_on_close = True
    scripted: ScriptedOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            # a client that gave up (its timeout) closed the socket while we wrote: expected, not a failure
            logger.debug("scripted server: connection from %s ended early", client_address, exc_info=True)
            return
        self.scripted._fail(f"the scripted server failed on a request: {type(error).__name__}: {error}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = _SOCKET_TIMEOUT
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("scripted server: " + format, *args)

    # -- routing ---------------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        scripted = self.server.scripted
        path = self.path.split("?", 1)[0].rstrip("/")
        scripted._record("GET", path, dict(self.headers.items()), None, b"")
        if path == MODELS_PATH:
            self._json(200, {"object": "list", "data": [scripted._model_card()]})
        elif path == f"{MODELS_PATH}/{scripted.model}":
            self._json(200, scripted._model_card())
        else:
            self._unexpected(404, f"GET {path} is not an endpoint of the scripted server")

    def do_POST(self) -> None:
        scripted = self.server.scripted
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(min(length, _MAX_BODY)) if length > 0 else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = scripted._record("POST", path, dict(self.headers.items()), body, raw)
        if path not in (CHAT_PATH, EMBEDDINGS_PATH):
            self._unexpected(404, f"POST {path} is not an endpoint of the scripted server")
            return
        if not isinstance(body, dict):
            self._unexpected(400, f"POST {path}: the body is not a JSON object ({raw[:80]!r})")
            return
        lacked = next((mode for mode in scripted.lacks if mode == record.output_mode), None)
        if path == CHAT_PATH and lacked is not None:
            refused = refusal(scripted.dialect, lacked, scripted.model)
            if refused is not None:  # refused before any generation: no step is used
                self._answer(record, refused)
                return
            # a server that ignores the format answers as if it had not been asked for
            record = dataclasses.replace(record, body={k: v for k, v in body.items() if k != "response_format"})
        try:
            step = scripted._next_step(record)
        except Exception as exc:  # a scripted responder failed: report it as a test failure, answer 500
            self._unexpected(500, f"the scripted responder raised {type(exc).__name__}: {exc}")
            return
        if step is None:
            self._unexpected(500, f"unexpected request #{len(scripted.requests)}: POST {path} after the script ended")
            return
        self._answer(record, step)

    def do_PUT(self) -> None:
        self._other()

    def do_DELETE(self) -> None:
        self._other()

    def do_PATCH(self) -> None:
        self._other()

    def _other(self) -> None:
        self.server.scripted._record(self.command, self.path, dict(self.headers.items()), None, b"")
        self._unexpected(405, f"{self.command} {self.path} is not supported by the scripted server")

    # -- answers ---------------------------------------------------------------------------------------------
    def _answer(self, record: RecordedRequest, step: ServerStep) -> None:
        scripted = self.server.scripted
        if isinstance(step, Hang):
            scripted._released.wait()
            self.close_connection = True
            return
        if isinstance(step, ErrorReply):
            headers = dict(step.headers)
            if step.retry_after_ms is not None:
                headers.setdefault("retry-after-ms", f"{step.retry_after_ms:g}")
            self._json(step.status, step.body(), headers)
        elif isinstance(step, RawReply):
            self._send(step.status, step.body, step.content_type, dict(step.headers))
        elif record.path == EMBEDDINGS_PATH:
            if not isinstance(step, EmbeddingReply):
                self._unexpected(500, f"POST {EMBEDDINGS_PATH} got scripted {type(step).__name__}")
                return
            self._embeddings(record, step)
        elif not isinstance(step, Reply | ToolCallReply):
            self._unexpected(500, f"POST {CHAT_PATH} got scripted {type(step).__name__}")
        elif record.stream:
            self._stream(record, step)
        else:
            self._json(200, scripted._completion(record, step))

    def _embeddings(self, record: RecordedRequest, step: EmbeddingReply) -> None:
        body = record.body if isinstance(record.body, dict) else {}
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs) if isinstance(inputs, list) else []
        dims = body.get("dimensions")
        dimensions = dims if isinstance(dims, int) and not isinstance(dims, bool) and dims > 0 else step.dimensions
        if step.vectors is not None:
            if len(step.vectors) != len(texts):
                self._unexpected(500, f"embeddings: {len(texts)} inputs but {len(step.vectors)} scripted vectors")
                return
            vectors = [list(v) for v in step.vectors]
        else:
            vectors = [_hash_vector(str(text), dimensions) for text in texts]
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(array.array("f", vec).tobytes()).decode("ascii") if as_base64 else vec,
            }
            for i, vec in enumerate(vectors)
        ]
        tokens = sum(_tokens(str(t)) for t in texts)
        model = record.model or self.server.scripted.model
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self._json(200, {"object": "list", "data": data, "model": model, "usage": usage})

    def _stream(self, record: RecordedRequest, step: Reply | ToolCallReply) -> None:
        scripted = self.server.scripted
        ident, created, model = scripted._ids(record)

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            }

        if isinstance(step, ToolCallReply):
            events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": step.content}, None)]
            for index, (name, arguments) in enumerate(step.arguments()):
                head = {"index": index, "id": f"call_{ident}_{index}", "type": "function"}
                events.append(chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]}, None))
                size = max(1, step.piece_chars)
                for start in range(0, len(arguments), size):
                    piece = {"index": index, "function": {"arguments": arguments[start : start + size]}}
                    events.append(chunk({"tool_calls": [piece]}, None))
        else:
            events = [chunk({"role": "assistant", "content": ""}, None)]
            events += [chunk({"content": piece}, None) for piece in step.pieces()]
        events.append(chunk({}, step.finish_reason))
        options = record.body.get("stream_options") if isinstance(record.body, dict) else None
        if isinstance(options, dict) and options.get("include_usage"):
            events.append(
                {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": scripted._usage(record, step),
                }
            )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in events:
            self._chunk(b"data: " + json.dumps(event).encode("utf-8") + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode("ascii") + data + b"\r\n")

    def _unexpected(self, status: int, message: str) -> None:
        """Answer a request the script did not plan for, and record it as a test failure."""
        self.server.scripted._fail(message)
        body = ErrorReply(status, message=f"routegate.testing: {message}", type="scripted_server_error").body()
        self._json(status, body, {"x-should-retry": "false"})

    def _json(self, status: int, payload: object, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json", dict(headers or {}))

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        self.wfile.write(body)


class ScriptedOpenAIServer:
    """An OpenAI-compatible server on ``127.0.0.1`` that answers from a script; use it as a context manager.

    ``steps`` are consumed in order by chat-completion and embeddings requests; a step may be a callable that
    receives the :class:`RecordedRequest` and returns the step. ``fallback`` answers requests beyond the script
    (for suites that cannot count their calls); without one, such a request is a recorded failure.
    """

    def __init__(
        self,
        steps: Iterable[ScriptItem] = (),
        *,
        model: str = "scripted-model",
        api_key: str = "test-key",
        fallback: ScriptItem | None = None,
        host: str = "127.0.0.1",
        lacks: Collection[LackedMode] = (),
        dialect: Dialect = "vllm",
    ) -> None:
        unknown = set(lacks) - {"tools", "json_schema"}
        if unknown:
            raise ValueError(f"lacks takes 'tools' and 'json_schema', got {sorted(unknown)}")
        self.lacks = frozenset(lacks)
        self.dialect = dialect
        self.model = model
        self.api_key = api_key
        self.host = host
        self._fallback = fallback
        self._steps: deque[ScriptItem] = deque(steps)
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._failures: list[str] = []
        self._released = threading.Event()
        self._counter = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> ScriptedOpenAIServer:
        if self._server is not None:
            raise RuntimeError("the scripted server is already running")
        server = _Server((self.host, 0), _Handler)
        server.scripted = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": _POLL_SECONDS}, name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, release hanging requests, and join every thread. Idempotent."""
        self._released.set()
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = self._thread = None
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        if exc_type is None:
            self.assert_consumed()

    # -- configuration and inspection ------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the scripted server is not running; use 'with ScriptedOpenAIServer(...)'")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``OPENAI_BASE_URL`` of this server (``http://127.0.0.1:<port>/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *steps: ScriptItem) -> None:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._steps)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (model listings included)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == CHAT_PATH]

    @property
    def failures(self) -> list[str]:
        with self._lock:
            return list(self._failures)

    def clear_failures(self) -> None:
        """Forget recorded failures (for a test that provokes an unexpected request on purpose)."""
        with self._lock:
            self._failures.clear()

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if a scripted step was not used or a request was unexpected."""
        with self._lock:
            failures, left = list(self._failures), list(self._steps)
        problems = [f"unexpected request: {failure}" for failure in failures]
        if left:
            problems.append(f"{len(left)} scripted step(s) never requested: {left!r}")
        if problems:
            raise AssertionError("scripted OpenAI server: " + "; ".join(problems))

    # -- used by the handler threads -------------------------------------------------------------------------
    def _record(self, method: str, path: str, headers: dict[str, str], body: Any, raw: bytes) -> RecordedRequest:
        record = RecordedRequest(method, path, {k.lower(): v for k, v in headers.items()}, body, raw)
        with self._lock:
            self._requests.append(record)
        return record

    def _fail(self, message: str) -> None:
        logger.warning("scripted OpenAI server: %s", message)
        with self._lock:
            self._failures.append(message)

    def _next_step(self, record: RecordedRequest) -> ServerStep | None:
        with self._lock:
            item = self._steps.popleft() if self._steps else self._fallback
        if item is None:
            return None
        if callable(item):
            return item(record)
        return item

    def _ids(self, record: RecordedRequest) -> tuple[str, int, str]:
        return f"chatcmpl-scripted-{next(self._counter)}", int(time.time()), record.model or self.model

    def _usage(self, record: RecordedRequest, step: Reply | ToolCallReply) -> dict[str, int]:
        prompt = sum(_tokens(str(m.get("content") or "")) for m in record.messages)
        if isinstance(step, ToolCallReply):
            completion = sum(_tokens(f"{name} {args}") for name, args in step.arguments()) + _tokens(step.content or "")
        else:
            completion = _tokens(step.text or "")
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _completion(self, record: RecordedRequest, step: Reply | ToolCallReply) -> dict[str, Any]:
        ident, created, model = self._ids(record)
        message: dict[str, Any]
        if isinstance(step, ToolCallReply):
            calls = [
                {"id": f"call_{ident}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                for i, (name, args) in enumerate(step.arguments())
            ]
            message = {"role": "assistant", "content": step.content, "refusal": None, "tool_calls": calls}
        else:
            message = {"role": "assistant", "content": step.text, "refusal": None}
        return {
            "id": ident,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": step.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": self._usage(record, step),
        }

    def _model_card(self) -> dict[str, Any]:
        return {"id": self.model, "object": "model", "created": 0, "owned_by": "routegate-testing"}
