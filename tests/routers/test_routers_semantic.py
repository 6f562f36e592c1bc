"""SemanticRouter logic on the deterministic HashingEncoder: outcomes, allowlist, policy boundary, multi-turn,
persistence (no pickle), bad input."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.core import RoutePolicy, RouteRequest
from routegate.core.contracts import RouteIntent, RouteProposal, RouteSpec
from routegate.embed import BatchingEncoder, HashingEncoder
from routegate.embed.protocol import Vectors
from routegate.errors import ConfigurationError, RunStopError
from routegate.routers import FitConfig, LabelledExample, SemanticRouter
from routegate.routers._rule import Calibration

ROUTES = {
    "POSTGRES": [
        "show ticket 12",
        "what is the status of ticket 3",
        "list the open tickets of John Doe",
        "which customers live in Berlin",
        "customer details for Jane Smith",
        "tickets created by Alex Brown",
        "how many tickets are open",
        "find customer with id 2",
    ],
    "VECTOR": [
        "how do I reset my password",
        "explain ticket escalation",
        "what is the refund policy",
        "how to change my password",
        "article about password reset",
        "where can I read the refund policy",
        "escalation process documentation",
        "policy for refunds explained",
    ],
    "EXTERNAL": [
        "what's the weather in Paris",
        "bitcoin price",
        "weather forecast for London",
        "current price of ethereum",
        "is it raining in Berlin",
        "crypto price of bitcoin today",
        "temperature in Tokyo",
        "how much is one bitcoin",
    ],
}
CATALOG = tuple(RouteSpec(name, name.lower(), {}) for name in [*ROUTES, "LLM"])


@pytest.fixture(scope="module")
def router() -> SemanticRouter:
    return SemanticRouter.from_routes(
        ROUTES, encoder=HashingEncoder(dim=512), default_route="LLM", config=FitConfig(inscope_coverage=0.9)
    )


def test_routes_known_queries(router: SemanticRouter) -> None:
    assert router.routes == ("EXTERNAL", "POSTGRES", "VECTOR")
    decision = router.route("show me ticket 12 please")
    assert decision.outcome == "route"
    assert decision.route == "POSTGRES"
    assert decision.runner_up in {"VECTOR", "EXTERNAL"}
    assert 0.0 <= decision.margin <= decision.score <= 1.0
    assert router.route("weather in Paris today").route == "EXTERNAL"
    assert router.route("I need to reset my password").route == "VECTOR"
    assert "runner-up" in decision.why


def test_calibration_is_recorded(router: SemanticRouter) -> None:
    cal = router.calibration
    assert cal.objective == "inscope_coverage"
    assert cal.source.endswith("cross-validation on train")
    assert cal.coverage is not None and cal.coverage >= 0.9
    assert cal.grid


def test_out_of_scope_goes_to_default(router: SemanticRouter) -> None:
    decision = router.route("qqq zzz xyzzy")
    assert decision.outcome == "default"
    assert decision.route == "LLM"


def test_allowed_restricts_the_choice(router: SemanticRouter) -> None:
    decision = router.route("show ticket 12", allowed={"VECTOR", "EXTERNAL"})
    assert decision.top in {"VECTOR", "EXTERNAL"}
    assert "POSTGRES" not in decision.scores
    nothing = router.route("show ticket 12", allowed=set())
    assert nothing.outcome == "default"


def _request(goal: str, conversation: object = (), previous_route: object = None) -> RouteRequest:
    """A request whose conversation fields may hold anything (a router must not trust them)."""
    return RouteRequest(goal=goal, catalog=CATALOG, conversation=conversation, previous_route=previous_route)  # type: ignore[arg-type]


async def test_decide_passes_the_policy_boundary(router: SemanticRouter) -> None:
    policy = RoutePolicy([spec.name for spec in CATALOG])
    decision = await router.decide(_request("list the open tickets of John Doe"))
    intent = policy.validate(decision.raw)
    assert isinstance(intent, RouteIntent)
    assert intent.target == "POSTGRES"
    assert decision.decided_by == "semantic"
    assert decision.scores and all(math.isfinite(v) for v in decision.scores.values())
    assert decision.why.startswith("route:")
    default = await router.decide(_request("qqq zzz xyzzy"))
    assert policy.validate(default.raw) == RouteIntent(target="LLM", args={"ticket": "qqq zzz xyzzy"})


async def test_decide_respects_forbidden_targets(router: SemanticRouter) -> None:
    request = RouteRequest(goal="show ticket 12", catalog=CATALOG, forbidden_targets=frozenset({"POSTGRES"}))
    decision = await router.decide(request)
    assert isinstance(decision.raw, RouteProposal)  # built by the router itself: proposed typed
    assert decision.raw.target != "POSTGRES"


async def test_default_not_allowed_stops_the_run(router: SemanticRouter) -> None:
    request = RouteRequest(goal="qqq zzz xyzzy", catalog=CATALOG[:3])
    with pytest.raises(RunStopError) as info:
        await router.decide(request)
    assert info.value.stop_reason == "no_route:out_of_scope"


def _forced(router: SemanticRouter, **changes: float) -> SemanticRouter:
    cal = router.calibration
    values = {"threshold": cal.threshold, "clarify_margin": cal.clarify_margin, "alpha": cal.alpha, "beta": cal.beta}
    values.update(changes)
    return SemanticRouter(
        router.head,
        Calibration(**values),  # type: ignore[arg-type]  # floats for float fields
        encoder=router.encoder,
        default_route="LLM",
    )


async def test_clarify_outcome_and_stop_reason(router: SemanticRouter) -> None:
    always_clarify = _forced(router, clarify_margin=2.0, threshold=-1e9)
    decision = always_clarify.route("ticket escalation")
    assert decision.outcome == "clarify"
    assert decision.runner_up is not None
    with pytest.raises(RunStopError) as info:
        await always_clarify.decide(_request("ticket escalation"))
    assert info.value.stop_reason.startswith("clarify:")
    with_target = SemanticRouter(
        always_clarify.head,
        always_clarify.calibration,
        encoder=router.encoder,
        default_route="LLM",
        clarify_target="LLM",
    )
    routed = await with_target.decide(_request("ticket escalation"))
    assert isinstance(routed.raw, RouteProposal)
    assert routed.raw.target == "LLM"


def test_follow_up_uses_the_previous_turn(router: SemanticRouter) -> None:
    strict = _forced(router, threshold=router.calibration.threshold)
    alone = strict.route("and number 2?")
    follow = strict.route("and number 2?", context=["show ticket 12", "and number 2?"])
    if alone.outcome == "route":
        pytest.skip("the follow-up is confident on its own with this encoder")
    assert follow.route == "POSTGRES"
    assert follow.used_context
    messages = [{"role": "user", "content": "show ticket 12"}, {"role": "assistant", "content": "Ticket 12: ..."}]
    assert strict.route("and number 2?", context=messages).route == "POSTGRES"


def test_clarify_between_previous_route_stays(router: SemanticRouter) -> None:
    always_clarify = _forced(router, clarify_margin=2.0, threshold=-1e9)
    decision = always_clarify.route("ticket escalation")
    kept = always_clarify.route("ticket escalation", previous_route=decision.runner_up)
    assert kept.outcome == "route"
    assert kept.route == decision.runner_up


def test_save_and_load_round_trip(router: SemanticRouter, tmp_path: Path) -> None:
    path = router.save(tmp_path / "router")
    assert (path / "manifest.json").exists()
    loaded = SemanticRouter.load(path, encoder=HashingEncoder(dim=512))
    texts = ["show ticket 12", "weather in Paris", "reset my password", "hello there", ""]
    for a, b in zip(router.route_many(texts), loaded.route_many(texts), strict=True):
        assert a.route == b.route
        assert a.outcome == b.outcome
        assert a.confidence == pytest.approx(b.confidence, abs=1e-6)
    assert loaded.calibration.threshold == router.calibration.threshold


def test_load_refuses_wrong_encoder(router: SemanticRouter, tmp_path: Path) -> None:
    path = router.save(tmp_path / "router")
    with pytest.raises(ConfigurationError, match="fitted with encoder"):
        SemanticRouter.load(path, encoder=HashingEncoder(dim=512, char_ngrams=False))


def test_load_refuses_pickles_and_tampering(router: SemanticRouter, tmp_path: Path) -> None:
    path = router.save(tmp_path / "router")
    np.save(path / "coef.npy", np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ConfigurationError):
        SemanticRouter.load(path, encoder=HashingEncoder(dim=512))
    router.save(path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["arrays"]["coef"]["file"] = "../../etc/passwd"
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigurationError, match="outside"):
        SemanticRouter.load(path, encoder=HashingEncoder(dim=512))
    (path / "manifest.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        SemanticRouter.load(path, encoder=HashingEncoder(dim=512))
    with pytest.raises(ConfigurationError, match="no saved router"):
        SemanticRouter.load(tmp_path / "missing", encoder=HashingEncoder(dim=512))


def test_fit_refuses_bad_data() -> None:
    encoder = HashingEncoder(dim=64)
    with pytest.raises(ConfigurationError, match="in-scope"):
        SemanticRouter.fit([LabelledExample("x", "oos")], encoder=encoder)
    with pytest.raises(ConfigurationError, match=">= 2 examples"):
        SemanticRouter.fit([LabelledExample("x", "A"), LabelledExample("y", "B")], encoder=encoder)
    with pytest.raises(ConfigurationError, match="not in the training data"):
        SemanticRouter.from_routes(
            {"A": ["a", "aa"], "B": ["b", "bb"]},
            encoder=encoder,
            default_route="oos",
            val=[LabelledExample("c", "C")],
        )
    with pytest.raises(ConfigurationError):
        FitConfig(alphas=())


def test_single_route_router() -> None:
    router = SemanticRouter.from_routes(
        {"ONLY": ["reset my password", "password reset", "forgot password", "change password"]},
        encoder=HashingEncoder(dim=128),
        default_route="LLM",
        out_of_scope=["weather in rome", "bitcoin price", "tell me a joke"],
    )
    assert router.route("reset password").route in {"ONLY", "LLM"}
    assert router.route("password").runner_up is None


def test_fit_with_val_and_oos_uses_recall_objective() -> None:
    train = [LabelledExample(t, r) for r, ts in ROUTES.items() for t in ts]
    val = [
        LabelledExample("show ticket 7", "POSTGRES"),
        LabelledExample("weather in Rome", "EXTERNAL"),
        LabelledExample("reset password help", "VECTOR"),
        LabelledExample("qqq zzz", "oos"),
        LabelledExample("xyzzy plugh", "oos"),
    ]
    router = SemanticRouter.fit(
        train, val=val, encoder=HashingEncoder(dim=512), default_route="LLM", config=FitConfig(oos_recall_floor=1.0)
    )
    assert router.calibration.objective == "oos_recall_floor"
    assert router.calibration.oos_recall == 1.0
    assert router.route("qqq zzz").outcome == "default"


def test_clarify_is_calibrated_when_asked() -> None:
    router = SemanticRouter.from_routes(
        ROUTES, encoder=HashingEncoder(dim=512), default_route="LLM", config=FitConfig(clarify_cost=0.2)
    )
    assert 0.0 <= router.calibration.clarify_margin <= 1.0
    assert router.calibration.clarify_rate <= 0.1 + 1e-9


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=400), st.lists(st.text(max_size=50), max_size=3))
def test_any_string_routes_with_finite_scores(router: SemanticRouter, text: str, context: list[str]) -> None:
    decision = router.route(text, context=context)
    assert decision.outcome in {"route", "clarify", "default"}
    assert decision.route in {*router.routes, "LLM"}
    for value in (decision.score, decision.confidence, decision.margin, *decision.scores.values()):
        assert math.isfinite(value)


def test_recalibrate_changes_only_the_rule(router: SemanticRouter) -> None:
    val = [
        LabelledExample("show ticket 7", "POSTGRES"),
        LabelledExample("weather in Rome", "EXTERNAL"),
        LabelledExample("reset password help", "VECTOR"),
        LabelledExample("qqq zzz", "oos"),
    ]
    again = router.recalibrate(val, config=FitConfig(oos_recall_floor=1.0))
    assert again.calibration.source == "val"
    assert again.calibration.oos_recall == 1.0
    assert again.routes == router.routes
    with pytest.raises(ConfigurationError, match="not in the router's routes"):
        router.recalibrate([LabelledExample("x", "NOPE")])
    with pytest.raises(ConfigurationError, match="in-scope"):
        router.recalibrate([LabelledExample("x", "oos")])


def test_with_encoder_is_the_same_router_behind_another_encoder(router: SemanticRouter) -> None:
    wrapped = BatchingEncoder(router.encoder)
    again = router.with_encoder(wrapped)
    assert again.encoder is wrapped
    assert again.routes == router.routes
    assert again.calibration == router.calibration
    texts = ["show ticket 7", "weather in Rome", "reset password help", "qqq zzz"]
    assert [d.to_dict() for d in again.route_many(texts)] == [d.to_dict() for d in router.route_many(texts)]
    with pytest.raises(ConfigurationError, match="the router expects"):
        router.with_encoder(HashingEncoder(dim=router.encoder.dim + 1))


def _with_detector(router: SemanticRouter) -> SemanticRouter:
    n = 10
    cal = replace(
        router.calibration,
        threshold=0.0,
        detector_weights=tuple([-1.0] + [0.0] * (n - 1)),
        detector_bias=0.5,
        detector_mean=(0.0,) * n,
        detector_scale=(1.0,) * n,
    )
    return SemanticRouter(router.head, cal, encoder=router.encoder, default_route="LLM")


def test_detector_rule_round_trips(router: SemanticRouter, tmp_path: Path) -> None:
    detecting = _with_detector(router)
    assert detecting.calibration.method == "oos-detector"
    decision = detecting.route("show ticket 12")
    # confidence = -(w.z + b) = p_top - 0.5 with these weights
    assert decision.confidence == pytest.approx(decision.score - 0.5, abs=1e-5)
    loaded = SemanticRouter.load(detecting.save(tmp_path / "r"), encoder=HashingEncoder(dim=512))
    assert loaded.calibration.method == "oos-detector"
    assert loaded.route("show ticket 12").confidence == pytest.approx(decision.confidence, abs=1e-6)


def test_detector_arrays_must_match() -> None:
    data = Calibration(threshold=0.1).to_dict()
    data["detector_weights"] = [1.0, 2.0]
    with pytest.raises(ConfigurationError, match="detector"):
        Calibration.from_dict(data)


def test_fit_tries_the_detector_with_enough_oos() -> None:
    train = [LabelledExample(t, r) for r, ts in ROUTES.items() for t in ts]
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
        "mike",
        "november",
        "oscar",
    ]
    oos = [LabelledExample(f"{a} {b}", "oos") for a in words[:6] for b in words[6:10]]
    val = [LabelledExample(f"{t} please", r) for r, ts in ROUTES.items() for t in ts] + oos
    router = SemanticRouter.fit(train, val=val, encoder=HashingEncoder(dim=512), default_route="LLM")
    assert any(row["beta"] == -1.0 for row in router.calibration.grid)  # the detector was measured
    assert router.calibration.method in {"oos-detector", "p_top+beta*knn"}
    said_default = [router.route(e.text).outcome == "default" for e in oos]
    assert sum(said_default) / len(oos) >= 0.8  # calibrated for recall 0.85 (the final detector is refitted)
    no_detector = SemanticRouter.fit(
        train, val=val, encoder=HashingEncoder(dim=512), default_route="LLM", config=FitConfig(oos_detector=False)
    )
    assert no_detector.calibration.method == "p_top+beta*knn"


@settings(max_examples=40, deadline=None)
@given(
    st.text(max_size=200),
    st.one_of(st.none(), st.text(max_size=30), st.lists(st.one_of(st.text(max_size=30), st.integers()), max_size=3)),
    st.one_of(st.none(), st.sampled_from(["POSTGRES", "VECTOR", "nope"]), st.integers()),
)
async def test_decide_never_fails_on_untrusted_context(
    router: SemanticRouter, goal: str, conversation: object, previous: object
) -> None:
    policy = RoutePolicy([spec.name for spec in CATALOG])
    stop_reason = ""
    try:
        decision = await router.decide(_request(goal, conversation=conversation, previous_route=previous))
    except RunStopError as stop:  # the only allowed way out: a stop reason
        stop_reason = stop.stop_reason
    if stop_reason:
        assert stop_reason.startswith(("clarify:", "no_route:"))
        return
    assert isinstance(policy.validate(decision.raw), RouteIntent) or not goal.strip()


@pytest.mark.parametrize(
    ("text", "context", "previous"),
    [
        ("show ticket 12", (), None),
        ("and number 2?", ("show ticket 12", "and number 2?"), None),
        ("ticket escalation", (), "VECTOR"),
        ("zzzz qqqq", ("weather in Paris",), None),
    ],
)
async def test_aroute_decides_exactly_as_route(
    router: SemanticRouter, text: str, context: tuple[str, ...], previous: str | None
) -> None:
    for variant in (
        router,
        _forced(router, threshold=router.calibration.threshold),
        _forced(router, clarify_margin=2.0),
    ):
        expected = variant.route(text, context=context, previous_route=previous)
        assert await variant.aroute(text, context=context, previous_route=previous) == expected


async def test_aroute_runs_the_encoder_off_the_event_loop(router: SemanticRouter) -> None:
    threads: list[int] = []

    class Recording(HashingEncoder):
        def encode(self, texts: Sequence[str]) -> Vectors:
            threads.append(threading.get_ident())
            return super().encode(texts)

    for encoder in (Recording(dim=512), BatchingEncoder(Recording(dim=512))):
        threads.clear()
        off_loop = SemanticRouter(router.head, router.calibration, encoder=encoder, default_route="LLM")
        await off_loop.aroute("show ticket 12")
        assert threads and threading.get_ident() not in threads
