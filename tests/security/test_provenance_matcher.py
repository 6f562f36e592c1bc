"""The provenance matcher and the rules' defaults, through the public ledger and ``From`` rules.

A value counts as coming from a source when the ledger names that source among its origins; the properties
below are what a model does to a value it copies (re-case, re-space, split into groups, re-format a number, read
it out of a structured output) and what it must not be credited with (a value no source holds).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.core import From, ProvenanceLedger, Sensitive, Source, Worker, WorkerArgs
from routegate.errors import ConfigurationError

TOOL = Source("tool", "read_file", 1)
word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)
phrase = st.lists(word, min_size=1, max_size=4)
filler = st.lists(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=6), max_size=4)
separator = st.sampled_from([" ", "  ", "\n", "\t", ", ", " - ", "; "])


def tool_ledger(value: object) -> ProvenanceLedger:
    ledger = ProvenanceLedger.of_request("unrelated request")
    ledger.record(TOOL, value)
    return ledger


def sources(ledger: ProvenanceLedger, leaf: object) -> set[str]:
    return {str(origin.source) for origin in ledger.origins(leaf)}


@settings(max_examples=150, deadline=None)
@given(phrase, filler, filler, separator)
def test_a_value_embedded_in_a_larger_text_is_traced_to_it(
    words: list[str], before: list[str], after: list[str], sep: str
) -> None:
    value = " ".join(words)
    text = sep.join([*before, value, *after])
    assert "tool:read_file#1" in sources(tool_ledger(text), value)


@settings(max_examples=150, deadline=None)
@given(phrase, st.sampled_from([str.upper, str.title, str.lower]), separator)
def test_a_recased_respaced_value_is_traced(words: list[str], case: object, sep: str) -> None:
    source = "Note: " + " ".join(words) + "."
    reformatted = sep.join(words)
    assert callable(case)
    assert "tool:read_file#1" in sources(tool_ledger(source), case(reformatted))


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=6, max_size=30),
    st.integers(min_value=1, max_value=5),
    st.sampled_from([" ", "-", "\n", " / "]),
)
def test_a_value_split_into_groups_is_traced(value: str, size: int, sep: str) -> None:
    split = sep.join(value[i : i + size] for i in range(0, len(value), size))
    assert "tool:read_file#1" in sources(tool_ledger(f"IBAN: {split}"), value)
    assert "tool:read_file#1" in sources(tool_ledger(f"IBAN: {value}"), split)


@settings(max_examples=150, deadline=None)
@given(st.decimals(min_value=0, max_value=10_000_000, places=2, allow_nan=False, allow_infinity=False))
def test_a_number_formatted_differently_is_traced(amount: Decimal) -> None:
    european = f"{amount:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
    for text in (f"{amount:.2f}", f"{amount:,.2f} EUR", f"€{amount:,.2f}", f"Betrag: {european} EUR"):
        ledger = tool_ledger(text)
        for value in (amount, float(amount), f"{amount:.2f}", f"{amount:,.2f}"):
            assert "tool:read_file#1" in sources(ledger, value), (text, value)
        if amount == amount.to_integral_value():
            assert "tool:read_file#1" in sources(ledger, int(amount))


@settings(max_examples=100, deadline=None)
@given(st.lists(word, min_size=1, max_size=5), st.integers(min_value=0, max_value=4))
def test_a_value_inside_a_structured_output_is_traced_to_its_field(names: list[str], pick: int) -> None:
    output = {"payees": [{"name": f"payee {i}", "iban": f"GB{i:02d}{n}"} for i, n in enumerate(names)]}
    index = pick % len(names)
    chosen = output["payees"][index]["iban"]
    origins = [str(o) for o in tool_ledger(output).origins(chosen)]
    assert f"tool:read_file#1:payees[{index}].iban" in origins
    assert From("tool:read_file:iban").allows(tool_ledger(output).origins(chosen)[0])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.text(alphabet="abcdefghijklm ", max_size=30), max_size=5),
    st.text(alphabet="nopqrstuvwxyz", min_size=1, max_size=20),
)
def test_a_value_no_source_holds_is_traced_nowhere(texts: list[str], value: str) -> None:
    ledger = ProvenanceLedger.of_request(" ".join(texts), {"k": texts})
    ledger.record(TOOL, {"items": texts})
    assert ledger.origins(value) == ()


def test_a_word_is_not_found_inside_a_longer_word() -> None:
    assert sources(tool_ledger("pay bobby 10"), "bob") == set()
    assert sources(tool_ledger("pay bob 10"), "Bob") == {"tool:read_file#1"}


@settings(max_examples=50, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
        max_leaves=40,
    )
)
def test_any_source_can_be_recorded_and_matched(value: object) -> None:
    ledger = tool_ledger(value)
    ledger.origins("anything")  # never raises


def test_a_huge_source_is_cut_so_a_value_past_the_bound_is_not_credited() -> None:
    flood = ["filler text " * 1000] * 200  # 2.4 MB of text in 200 leaves: over the per-source bound
    assert tool_ledger([*flood, "GB29NWBK60161331926819"]).origins("GB29NWBK60161331926819") == ()
    assert tool_ledger(["GB29NWBK60161331926819", *flood]).origins("GB29NWBK60161331926819") != ()


def test_a_source_nested_past_the_bound_is_cut_not_raised() -> None:
    deep: object = "GB29NWBK60161331926819"
    for _ in range(5_000):
        deep = [deep]
    assert tool_ledger(deep).origins("GB29NWBK60161331926819") == ()  # cut: fails closed


# -- the rules' defaults ---------------------------------------------------------------------------------------------
class Transfer(WorkerArgs):
    recipient: Annotated[str, Sensitive]
    amount: Annotated[Decimal, From("user", "tool:read_file")]
    note: str = ""


def _send(recipient: str, amount: Decimal, note: str = "") -> dict[str, str]:
    return {"status": "done"}


def test_rules_are_read_from_annotations_and_unmarked_arguments_are_free() -> None:
    rules = Worker("send", _send, args_model=Transfer).flow_rules
    assert rules is not None
    assert rules.rules == {"recipient": From("user", "config"), "amount": From("user", "tool:read_file")}
    assert Sensitive == From("config", "user")
    assert Worker("plain", _send).flow_rules is None


def test_flows_override_annotations_and_must_name_arguments() -> None:
    rules = Worker("send", _send, args_model=Transfer, flows={"recipient": From("*")}).flow_rules
    assert rules is not None and rules.rules["recipient"] == From("*")
    with pytest.raises(ConfigurationError, match="'amout', which is not an argument"):
        Worker("send", _send, args_model=Transfer, flows={"amout": Sensitive})


@pytest.mark.parametrize("pattern", ["usr", "tool:", "tool: x", "tool:a:", "tool:a:b:", ""])
def test_an_unknown_source_pattern_is_refused_at_build_time(pattern: str) -> None:
    with pytest.raises(ConfigurationError, match="unknown flow source"):
        From(pattern)


def test_a_worker_name_may_hold_colons_as_a_dispatchers_targets_do() -> None:
    """``tool:a:b:c`` (once refused) names the worker ``a:b:c`` or the field ``c`` of the worker ``a:b``."""
    ledger = ProvenanceLedger.of_request("pay")
    ledger.record_tool("mcp:bank/read_file", {"iban": "GB29NWBK60161331926819", "note": "XX98ATTK00006666"})
    iban, note = ledger.origins("GB29NWBK60161331926819")[0], ledger.origins("XX98ATTK00006666")[0]
    assert From("tool:mcp:bank/read_file").allows(iban) and From("tool:mcp:bank/read_file").allows(note)
    assert From("tool:mcp:bank/read_file:iban").allows(iban)
    assert not From("tool:mcp:bank/read_file:iban").allows(note)
    assert not From("tool:mcp").allows(iban) and not From("tool:mcp:bank").allows(iban)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=8, max_size=24))
def test_sensitive_takes_the_users_words_and_refuses_a_tools(iban: str) -> None:
    rules = Worker("send", _send, args_model=Transfer).flow_rules
    assert rules is not None
    from_user = ProvenanceLedger.of_request(f"send 5 to {iban}")
    assert rules.check({"recipient": iban, "amount": Decimal(5), "note": ""}, from_user).refusal is None
    from_tool = ProvenanceLedger.of_request("pay the bill, 5 EUR")
    from_tool.record_tool("read_file", f"pay to {iban}")
    refusal = rules.check({"recipient": iban, "amount": Decimal(5), "note": "x"}, from_tool).refusal
    assert refusal is not None and refusal.arg == "recipient" and refusal.found == ("tool:read_file#1",)
    # an argument without a rule may hold a value no source holds
    assert rules.check({"recipient": iban, "amount": Decimal(5), "note": "zzqx"}, from_user).refusal is None


class Note(WorkerArgs):
    secret: Annotated[str, Sensitive]
    free: str
    anywhere: Annotated[str, From("*")]


def _note(secret: str, free: str, anywhere: str) -> None:
    return None


text = st.text(alphabet="abcdef 0123456789.,-", max_size=40)


@settings(max_examples=200, deadline=None)
@given(text, st.lists(text, max_size=3), text, text, text)
def test_the_defaults_sensitive_refuses_exactly_what_no_user_or_config_source_holds(
    goal: str, outputs: list[str], secret: str, free: str, anywhere: str
) -> None:
    rules = Worker("note", _note, args_model=Note).flow_rules
    assert rules is not None
    ledger = ProvenanceLedger.of_request(goal, {"signature": "abc"})
    for output in outputs:
        ledger.record_tool("read", {"text": output})
    refusal = rules.check({"secret": secret, "free": free, "anywhere": anywhere}, ledger).refusal
    trusted = any(o.source.kind in ("user", "config") for o in ledger.origins(secret))
    if trusted:
        assert refusal is None  # free and anywhere never refuse, whatever they hold
    else:  # a value with nothing to trace ("", ".,-") is refused too: it cannot be checked
        assert refusal is not None and refusal.arg == "secret"
