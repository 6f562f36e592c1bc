"""The knowledge sources of a desk: Markdown, plain text and HTML files, read and cut into chunks.

Only regular files are read, each at most :data:`MAX_FILE_BYTES` (checked before it is read); a symbolic link in a
docs folder is passed by and said, never followed (:mod:`._files`).

A document's title is its first Markdown heading (or HTML ``<title>`` / ``<h1>``), else its file name. Chunks
follow the document's sections (a heading starts one) and its paragraphs, at most ``chunk_chars`` characters each;
every chunk keeps the heading it sits under, so an answer can say where its quote comes from.
"""

from __future__ import annotations

import hashlib
import re
import stat
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from typing import Final

from routegate.apps.configured._files import read_regular, regular_files
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


def document(data: bytes, *, name: str, source: str, shown: str) -> Document:
    """A document from its file's bytes: ``name`` the file's name (its suffix says HTML), ``shown`` where it is."""
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DeskConfigError(
            f"{shown} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None
    title = ""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in (".html", ".htm"):
        text, title = _html_text(raw)
    else:
        text = raw.replace("\r\n", "\n").strip()
    if not title:
        heading = next((m.group(2) for line in text.splitlines() if (m := _HEADING.match(line))), None)
        stem = PurePosixPath(name).stem
        title = heading or stem.replace("_", " ").replace("-", " ").strip().capitalize()
    return Document(source=source, title=title, text=text, digest=hashlib.sha256(data).hexdigest())


def is_document(name: str) -> bool:
    """Markdown, plain text and HTML, by the file's suffix."""
    return PurePosixPath(name).suffix.lower() in SUFFIXES


@dataclass(frozen=True, slots=True)
class DocumentFiles:
    """The documents of some knowledge paths, and what was passed by (a symbolic link, a special file): ``skipped``
    holds ``source (why)`` lines to show. ``files`` keeps each document's bytes (``desk init`` copies them)."""

    documents: tuple[Document, ...]
    skipped: tuple[str, ...] = ()
    files: tuple[bytes, ...] = ()


def read_documents(roots: list[Path]) -> DocumentFiles:
    """The documents under ``roots`` (folders, searched recursively, or files): regular files only, at most
    :data:`MAX_FILE_BYTES` each (refused before it is read), symbolic links passed by (:mod:`._files`)."""
    documents: list[Document] = []
    files: list[bytes] = []
    skipped: list[str] = []
    for root in roots:
        try:
            mode = root.lstat().st_mode
            if stat.S_ISDIR(mode):
                folder = regular_files(root, wanted=is_document, limit=MAX_FILE_BYTES)
                found = [(f"{root.name}/{path}", path.name, data) for path, data in folder.files]
                skipped += [f"{root.name}/{path} ({why})" for path, why in folder.skipped]
            elif stat.S_ISREG(mode):
                found = [(root.name, root.name, read_regular(root, limit=MAX_FILE_BYTES))]
            else:
                raise DeskConfigError(f"{root} is not a folder or a regular file; give the docs folder")
        except OSError as exc:
            raise DeskConfigError(
                f"{root}: cannot read the documents ({exc.strerror or exc}); check the path and its permissions"
            ) from None
        for source, name, data in found:
            documents.append(document(data, name=name, source=source, shown=str(root.parent / source)))
            files.append(data)
    return DocumentFiles(tuple(documents), tuple(skipped), tuple(files))


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
