"""Labelled routing examples and their JSONL form (``{"text": ..., "label": ...}``, one object per line)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from routegate.errors import ConfigurationError

OOS_LABEL = "oos"


@dataclass(frozen=True, slots=True)
class LabelledExample:
    """One utterance and the route it belongs to (``oos`` = no route fits)."""

    text: str
    label: str


def json_problem(exc: json.JSONDecodeError) -> str:
    """The column of a line that is not JSON and what is wrong there, in full (``json``'s own message ends in a
    dangling "at"; the column and the character found are what a reader needs)."""
    what = exc.msg.removesuffix(" at").strip()
    found = exc.doc[exc.pos] if exc.pos < len(exc.doc) else None
    if what == "Invalid control character" and found is not None:
        what = f"a raw control character (U+{ord(found):04X}) inside a string; write it as \\u{ord(found):04x} or remove it"
    elif what == "Unterminated string starting":
        what = "the string that starts here is not closed"
    else:
        what = f"{what[0].lower()}{what[1:]}, " + ("but the line ends there" if found is None else f"found {found!r}")
    return f"column {exc.colno}: not valid JSON: {what}"


def parse_examples(lines: Iterable[str], *, source: str = "<input>") -> list[LabelledExample]:
    """Parse JSONL lines; blank lines are skipped, anything else malformed is refused with its line number."""
    out: list[LabelledExample] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"{source}, line {number}, {json_problem(exc)}; each line is one JSON object like "
                '{"text": "...", "label": "..."}'
            ) from exc
        if not isinstance(obj, dict):
            raise ConfigurationError(f"{source}:{number}: expected an object with 'text' and 'label'")
        text, label = obj.get("text"), obj.get("label")
        if not isinstance(text, str) or not isinstance(label, str) or not label.strip():
            raise ConfigurationError(
                f"{source}:{number}: 'text' must be a string and 'label' a non-empty string, "
                f"got text={type(text).__name__}, label={label!r}"
            )
        out.append(LabelledExample(text, label.strip()))
    return out


def load_examples(path: str | Path) -> list[LabelledExample]:
    """Read a JSONL file of labelled examples."""
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as handle:
            return parse_examples(handle, source=str(p))
    except OSError as exc:
        raise ConfigurationError(f"cannot read examples from {p}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start] if exc.start < len(exc.object) else 0
        raise ConfigurationError(
            f"cannot read examples from {p}: not UTF-8 text (byte 0x{bad:02X} at byte offset {exc.start}); "
            "save the file as UTF-8"
        ) from exc


def dump_examples(examples: Sequence[LabelledExample]) -> str:
    return "".join(json.dumps({"text": e.text, "label": e.label}, ensure_ascii=False) + "\n" for e in examples)
