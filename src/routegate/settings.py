"""Settings: one pydantic-settings object, loaded once at the entry point and passed down.

Library code never reads ``os.environ``; the CLI and the server build :class:`Settings` and hand the parts to
the components they wire. Variables: the conventional ``OPENAI_*`` and ``DATABASE_URL``, and ``ROUTEGATE_*``
for everything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from routegate.core.messages import DEFAULT_MAX_MESSAGE_CHARS


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("routegate", appauthor=False))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ROUTEGATE_", extra="ignore", populate_by_name=True)

    # LLM (any OpenAI-compatible endpoint); no key means offline mode
    openai_api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_BASE_URL"))
    openai_model: str = Field(default="gpt-4.1-mini", validation_alias=AliasChoices("OPENAI_MODEL"))
    openai_timeout_seconds: float = Field(default=60.0, gt=0, validation_alias=AliasChoices("OPENAI_TIMEOUT_SECONDS"))
    openai_max_retries: int = Field(default=2, ge=0, le=10)
    # after a failure that says the model endpoint is away (connect, timeout, auth, 429/5xx after the retries), its
    # calls fail at once for this many seconds (the desk answers offline), then one trial call goes through; 0 = off
    llm_breaker_seconds: float = Field(default=30.0, ge=0, le=3600)

    # an OpenAI-compatible embeddings endpoint (routegate fit --encoder openai; a desk's [router] / [knowledge]
    # encoder = "openai"): the model's name, and where (unset: OPENAI_BASE_URL, then OpenAI) with which key (unset:
    # OPENAI_API_KEY); texts per request, seconds per request, and the vectors' dimension when known (checked on
    # every answer; unset: learnt from the first)
    embeddings_base_url: str | None = None
    embeddings_model: str | None = None
    embeddings_api_key: SecretStr | None = None
    embeddings_batch_size: int = Field(default=64, ge=1, le=4096)
    embeddings_timeout_seconds: float = Field(default=30.0, gt=0)
    embeddings_dimensions: int | None = Field(default=None, ge=1)

    # storage
    database_url: str | None = Field(default=None, validation_alias=AliasChoices("DATABASE_URL"))
    data_dir: Path = Field(default_factory=default_data_dir)
    # connections of the support desk's pool (each turn holds one for a few short statements at a time)
    db_pool_size: int = Field(default=4, ge=1, le=100)
    # opt-in asynchronous commit for the desk's writes (chat memory): a write does not wait for the WAL flush, but
    # a database crash may lose the last turns (docs/benchmarks/server.md); off = durable commits
    db_asynchronous_commit: bool = False

    # the one bound on a user message's length in characters, for the CLI, the Python API (the desk) and HTTP
    max_message_chars: int = Field(default=DEFAULT_MAX_MESSAGE_CHARS, ge=1)

    # logging
    log_user_text: bool = False

    # HTTP server (routegate serve / up)
    server_host: str = "127.0.0.1"
    server_port: int = Field(default=8000, ge=0, le=65535)
    server_api_key: SecretStr | None = None  # bearer key required on everything but /healthz when set
    # several keys, comma-separated (ROUTEGATE_SERVER_API_KEYS=k1,k2): each key is a tenant owning its sessions
    server_api_keys: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    server_cors_origins: list[str] = Field(default_factory=list)  # e.g. ["http://localhost:8501"]; [] = no CORS
    server_max_request_bytes: int = Field(default=64 * 1024, ge=1024)
    # slow clients: a request's header must be complete within this bound of the connection's opening (or of the
    # first byte after an idle keep-alive), its body within the next; an idle keep-alive connection is closed
    server_header_timeout_seconds: float = Field(default=10.0, gt=0)
    server_body_timeout_seconds: float = Field(default=30.0, gt=0)
    server_keepalive_timeout_seconds: float = Field(default=5.0, gt=0)
    # a request's head, bounded while it arrives (before authentication): the request line (414 over it), the
    # header fields' total size and their number (431 over either); then the connection is closed
    server_max_request_line_bytes: int = Field(default=8 * 1024, ge=256)
    server_max_header_bytes: int = Field(default=16 * 1024, ge=1024)
    server_max_headers: int = Field(default=100, ge=8)
    # the former name of max_message_chars (ROUTEGATE_SERVER_MAX_MESSAGE_CHARS), still accepted: it applies when
    # ROUTEGATE_MAX_MESSAGE_CHARS is not set
    server_max_message_chars: int | None = Field(default=None, ge=1)
    server_health_timeout_seconds: float = Field(default=2.0, gt=0)
    server_desk_timeout_seconds: float = Field(default=10.0, gt=0)  # bound on history / reset calls
    # onnxruntime threads of the server's MiniLM encoder (one call at a time on the event loop is not the only
    # work: the loop, PostgreSQL and the other requests want the cores too); measured in docs/benchmarks/server.md
    server_encoder_threads: int = Field(default=1, ge=1, le=64)
    # server logs: uvicorn's human-readable lines, or one JSON object per line with trace_id/span_id
    log_format: Literal["text", "json"] = "text"
    # fair sharing between tenants (an API key; without keys, a client address), per server process: turns of one
    # tenant running at once, and a token bucket on the turns it starts (rate per second, burst); 0 = no limit (the
    # rate's default: a quota to set, while the bound on running turns is what keeps one tenant from starving the
    # others). Over a limit: 429 with Retry-After (docs/server.md)
    tenant_max_concurrent_turns: int = Field(default=64, ge=0)
    tenant_rate_per_second: float = Field(default=0.0, ge=0)
    tenant_rate_burst: int = Field(default=100, ge=1)
    # session locks (PostgreSQL advisory locks) one process holds or tries at once, well under PostgreSQL's lock
    # table (max_locks_per_transaction x max_connections, 6,400 by default); a turn waits for a free one
    db_max_advisory_locks: int = Field(default=256, ge=1, le=100_000)

    # Streamlit UI (routegate ui / up)
    ui_host: str = "127.0.0.1"
    ui_port: int = Field(default=8501, ge=0, le=65535)
    ui_server_url: str = "http://127.0.0.1:8000"  # where the UI finds the server

    # the support desk's SQL tool: bounds PostgreSQL applies before a result leaves the server (docs/support.md)
    sql_max_rows: int = Field(default=100, ge=1, le=10_000)
    sql_max_bytes: int = Field(default=64 * 1024, ge=256, le=64 * 1024 * 1024)  # row data per result (JSON text)
    sql_max_field_chars: int = Field(default=2000, ge=16)  # longer values are cut to this many characters
    sql_statement_timeout_ms: int = Field(default=2000, ge=1)  # server-side; the client cancels 250 ms later

    # durable plans: the HMAC key `routegate plans` signs and checks checkpoints with (Store(signing_key=...));
    # unset = checkpoints are neither signed nor checked for a signature
    checkpoint_signing_key: SecretStr | None = None

    # your own desk (docs/desk.md): the directory of a desk.toml that ask/route/chat run instead of the built-in desk
    desk: Path | None = None

    @model_validator(mode="after")
    def _former_message_limit(self) -> Settings:
        if self.server_max_message_chars is not None and "max_message_chars" not in self.model_fields_set:
            self.max_message_chars = self.server_max_message_chars
        return self

    @property
    def llm_enabled(self) -> bool:
        return self.openai_api_key is not None and bool(self.openai_api_key.get_secret_value().strip())

    @field_validator("server_api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        return value.split(",") if isinstance(value, str) else value

    @property
    def server_keys(self) -> tuple[str, ...]:
        """Every API key the server accepts (``server_api_key`` and ``server_api_keys``), blanks dropped."""
        keys = [*([self.server_api_key] if self.server_api_key is not None else []), *self.server_api_keys]
        return tuple(dict.fromkeys(k for k in (key.get_secret_value().strip() for key in keys) if k))

    @property
    def server_auth_enabled(self) -> bool:
        return bool(self.server_keys)
