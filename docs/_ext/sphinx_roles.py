"""A griffe extension for the API reference: routegate's docstrings use Sphinx roles (``:class:`~routegate.X```)
and ``::`` literal-block markers, which Markdown does not know. Each role becomes inline code linked to its target
when the reference documents that target (an optional autorefs link: no link and no warning otherwise)."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|data|mod|exc|obj):`(~?)([^`<]+?)(?:\s*<([^>]+)>)?`")
LITERAL_MARKER = re.compile(r"(?<=\S)::$", re.MULTILINE)  # "text::" before an indented block: "text:"
LONE_LITERAL_MARKER = re.compile(r"^[ \t]*::[ \t]*\n", re.MULTILINE)  # a line of its own: dropped


class SphinxRoles(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        docstring = obj.docstring
        if docstring is None:
            return
        module = obj.path if obj.is_module else obj.module.path
        owner = obj if obj.is_class else obj.parent if obj.parent is not None and obj.parent.is_class else None
        scopes = {"module": module, "class": owner.path if owner is not None else module}
        text = ROLE.sub(lambda m: _link(m, scopes), docstring.value)
        docstring.value = LONE_LITERAL_MARKER.sub("", LITERAL_MARKER.sub(":", text))


def _link(match: re.Match[str], scopes: dict[str, str]) -> str:
    """The role as inline code, linked to its target (relative names: a method's or attribute's in the class being
    documented, anything else's in its module)."""
    role, tilde, text, explicit = match.groups()
    target = (explicit or text).strip().lstrip(".")
    shown = text.strip().rsplit(".", 1)[-1] if tilde else text.strip()
    scope = scopes["class" if role in ("meth", "attr") else "module"]
    identifier = target if target.startswith("routegate") else f"{scope}.{target}"
    return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'
