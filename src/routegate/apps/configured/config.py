"""The desk configuration (``DIR/desk.toml``): pydantic models, strict, and :func:`load_config`.

A configured desk is the built-in support desk's engine with its data, its documents and its routes taken from
this file instead of from code. Every field is documented in ``docs/desk.md``; :func:`load_config` refuses an
unknown field, a wrong type, a route without a target, an unknown table or column and an unreadable docs path
with a :class:`DeskConfigError` naming the file, the field and the fix.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from routegate._suggest import did_you_mean
from routegate.apps.configured._paths import OutsideError, inside
from routegate.apps.configured.mistakes import CONFIG_FILE as CONFIG_FILE
from routegate.apps.configured.mistakes import config_file, fields_at, missing_desk
from routegate.errors import ConfigurationError

IDENTIFIER: Final = r"^[a-z_][a-z0-9_]{0,62}$"
_IDENTIFIER = re.compile(IDENTIFIER)

Identifier = Annotated[str, Field(pattern=IDENTIFIER)]
RouteKind = Literal["sql", "kb", "tool", "llm"]


def _encoder_name(name: str | None) -> str | None:
    """A name :func:`~routegate.embed.choice.encoder_named` builds (imported only when a desk names one: loading a
    configuration stays free of the encoders' modules)."""
    if name is None:
        return None
    from routegate.embed.choice import ENCODER_NAMES

    if name not in ENCODER_NAMES:
        raise ValueError(
            f"unknown encoder {name!r}{did_you_mean(name, ENCODER_NAMES)}; choose one of {', '.join(ENCODER_NAMES)} "
            "(docs/models.md)"
        )
    return name


EncoderName = Annotated[str | None, AfterValidator(_encoder_name)]
"""``[router] encoder`` / ``[knowledge] encoder``: ``minilm``, ``openai`` or ``multilingual-e5``."""


class DeskConfigError(ConfigurationError):
    """``desk.toml`` (or what ``desk init`` was given) is wrong; the message names the file, the field and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class DeskInfo(_Strict):
    name: Identifier
    description: str = ""
    version: Literal[1] = 1


class DatabaseConfig(_Strict):
    source: Literal["sql", "url"]
    sql_file: str | None = None
    schema_name: Identifier = Field(alias="schema")
    state_schema: Identifier | None = None
    """Where the desk keeps its own state (conversations, the knowledge base's chunks): default
    ``desk_<name>_state``. The built-in desk's configuration keeps it in ``support``, where the built-in desk always
    kept its conversations."""
    load_statement_seconds: float = Field(default=10.0, gt=0, le=3600)
    """``source = "sql"``: how long one round trip of the load (a batch of statements, or one ``COPY``) may take."""
    load_seconds: float = Field(default=120.0, gt=0, le=86400)
    """``source = "sql"``: how long loading the whole file may take."""

    @model_validator(mode="after")
    def _sql_file_for_sql(self) -> DatabaseConfig:
        if self.source == "sql" and not self.sql_file:
            raise ValueError('source = "sql" needs sql_file (the SQL file loaded into the embedded database)')
        if self.source == "sql" and not self.schema_name.startswith("desk_"):
            # the desk rebuilds this schema when the SQL file changes: never one it does not own (public, ...)
            raise ValueError(
                f'schema {self.schema_name!r}: with source = "sql" the schema must start with desk_ (the desk drops '
                "and reloads it when the SQL file changes); use desk_<name>"
            )
        if self.state_schema is not None and self.state_schema == self.schema_name:
            raise ValueError(
                f"state_schema {self.state_schema!r} is the tables' schema: the desk's state needs a schema of its own"
            )
        if self.schema_name.endswith("_state"):
            raise ValueError(f"schema {self.schema_name!r}: names ending in _state are the desks' own; choose another")
        return self


class ForeignKey(_Strict):
    column: Identifier
    references: Identifier
    ref_column: Identifier


class TableConfig(_Strict):
    name: Identifier
    label: str = Field(min_length=1, max_length=40)
    plural: str = Field(min_length=1, max_length=40)
    aliases: list[Annotated[str, Field(min_length=1, max_length=40)]] = Field(default_factory=list)
    """Other words questions use for the table's rows (``issue``, ``problem`` for tickets), read like ``label``."""
    primary_key: Identifier | None = None
    name_column: Identifier | None = None
    columns: list[Identifier] = Field(min_length=1)
    types: dict[str, str] = Field(default_factory=dict)
    foreign_keys: list[ForeignKey] = Field(default_factory=list)
    filters: dict[str, list[str]] = Field(default_factory=dict)
    row: list[str] = Field(default_factory=list)
    """How an answer that is one row says it: the first template whose every ``{field}`` the row has."""
    line: list[str] = Field(default_factory=list)
    """How one row of a list says it (after ``- ``): the first template whose every ``{field}`` the row has."""

    @model_validator(mode="after")
    def _columns_known(self) -> TableConfig:
        known = set(self.columns)
        for field, column in (("primary_key", self.primary_key), ("name_column", self.name_column)):
            if column is not None and column not in known:
                raise ValueError(
                    f"{field} {column!r} is not one of the readable columns {sorted(known)}"
                    f"{did_you_mean(column, known)}"
                )
        for fk in self.foreign_keys:
            if fk.column not in known:
                raise ValueError(
                    f"foreign key column {fk.column!r} is not one of the readable columns"
                    f"{did_you_mean(fk.column, known)}"
                )
        for column in self.filters:
            if column not in known:
                raise ValueError(
                    f"filter column {column!r} is not one of the readable columns {sorted(known)}"
                    f"{did_you_mean(column, known)}"
                )
        return self


class KnowledgeConfig(_Strict):
    paths: list[str] = Field(default_factory=list)
    chunk_chars: int = Field(default=900, ge=200, le=8000)
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    """The cosine similarity a chunk needs to be an answer on its meaning alone; ``None`` (the default): the
    cut-off calibrated at ingest from the desk's own documents (:mod:`.kb_calibration`)."""
    language: str = Field(default="english", pattern=r"^[a-z_]{1,63}$")
    """The PostgreSQL text-search configuration the documents' words are indexed with (``english``: stemmed, stop
    words dropped; ``simple``: any language, words as written; ``SELECT cfgname FROM pg_ts_config`` lists them)."""
    encoder: EncoderName = None
    """The encoder the documents and the questions are embedded with; ``None`` (the default): the router's
    (``[router] encoder``). Changing it re-embeds the documents and recalibrates at the next ingest."""


_HTTP_URL = re.compile(r"^https?://[^\s/]+")


class McpServerConfig(_Strict):
    """An MCP server the desk's tools call: a stdio ``command`` (run in the desk directory) or an HTTP ``url``."""

    name: Identifier
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    connect_timeout_seconds: float = Field(default=20.0, gt=0, le=600)
    call_timeout_seconds: float = Field(default=30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r} needs exactly one of command = ... (stdio) or url = ...")
        if self.url is not None and not _HTTP_URL.match(self.url):
            raise ValueError(f"url {self.url!r} is not an http(s) URL; write it as https://host/mcp")
        return self


class ToolConfig(_Strict):
    name: Identifier
    description: str = Field(min_length=1)
    method: Literal["GET", "POST"] = "GET"
    url: str | None = None
    mcp_server: Identifier | None = None
    mcp_tool: str | None = Field(default=None, min_length=1)
    timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    args: dict[str, Literal["string", "integer"]] = Field(default_factory=dict)
    mock: dict[str, Any] | None = None
    answer: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_target(self) -> ToolConfig:
        if (self.url is None) == (self.mcp_server is None):
            raise ValueError(
                f"tool {self.name!r} needs exactly one of url = ... (an HTTP tool) or mcp_server = ... (a tool of an "
                "[[mcp_servers]] entry)"
            )
        if self.url is not None and not _HTTP_URL.match(self.url):
            raise ValueError(f"url {self.url!r} is not an http(s) URL; write it as https://host/path")
        if self.mcp_tool is not None and self.mcp_server is None:
            raise ValueError(f"tool {self.name!r}: mcp_tool needs mcp_server (the server that has the tool)")
        return self


TEMPLATE_FIELD: Final = re.compile(r"\{(\w+)\}")
"""A ``{field}`` of a wording template (no other formatting: a value is never read as a template)."""


def template_fields(template: str) -> list[str]:
    return TEMPLATE_FIELD.findall(template)


class AnswersConfig(_Strict):
    """The desk's own wording of its offline answers (every field optional: the desk words what is not given).
    ``{field}`` is replaced by the named value; each field says which it has."""

    capabilities: str | None = Field(default=None, min_length=1)
    unsure: str | None = Field(default=None, min_length=1)
    not_found: str | None = Field(default=None, min_length=1)
    not_found_name: str | None = Field(default=None, min_length=1)
    records_unavailable: str | None = Field(default=None, min_length=1)
    count: str | None = Field(default=None, min_length=1)
    """How a count is said; with ``{lines}`` the counted rows are read and listed (one line each)."""
    kb_quote: str = Field(default="From {source} (“{title}”): {content}", min_length=1)
    kb_related: str = Field(default=" (See also: {sources}.)", min_length=1)
    kb_not_found: str | None = Field(default=None, min_length=1)
    kb_unavailable: str | None = Field(default=None, min_length=1)
    tool_empty: str | None = Field(default=None, min_length=1)
    tool_unknown: str | None = Field(default=None, min_length=1)
    tool_unavailable: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _known_fields(self) -> AnswersConfig:
        for name, template in self:
            allowed = ANSWER_FIELDS.get(name, ())
            unknown = [f for f in template_fields(template or "") if f not in allowed]
            if unknown:
                has = f"it has {', '.join('{' + a + '}' for a in allowed)}" if allowed else "it has no {field}"
                raise ValueError(f"{name}: unknown field {{{unknown[0]}}}{did_you_mean(unknown[0], allowed)}; {has}")
        return self


ANSWER_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "unsure": ("capabilities",),
    "not_found": ("looked_for",),
    "not_found_name": ("label", "name", "looked_for"),
    "count": ("count", "label", "plural", "looked_for", "lines"),
    "kb_quote": ("source", "title", "content"),
    "kb_related": ("sources", "titles"),
}


class RouterConfig(_Strict):
    min_score: float = Field(default=0.40, ge=0.0, le=1.0)
    min_margin: float = Field(default=0.04, ge=0.0, le=1.0)
    fitted: str | None = Field(default=None, min_length=1)
    """A router ``routegate fit --desk`` saved (a directory, relative to the desk's): the embedding layer instead of
    the nearest examples (``min_score`` and ``min_margin`` are then the fitted router's own calibration)."""
    fit_at_start: bool = False
    """``true``: the embedding layer is a semantic router fitted on the routes' examples when the desk starts, cached
    in the data directory (``ROUTEGATE_DATA_DIR``) until the examples or the encoder change — the built-in desk's
    layer — instead of the nearest examples. ``fitted``, when set, is used instead."""
    generated_rules: bool = True
    """Whether the rules layer also has the phrases generated from the tables, the how-to and chat phrases and the
    routes' ``keywords``; ``false``: only the routes' own ``rules``."""
    typo_words: list[str] = Field(default_factory=list)
    """Words whose misspellings are corrected before the rules match (``tikcet`` → ``ticket``)."""
    encoder: EncoderName = None
    """The encoder the embedding layer embeds with (``minilm``, ``openai``: ``ROUTEGATE_EMBEDDINGS_*``,
    ``multilingual-e5``: the ``multilingual`` extra); ``None`` (the default): the embedded MiniLM."""
    mode: Literal["json", "tools", "json_schema", "auto"] = "json"
    """How the LLM router stage asks the model for a route: a JSON object (default), a tool call, one strict JSON
    schema, or the strongest the endpoint accepts (docs/models.md)."""


class RulePhrase(_Strict):
    """A phrase that settles its route on its own: ``pattern``, a Python regular expression searched in the
    lower-cased message (runs of whitespace made one space, ``[router] typo_words`` corrected)."""

    name: str = Field(min_length=1, max_length=80)
    pattern: str = Field(min_length=1)
    about: bool = False
    """``kind = "llm"`` routes: the phrase makes a message a question about the assistant itself, answered on this
    route even when a knowledge or tool phrase matches too (a record phrase still wins)."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(
                f"{pattern!r} is not a regular expression ({exc}); fix it (Python re syntax, e.g. \\bticket \\d+\\b)"
            ) from None
        return pattern


class RouteConfig(_Strict):
    name: Identifier
    kind: RouteKind
    target: str | None = None
    tables: list[Identifier] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    not_covered: list[str] = Field(default_factory=list)
    """``kind = "tool"``: words naming what the tool has no answer for (another coin than the one it prices); a
    message naming one is answered ``empty`` and no tool is called."""
    rules: list[RulePhrase] = Field(default_factory=list)
    """Phrases that settle this route's kind on their own (the rules layer; see ``RulePhrase``)."""

    @model_validator(mode="after")
    def _has_target(self) -> RouteConfig:
        if self.kind == "sql" and not self.tables:
            raise ValueError(f'route {self.name!r} of kind "sql" needs tables = [...] (its target)')
        if self.kind == "tool" and not self.target:
            raise ValueError(f'route {self.name!r} of kind "tool" needs target = "<a tool name>"')
        if self.not_covered and self.kind != "tool":
            raise ValueError(f'route {self.name!r}: not_covered is for routes of kind "tool"; remove it')
        if self.kind != "llm" and any(rule.about for rule in self.rules):
            raise ValueError(f'route {self.name!r}: rules with about = true are for routes of kind "llm"; remove it')
        return self


class DeskConfig(_Strict):
    desk: DeskInfo
    database: DatabaseConfig
    tables: list[TableConfig] = Field(default_factory=list)
    knowledge: KnowledgeConfig = Field(default_factory=KnowledgeConfig)
    tools: list[ToolConfig] = Field(default_factory=list)
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    router: RouterConfig = Field(default_factory=RouterConfig)
    answers: AnswersConfig = Field(default_factory=AnswersConfig)
    routes: list[RouteConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> DeskConfig:
        tables = {t.name: t for t in self.tables}
        if len(tables) != len(self.tables):
            raise ValueError("tables: two [[tables]] have the same name; keep one")
        for index, table in enumerate(self.tables):
            for key in ("row", "line"):
                for number, template in enumerate(getattr(table, key)):
                    unknown = [f for f in template_fields(template) if f not in self.row_fields(table)]
                    if unknown:
                        raise ValueError(
                            f"tables[{index}] (name = {table.name!r}).{key}[{number}]: {{{unknown[0]}}} is not a "
                            f"field of its rows ({', '.join(self.row_fields(table))})"
                            f"{did_you_mean(unknown[0], self.row_fields(table))}; use one of them"
                        )
            where = f"tables[{index}] (name = {table.name!r}).foreign_keys"
            for fk in table.foreign_keys:
                if fk.references not in tables:
                    raise ValueError(
                        f"{where}: {fk.column} references {fk.references!r}, which is not a readable table"
                        f"{did_you_mean(fk.references, tables)} (add it to [[tables]] or remove the foreign key)"
                    )
                if fk.ref_column not in tables[fk.references].columns:
                    raise ValueError(
                        f"{where}: {fk.column} references {fk.references}.{fk.ref_column}, not readable"
                        f"{did_you_mean(fk.ref_column, tables[fk.references].columns)}"
                    )
        tools = {t.name for t in self.tools}
        servers = [m.name for m in self.mcp_servers]
        if len(set(servers)) != len(servers):
            raise ValueError("mcp_servers: two [[mcp_servers]] have the same name; rename one")
        for index, tool in enumerate(self.tools):
            if tool.mcp_server is not None and tool.mcp_server not in servers:
                raise ValueError(
                    f"tools[{index}] (name = {tool.name!r}).mcp_server: {tool.mcp_server!r} is not one of "
                    f"[[mcp_servers]] {sorted(servers)}{did_you_mean(tool.mcp_server, servers)}; add the server or "
                    "fix the name"
                )
        names = [r.name for r in self.routes]
        if len(set(names)) != len(names):
            raise ValueError("routes: two [[routes]] have the same name; rename one")
        for index, route in enumerate(self.routes):
            where = f"routes[{index}] (name = {route.name!r})"
            for name in route.tables:
                if name not in tables:
                    raise ValueError(
                        f"{where}.tables: {name!r} is not in [[tables]] (readable tables: {sorted(tables)})"
                        f"{did_you_mean(name, tables)}; add the table or remove it from the route"
                    )
            if route.kind == "tool" and route.target not in tools:
                raise ValueError(
                    f"{where}.target: {route.target!r} is not one of [[tools]] {sorted(tools)}"
                    f"{did_you_mean(route.target or '', tools)}"
                )
            if route.kind == "kb" and not self.knowledge.paths:
                raise ValueError(f'{where}: a route of kind "kb" needs [knowledge] paths = [...]')
        if not any(r.kind == "llm" for r in self.routes):
            raise ValueError('routes: one route needs kind = "llm" (where a message no other route fits goes); add it')
        own = data_schema(self.desk.name)
        if self.database.source == "sql" and self.database.schema_name != own:
            raise ValueError(
                f'database.schema {self.database.schema_name!r}: with source = "sql" a desk loads its tables into '
                f"its own schema, {own!r} (desk_<name>), and never creates or drops another's; set schema = {own!r}"
            )
        return self

    def table(self, name: str) -> TableConfig:
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(name)

    def row_fields(self, table: TableConfig) -> tuple[str, ...]:
        """What a row of ``table`` holds: its readable columns, and the name of each parent it references that has
        a name column, under the parent's label (``customer``)."""
        parents = (self._parent(fk.references) for fk in table.foreign_keys)
        joined = [p.label.replace(" ", "_") for p in parents if p is not None and p.name_column is not None]
        return tuple(dict.fromkeys([*table.columns, *(j for j in joined if j not in table.columns)]))

    def _parent(self, name: str) -> TableConfig | None:
        return next((t for t in self.tables if t.name == name), None)

    @property
    def lists_counts(self) -> bool:
        """Whether a count answer lists the rows counted (``[answers] count`` names ``{lines}``): the planner then
        reads the rows instead of counting them in the database."""
        return "{lines}" in (self.answers.count or "")

    def readable_columns(self) -> dict[str, tuple[str, ...]]:
        return {t.name: tuple(t.columns) for t in self.tables}


def _field(loc: tuple[int | str, ...], data: object) -> str:
    """``routes[2] (name = 'orders').tables``: the path of the field, with the item's name when it has one (easier
    to find in the file)."""
    out = ""
    node: object = data
    for item in loc:
        if isinstance(item, int):
            out += f"[{item}]"
            node = node[item] if isinstance(node, list) and item < len(node) else None
            name = node.get("name") if isinstance(node, dict) else None
            if isinstance(name, str):
                out += f" (name = {name!r})"
        else:
            out += f".{item}" if out else item
            node = node.get(item) if isinstance(node, dict) else None
    return out or "(top level)"


def describe_validation(path: Path, error: ValidationError, data: object = None) -> str:
    """One line per problem: the file, the field (``routes[2] (name = 'orders').tables``) and what is wrong."""
    lines: list[str] = []
    for problem in error.errors():
        loc = tuple(x for x in problem["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        message = str(problem["msg"]).removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            meant = did_you_mean(str(loc[-1]), fields_at(DeskConfig, loc[:-1])) if loc else ""
            message = f"unknown field{meant}: remove it or check its spelling (docs/desk.md lists every field)"
        elif problem["type"] == "missing":
            message = "required field is missing: add it (docs/desk.md lists every field)"
        lines.append(f"{path}: {_field(loc, data)}: {message}" if loc else f"{path}: {message}")
    return "; ".join(lines)


def parse_config(text: str, path: Path) -> DeskConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeskConfigError(f"{path}: not valid TOML ({exc}); fix the syntax at that line") from None
    try:
        return DeskConfig.model_validate(data)
    except ValidationError as exc:
        raise DeskConfigError(describe_validation(path, exc, data)) from None


def load_config(desk_dir: Path) -> DeskConfig:
    """``DIR/desk.toml``, checked (also that its SQL file and docs paths are in the desk directory, reached through
    no symbolic link, and exist)."""
    desk_dir = Path(desk_dir)
    path = config_file(desk_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DeskConfigError(missing_desk(desk_dir)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DeskConfigError(f"{path} cannot be read ({exc}); give a readable UTF-8 file") from None
    config = parse_config(text, path)
    if config.database.sql_file is not None:
        sql_path = desk_path(desk_dir, config.database.sql_file, f"{path}: database.sql_file")
        if not sql_path.is_file():
            raise DeskConfigError(
                f"{path}: database.sql_file: {sql_path} is not a readable file; point it at the SQL file "
                "(relative to the desk directory)"
            )
    if config.router.fitted is not None and not (resolve(desk_dir, config.router.fitted) / "manifest.json").is_file():
        raise DeskConfigError(
            f"{path}: router.fitted: {resolve(desk_dir, config.router.fitted)} holds no saved router (manifest.json); "
            f"fit one with `routegate fit --desk {desk_dir}` or remove the field"
        )
    for index, entry in enumerate(config.knowledge.paths):
        where = desk_path(desk_dir, entry, f"{path}: knowledge.paths[{index}]")
        if not where.exists():
            raise DeskConfigError(
                f"{path}: knowledge.paths[{index}]: {where} does not exist; point it at a docs folder or file "
                "(relative to the desk directory) or remove it"
            )
    return config


def desk_path(desk_dir: Path, entry: str, field: str) -> Path:
    """A path of the configuration that a desk reads (its SQL file, its documents): in the desk directory, reached
    through no symbolic link (:func:`inside`); refused with ``field`` and what to do otherwise."""
    try:
        return inside(Path(desk_dir), entry)
    except OutsideError as exc:
        raise DeskConfigError(f"{field}: {entry!r} {exc}") from None


def resolve(desk_dir: Path, entry: str) -> Path:
    """A path of the configuration: relative ones are relative to the desk directory."""
    given = Path(entry).expanduser()
    return given if given.is_absolute() else desk_dir / given


def builtin_desk_dir() -> Path:
    """The built-in support desk as a desk configuration (shipped in the package: ``desk.toml``, the SQL file of its
    customers and tickets, its three help articles): ``--desk`` with this directory runs it."""
    return Path(__file__).with_name("builtin")


def is_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.match(name))


def short_identifier(name: str) -> str:
    """Identifiers stay within PostgreSQL's 63 bytes: a long one keeps its start and gets a hash."""
    if len(name) <= 63:
        return name
    return name[:50] + "_" + hashlib.sha256(name.encode()).hexdigest()[:12]


def data_schema(desk: str) -> str:
    """The schema a desk with ``source = "sql"`` loads its tables into: ``desk_<name>``, its own."""
    return short_identifier(f"desk_{desk}")
