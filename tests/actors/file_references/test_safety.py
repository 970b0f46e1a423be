"""Safety of fileReferences/list: no query reveals a name outside the agent's cwd (spec §4.7,
§4.8). An adversarial corpus runs against a cwd with secrets right next to it."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pytest
import trio

import actors.file_references._fs as fs
import actors.file_references._index as index_module
from actors.file_references._query import FileReferenceCandidate
from actors.file_references._service import FileReferenceService

SECRET = "SECRET"


def make_trap(base: Path) -> Path:
    """A cwd surrounded by secrets, with every kind of link that points out of it."""
    (base / f"{SECRET}_NEXT_TO_CWD.txt").write_text("x")
    (base / "secret-dir" / "sub").mkdir(parents=True)
    (base / "secret-dir" / f"{SECRET}_IN_DIR.txt").write_text("x")
    (base / "secret-dir" / "sub" / f"{SECRET}_DEEP.txt").write_text("x")
    (base / "cwd-sibling").mkdir()
    (base / "cwd-sibling" / f"{SECRET}_SIBLING.txt").write_text("x")
    # Shares the cwd's name as a prefix: catches "startswith" containment bugs.
    (base / "cwdx").mkdir()
    (base / "cwdx" / f"{SECRET}_PREFIX_TWIN.txt").write_text("x")
    root = base / "cwd"
    for name in ("src/main.py", "docs/readme.md", "a/b/c/deep.txt", ".config/settings.toml"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "escape").symlink_to(base / "secret-dir", target_is_directory=True)
    (root / "escape-file").symlink_to(base / f"{SECRET}_NEXT_TO_CWD.txt")
    (root / "abs-escape").symlink_to("/", target_is_directory=True)
    (root / "a" / "b" / "up").symlink_to("../../..", target_is_directory=True)
    (root / "loop").symlink_to(".", target_is_directory=True)
    (root / "nested").mkdir()
    (root / "nested" / "inner-escape").symlink_to(base / "secret-dir", target_is_directory=True)
    (root / "nested" / f"rel-{SECRET.lower()}").symlink_to(f"../../{SECRET}_NEXT_TO_CWD.txt")
    return root


def escaping_directory_parts(base: Path, root: Path) -> list[str]:
    """Directory parts that leave the cwd by every route the issue names, and then some."""
    home = os.path.expanduser("~")
    return [
        # ".." segments
        "../",
        "../../",
        "../../../",
        "../secret-dir/",
        "../secret-dir/sub/",
        "../cwd-sibling/",
        "../cwdx/",
        "../cwd/../secret-dir/",
        "./../",
        "a/../../",
        "a/b/../../../",
        "src/../../",
        "src/../../secret-dir/sub/",
        "..//",
        "..///secret-dir/",
        "a/b/c/../../../../",
        "./././../",
        # absolute paths outside
        "/",
        "//",
        "///",
        "/etc/",
        "/tmp/",
        f"{base}/",
        f"{base}/secret-dir/",
        f"{base}/cwdx/",
        f"{base}/cwd-sibling/",
        f"{root}/../",
        f"{root}/../secret-dir/",
        f"{root}x/",
        f"{root}/./../cwdx/",
        f"{home}/",
        # links pointing outside, at any depth and however spelled
        "escape/",
        "escape/sub/",
        "./escape/",
        "escape//",
        "escape/./",
        "src/../escape/",
        "escape-file/",
        "abs-escape/",
        "abs-escape/etc/",
        f"{root}/escape/",
        f"{root}/abs-escape/",
        "a/b/up/",
        "a/b/up/secret-dir/",
        "a/b/up/cwd/",
        "loop/",
        "loop/loop/",
        "loop/src/",
        "nested/inner-escape/",
        "nested/inner-escape/sub/",
        # home directory spellings (never expanded)
        "~/",
        "~root/",
        "~/.ssh/",
        "~/../../",
        # drive prefixes and UNC paths
        "C:/",
        "C:/Windows/",
        "c:\\",
        "D:\\secret\\",
        "\\\\server\\share\\",
        "\\\\?\\C:\\",
        # backslash traversal
        "..\\",
        "..\\..\\",
        "a\\..\\..\\",
        "src\\..\\..\\secret-dir\\",
        # encodings and look-alikes are literal names, not traversal
        "%2e%2e/",
        "%2e%2e%2f/",
        "..%2f/",
        "..;/",
        "\u2025/",
        "\uff0e\uff0e/",
        # invalid characters
        "\x00/",
        "../\x00/",
        "..\x00/",
    ]


FRAGMENTS = ["", "s", "S", SECRET, "sec", ".", "..", "e", "x"]

GLOBAL_QUERIES = [
    "..",
    "...",
    "~",
    SECRET,
    SECRET.lower(),
    "escape",
    "inner-escape",
    "up",
    "loop",
    "etc",
    "passwd",
    "C:",
    "\u2215etc",
    ".secret",
    "sub",
    "deep",
    "twin",
    "sibling",
]


def assert_inside(root: Path, candidate: FileReferenceCandidate) -> None:
    """The candidate names an entry inside the root, reached without crossing any link."""
    assert SECRET.lower() not in candidate.path.lower(), candidate
    path = candidate.path
    target = os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
    relative = os.path.relpath(target, root)
    assert relative != "..", candidate
    assert not relative.startswith("../"), candidate
    current = str(root)
    for segment in relative.split("/"):
        current = os.path.join(current, segment)
        info = os.lstat(current)
        assert not stat.S_ISLNK(info.st_mode), candidate


@pytest.fixture(params=[True, False], ids=["descriptors", "lstat-walk"])
def descriptors(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    use = bool(request.param)
    monkeypatch.setattr(fs, "USE_DESCRIPTORS", use)
    return use


@pytest.fixture
async def service(nursery: trio.Nursery) -> FileReferenceService:
    svc = FileReferenceService()
    await nursery.start(svc.run)
    return svc


async def test_adversarial_corpus_leaks_nothing(
    tmp_path: Path, service: FileReferenceService, descriptors: bool
) -> None:
    """Hundreds of escaping queries all answer [] and no answer names anything outside."""
    root = make_trap(tmp_path)
    queries = [
        part + fragment
        for part, fragment in itertools.product(escaping_directory_parts(tmp_path, root), FRAGMENTS)
    ]
    assert len(queries) >= 200
    with trio.fail_after(60):
        for query in queries:
            result = await service.list("agent", root, query)
            assert result == [], query
        for query in GLOBAL_QUERIES:
            for candidate in await service.list("agent", root, query):
                assert_inside(root, candidate)


async def test_contained_queries_still_answer(
    tmp_path: Path, service: FileReferenceService, descriptors: bool
) -> None:
    """The same tree answers legitimate queries, each candidate provably inside the cwd."""
    root = make_trap(tmp_path)
    legit = {
        "": ["a", "docs", "nested", "src"],
        "a/b/": ["a/b/c"],
        "a/b/c/": ["a/b/c/deep.txt"],
        "src/../docs/": ["src/../docs/readme.md"],
        f"{root}/src/": [f"{root}/src/main.py"],
        ".config/": [".config/settings.toml"],
        "nested/": [],
        "deep": ["a/b/c/deep.txt"],
        ".toml": [".config/settings.toml"],
    }
    with trio.fail_after(30):
        for query, expected in legit.items():
            result = await service.list("agent", root, query)
            assert [candidate.path for candidate in result] == expected, query
            for candidate in result:
                assert_inside(root, candidate)


async def test_global_index_holds_nothing_from_outside(
    tmp_path: Path, service: FileReferenceService
) -> None:
    """Every path in the agent's index lies inside the cwd, none behind a link."""
    root = make_trap(tmp_path)
    with trio.fail_after(30):
        await service.list("agent", root, "x")
        every = await service.list("agent", root, ".")  # dot query: hidden paths visible too
    assert every
    for candidate in every:
        assert_inside(root, candidate)
    index = index_module.build_index(root, service.config)
    for path, is_directory in index.entries():
        assert_inside(root, FileReferenceCandidate(path, "directory" if is_directory else "file"))
