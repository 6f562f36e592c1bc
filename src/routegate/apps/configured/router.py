"""The router of a configured desk: the built-in desk's router (rules → embedding layer → LLM when configured →
the LLM route, with the "I don't know" gate) on the desk's own rules and examples.

Each configured route has a kind, and a kind is one of the engine's four routes (``sql`` → POSTGRES, ``kb`` →
VECTOR, ``tool`` → EXTERNAL, ``llm`` → LLM): the embedding layer learns each engine route from the examples of
the configured routes of its kind, and a kind the desk does not have is not in the request's catalog, so no
stage can choose it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from routegate.apps.configured.config import DeskConfig
from routegate.apps.configured.rules import KIND_ROUTE, DeskRules
from routegate.apps.support.contracts import ROUTES, SupportRoute
from routegate.apps.support.router import SupportRouter
from routegate.apps.support.semantic import EmbeddingLayer, ExampleEmbeddingLayer
from routegate.core import RoutePolicy, RouteRequest
from routegate.embed import Encoder
from routegate.llm.protocol import ChatModel
from routegate.routers.cascade import CascadeChoice
from routegate.routers.llm import LLMRouter

_ABSENT: Final = "(this desk has no route of this kind)"
"""The one example of an engine route the desk does not have: never scored (the route is not in the catalog)."""


def present_routes(config: DeskConfig) -> tuple[SupportRoute, ...]:
    kinds = {KIND_ROUTE[r.kind] for r in config.routes}
    return tuple(r for r in ROUTES if r in kinds)


def route_examples(config: DeskConfig) -> dict[SupportRoute, tuple[str, ...]]:
    """Each engine route's examples: those of the configured routes of its kind."""
    out: dict[SupportRoute, list[str]] = {r: [] for r in ROUTES}
    for route in config.routes:
        out[KIND_ROUTE[route.kind]] += route.examples
    return {r: tuple(dict.fromkeys(texts)) or (_ABSENT,) for r, texts in out.items()}


def embedding_layer(config: DeskConfig, encoder: Encoder) -> ExampleEmbeddingLayer:
    return ExampleEmbeddingLayer(
        encoder,
        examples=route_examples(config),
        min_score=config.router.min_score,
        min_margin=config.router.min_margin,
    )


def router_prompt(config: DeskConfig) -> str:
    lines = [
        f"You are the router of {config.desk.description or config.desk.name}.",
        "Classify the user's intent into exactly one route and answer with one JSON object:",
        '{"kind": "route", "target": "<ROUTE>", "args": {"query": "<the user\'s message, unchanged>"}}',
        "Routes (the first that applies wins):",
    ]
    for kind, route in (("sql", "POSTGRES"), ("kb", "VECTOR"), ("tool", "EXTERNAL"), ("llm", "LLM")):
        routes = [r for r in config.routes if r.kind == kind]
        if not routes:
            continue
        if kind == "sql":
            what = "records in the database: " + ", ".join(t for r in routes for t in r.tables)
        elif kind == "kb":
            what = "questions answered by the help documents (policies, how-to)"
        elif kind == "tool":
            what = "external tools: " + "; ".join(t.description for t in config.tools)
        else:
            what = "conversation, questions about this assistant, or nothing above applies"
        lines.append(f"- {route}: {what}.")
    lines.append("Answer with the JSON object only.")
    return "\n".join(lines)


class DeskRouter(SupportRouter):
    """:class:`SupportRouter` with the desk's rules, examples and routes."""

    def __init__(
        self,
        config: DeskConfig,
        *,
        semantic: EmbeddingLayer,
        chat_model: ChatModel | None = None,
    ) -> None:
        present = present_routes(config)
        super().__init__(semantic=semantic, rules=DeskRules(config), chat_model=chat_model, policy=RoutePolicy(present))
        if chat_model is not None:
            self.llm = LLMRouter(chat_model, system_prompt=router_prompt(config), mode=config.router.mode)
        self.present = frozenset(present)

    async def choose(self, request: RouteRequest) -> CascadeChoice:
        """The cascade's choice among the desk's routes only: the request's catalog narrowed to them."""
        narrowed = tuple(spec for spec in request.catalog if spec.name in self.present)
        return await super().choose(replace(request, catalog=narrowed))


def family_of(config: DeskConfig, table: str) -> str | None:
    """The configured route serving ``table`` (its family), for the trace."""
    return next((r.name for r in config.routes if table in r.tables), None)
