"""No document cites a file that is not in the repository.

The documents are README.md, CONTRIBUTING.md, SECURITY.md, docs/*.md,
clients/typescript/README.md and bench/README.md. Fenced code blocks hold examples, not
citations, and are skipped. A citation is:

- the target of a Markdown link that is neither a URL (``scheme:``) nor an anchor (``#…``),
  resolved against the document's folder as a renderer does (its ``#fragment`` dropped);
- a path with a folder and a file extension (``wire/_schema.py``, ``docs/protocol.md``,
  ``src/proxy.ts``), in backticks or in plain text, found under the repository root or the
  document's folder (``clients/typescript/README.md`` names its own ``src/…``); a ``::test``
  after it is ignored;
- a bare ``*.md`` name (``SECURITY.md``, ``session-reference.md``), found in the document's
  folder, the root or ``docs/``.

Each must exist, with two exceptions:

- a path under ``bench/results/`` or the TypeScript client's build folder (``dist/``,
  ``clients/typescript/dist/``): the benchmarks and ``npm run build`` write there (git ignores
  both), so naming one says where output goes, not that the repository holds it;
- a file outside the repository (a ``../shared/spec/…`` document, a spec of upstream DSH such
  as ``session-reference.md``): allowed only when the paragraph that cites it says
  "outside this repository" (or "outside the repository").

Directories are not checked (``members/``, ``agents/`` are key prefixes and endpoint
namespaces as often as folders).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors._serve import describe_builtin

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted(
    {
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "SECURITY.md",
        *(ROOT / "docs").glob("*.md"),
        ROOT / "clients" / "typescript" / "README.md",
        ROOT / "bench" / "README.md",
    }
)
#: Where the benchmarks write their reports and tsc the TypeScript client (ignored by git).
GENERATED = ("bench/results/", "dist/", "clients/typescript/dist/")
#: Words that mark a citation of a file outside the repository.
EXTERNAL = ("outside this repository", "outside the repository")
#: Citations another change has to fix (its files are not this test's to edit): document →
#: cited file. The test fails once one of them is fixed, so the entry is removed.
PENDING: set[tuple[str, str]] = set()

FENCED = re.compile(r"^ *(```|~~~).*?^ *\1[ \t]*$", re.M | re.S)
CODE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_EXT = r"(?:py|md|ts|js|json|toml|c|h|png|svg|txt|sh|ya?ml|cfg|ini|lock|zst|zstd|jsonl)"
PATH = re.compile(
    rf"(?<![\w./<>~:$-])((?:\.\.?/)*[\w.-]+(?:/[\w.-]+)+\.{_EXT}|[\w.-]+\.md)(?![\w/-])"
)


def citations(text: str) -> Iterator[tuple[str, str]]:
    """``(paragraph, cited path)`` for every citation in a document's ``text``."""
    text = FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for paragraph in re.split(r"\n[ \t]*\n", text):
        for span in CODE.finditer(paragraph):
            for path in PATH.finditer(span.group(2)):
                yield paragraph, path.group(1)
        prose = CODE.sub(" ", paragraph)
        for link in LINK.finditer(prose):
            target = link.group(1)
            if not re.match(r"[A-Za-z][\w+.-]*:", target) and not target.startswith("#"):
                yield paragraph, target.split("#", 1)[0]
        for path in PATH.finditer(LINK.sub("]", prose)):
            yield paragraph, path.group(1)


def missing(document: Path, cited: str) -> bool:
    """Whether ``cited`` names no file of the repository, from ``document``."""
    if not cited or cited.startswith(GENERATED):
        return False
    if "/" not in cited:
        return not any(
            (folder / cited).exists() for folder in (document.parent, ROOT, ROOT / "docs")
        )
    for base in (document.parent, ROOT):
        found = (base / cited).resolve()
        if found.is_relative_to(ROOT) and found.exists():
            return False
    return True


def broken(document: Path) -> set[tuple[str, str]]:
    """``(document, cited file)`` for each citation of ``document`` that names no file of the
    repository and is not marked as outside it."""
    out = set()
    for paragraph, cited in citations(document.read_text(encoding="utf-8")):
        marked = any(words in " ".join(paragraph.split()) for words in EXTERNAL)
        if missing(document, cited) and not marked:
            out.add((str(document.relative_to(ROOT)), cited))
    return out


def test_the_rule_finds_what_it_should() -> None:
    """Backticked, linked and plain paths are found; code blocks, URLs and marked ones not."""
    text = (
        "See `wire/nothing_here.py` and [the spec](docs/none.md), also docs/gone.md.\n\n"
        "```sh\ncat wire/in_a_block.py\n```\n\n"
        "Upstream's `../shared/spec/x.md` (outside this repository) and https://a.b/c/d.md.\n\n"
        "`session-reference.md` is upstream's.\n\n"
        "Reports: `bench/results/x.json`. Real: `wire/_schema.py`, [`README.md`](README.md)."
    )
    found = {
        cited for paragraph, cited in citations(text) if not any(w in paragraph for w in EXTERNAL)
    }
    assert {c for c in found if missing(ROOT / "README.md", c)} == {
        "wire/nothing_here.py",
        "docs/none.md",
        "docs/gone.md",
        "session-reference.md",
    }


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_documents_cite_only_files_in_the_repository(document: Path) -> None:
    """Every file a document cites exists, or is marked as outside the repository."""
    found = broken(document)
    pending = {entry for entry in PENDING if entry[0] == str(document.relative_to(ROOT))}
    assert found - pending == set()
    assert pending <= found, f"fixed, remove from PENDING: {sorted(pending - found)}"


def test_describe_docs_cite_only_files_in_the_repository() -> None:
    """The doc strings that system/describe serves cite no missing file."""
    description: dict[str, Any] = describe_builtin()
    texts = [str(e.get("doc", "")) for e in description["endpoints"]]
    texts += [str(d.get("description", "")) for d in description["$defs"].values()]
    cited = {path.group(1) for text in texts for path in PATH.finditer(text)}
    assert {c for c in cited if missing(ROOT / "README.md", c)} == set()
