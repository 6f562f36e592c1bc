"""``routegate triage "<request>"``: the routing agent's billing / technical / sales example."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from routegate.cli._command import add_command
from routegate.cli._input import checked
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.core import AgentResult


def register(subparsers: Any) -> None:
    parser = add_command(subparsers, "triage", run)
    # default None, not the demo goal: the triage app (and numpy under it) is imported by the command, not the parser
    parser.add_argument("request", nargs="?", default=None, help="the request text (default: the example's goal)")
    parser.add_argument("--offline", action="store_true", help="ignore OPENAI_API_KEY: keyword router + composer")
    parser.add_argument("--compact", action="store_true", help="print the JSON on one line")


async def _triage(request: str, settings: Settings, *, offline: bool) -> AgentResult:
    from routegate.apps.triage import build_triage_agent

    if offline or not settings.llm_enabled:
        return await build_triage_agent().arun(request)
    # imported here: the openai SDK takes about a second to import, which offline runs should not pay
    from routegate.llm import LLMFinalizer, OpenAIChatModel
    from routegate.routers.llm import LLMRouter

    async with OpenAIChatModel.from_settings(settings) as chat:
        agent = build_triage_agent(router=LLMRouter(chat), finalizer=LLMFinalizer(chat))
        return await agent.arun(request)


def run(args: argparse.Namespace) -> int:
    """route a support request to the billing, technical or sales specialist and print the JSON result

    Route a support request to the billing, technical or sales specialist through the policy boundary and
    gateway, and print the run result as JSON (status, stop_reason, selected_route, answer, trace, history).
    Offline by default (keyword router, grounded composer); with OPENAI_API_KEY set it uses the LLM router and the
    LLM finalizer of OPENAI_BASE_URL / OPENAI_MODEL. Exit status: 0 on success, 1 when the run stopped, 2 on a
    usage or configuration error (an empty request, a bad OPENAI_BASE_URL).
    """
    # bad settings, a bad OPENAI_BASE_URL or a bad request: one ``error:`` line from routegate.cli.main, exit 2
    from routegate.apps.triage import DEMO_GOAL

    settings = Settings()
    request = checked(DEMO_GOAL if args.request is None else args.request, settings)
    result = asyncio.run(_triage(request, settings, offline=args.offline))
    print(result.to_json(indent=None if args.compact else 2))
    return 0 if result.ok else 1
