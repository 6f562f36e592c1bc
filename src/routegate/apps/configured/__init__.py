"""Desk configurations: what a desk is made of (``desk.toml``: your tables, your documents, your tools, your routes),
the built-in desk's (``builtin/``), and the commands that make and feed one. The desk that runs a configuration is
:class:`routegate.apps.support.SupportAgent`, the one desk.

* :func:`init_desk` — ``routegate desk init``: introspect a SQL file (loaded into the embedded PostgreSQL) or an
  existing database, read a docs folder, write ``DIR/desk.toml``.
* :func:`load_config` / :class:`DeskConfig` — the configuration, checked (:class:`DeskConfigError` names the
  file, the field and the fix).
* :func:`ingest` — ``routegate kb ingest``: the documents into pgvector, incrementally.
* Kept one release, deprecated: :class:`ConfiguredDesk` (now ``SupportAgent(config, desk_dir, ...)``) and
  :func:`open_configured_desk` (now :func:`routegate.apps.support.open_support_desk`).

Importing the package is cheap: each name is imported from its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from routegate.apps.configured.config import DeskConfig, DeskConfigError, load_config
    from routegate.apps.configured.desk import ConfiguredDesk
    from routegate.apps.configured.factory import open_configured_desk
    from routegate.apps.configured.init import init_desk
    from routegate.apps.configured.kb import ingest

__all__ = [
    "ConfiguredDesk",
    "DeskConfig",
    "DeskConfigError",
    "ingest",
    "init_desk",
    "load_config",
    "open_configured_desk",
]

_MODULES: dict[str, str] = {
    "ConfiguredDesk": "desk",
    "DeskConfig": "config",
    "DeskConfigError": "config",
    "ingest": "kb",
    "init_desk": "init",
    "load_config": "config",
    "open_configured_desk": "factory",
}

__getattr__, __dir__ = _lazy_exports(__name__, _MODULES, __all__)
