"""The knowledge sources of a desk: Markdown, plain text and HTML files, read and cut into chunks.

A document's title is its first Markdown heading (or HTML ``<title>`` / ``<h1>``), else its file name. Chunks
follow the document's sections (a heading starts one) and its paragraphs, at most ``chunk_chars`` characters each;
every chunk keeps the heading it sits under, so an answer can say where its quote comes from.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Final

from routegate.apps.configured.config import DeskConfigError

SUFFIXES: Final = frozenset({".md", ".markdown", ".txt", ".text", ".html", ".htm"})
MAX_FILE_BYTES: Final = 2 * 1024 * 1024
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


@dataclass(frozen=True, slots=True)
class Document:
    source: str  # the path as the desk names it: relative to the knowledge path's parent
    title: str
    text: str  # Markdown-ish plain text: headings as "# ..." lines
    digest: str  # sha256 of the file's bytes: what incremental ingest compares


@dataclass(frozen=True, slots=True)
class Chunk:
    source: str
    index: int
    heading: str
    content: str


class _HtmlText(HTMLParser):
    """HTML → plain text with headings as Markdown ``#`` lines; scripts and styles dropped."""

    _BLOCK: Final = frozenset({"p", "div", "li", "br", "tr", "section", "article", "ul", "ol", "table"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False
        self._heading: int | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = int(tag[1])
            self.parts.append("\n\n" + "#" * self._heading + " ")
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = None
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title += data
            return
        self.parts.append(" ".join(data.split()) if self._heading else data)


def _html_text(raw: str) -> tuple[str, str]:
    parser = _HtmlText()
    parser.feed(raw)
    parser.close()
    text = re.sub(r"[ \t]+", " ", "".join(parser.parts))
    text = re.sub(r"\n\s*\n\s*", "\n\n", text).strip()
    return text, " ".join(parser.title.split())


def read_document(path: Path, source: str) -> Document:
    data = path.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise DeskConfigError(
            f"{path} is {len(data)} bytes, over the {MAX_FILE_BYTES}-byte limit of a document; split it"
        )
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DeskConfigError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None
    title = ""
    if path.suffix.lower() in (".html", ".htm"):
        text, title = _html_text(raw)
    else:
        text = raw.replace("\r\n", "\n").strip()
    if not title:
        heading = next((m.group(2) for line in text.splitlines() if (m := _HEADING.match(line))), None)
        title = heading or path.stem.replace("_", " ").replace("-", " ").strip().capitalize()
    return Document(source=source, title=title, text=text, digest=hashlib.sha256(data).hexdigest())


def document_files(root: Path) -> Iterator[tuple[Path, str]]:
    """The documents under ``root`` (a folder, searched recursively, or one file), with their source names."""
    if root.is_file():
        yield root, root.name
        return
    if not root.is_dir():
        raise DeskConfigError(f"{root} is not a folder or a file; give the docs folder")
    for path in sorted(root.rglob("*")):
        hidden = any(part.startswith(".") for part in path.relative_to(root).parts)
        if path.is_file() and path.suffix.lower() in SUFFIXES and not hidden:
            yield path, f"{root.name}/{path.relative_to(root).as_posix()}"


def read_documents(roots: list[Path]) -> list[Document]:
    documents: list[Document] = []
    for root in roots:
        try:
            documents += [read_document(path, source) for path, source in document_files(root)]
        except OSError as exc:
            raise DeskConfigError(
                f"{root}: cannot read the documents ({exc}); check the path and its permissions"
            ) from None
    return documents


def chunks_of(document: Document, max_chars: int) -> list[Chunk]:
    """The document's sections, each cut at paragraph boundaries into pieces of at most ``max_chars``."""
    sections: list[tuple[str, list[str]]] = [(document.title, [])]
    for block in re.split(r"\n\s*\n", document.text):
        block = block.strip()
        if not block:
            continue
        lines = block.splitlines()
        opening = _HEADING.match(lines[0])
        if opening:
            sections.append((opening.group(2), []))
            block = "\n".join(lines[1:]).strip()
            if not block:
                continue
        sections[-1][1].append(" ".join(block.split()))
    out: list[Chunk] = []
    for heading, paragraphs in sections:
        piece = ""
        for paragraph in paragraphs:
            for part in _split_long(paragraph, max_chars):
                if piece and len(piece) + 1 + len(part) > max_chars:
                    out.append(Chunk(document.source, len(out), heading, piece))
                    piece = ""
                piece = f"{piece} {part}".strip()
        if piece:
            out.append(Chunk(document.source, len(out), heading, piece))
    return out


def _split_long(paragraph: str, max_chars: int) -> list[str]:
    if len(paragraph) <= max_chars:
        return [paragraph]
    parts: list[str] = []
    current = ""
    for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
        while len(sentence) > max_chars:
            parts.append(sentence[:max_chars])
            sentence = sentence[max_chars:]
        if current and len(current) + 1 + len(sentence) > max_chars:
            parts.append(current)
            current = ""
        current = f"{current} {sentence}".strip()
    if current:
        parts.append(current)
    return parts
