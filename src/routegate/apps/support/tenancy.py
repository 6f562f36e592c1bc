"""Who a turn acts for: the tenant, named explicitly wherever the desk's database is shared.

The server names the tenant of each request (its API key, :mod:`routegate.server._auth`) and passes it to the desk
(``desk.iter(message, session_id=..., tenant=...)``, ``history``, ``reset``); the desk carries it in the turn's
input (:class:`~routegate.apps.support.turn.TurnInput`, the run's ``deps``) to every part that takes a pooled
connection (:meth:`~routegate.apps.support.db.SupportDatabase.connection`), whose fair queue serves the tenants
in turn (:mod:`.fair_share`). Nothing carries it sideways: a part that is not given a tenant acts for
:data:`ANONYMOUS`. No dependencies: the server imports it whatever desk it serves."""

from __future__ import annotations

from typing import Final

ANONYMOUS: Final = ""
"""The tenant of code outside a server's keyed request (the command line, a server without keys' anonymous caller)."""
