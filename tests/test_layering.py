"""The import rules of the packages, checked on the source with ast.

Layers, each importing only what is below it:

- ``wire`` (the protocol and its transport) imports nothing of this project but itself;
- the domain packages of ``actors`` (``session_log``, ``session_references``,
  ``file_references``, ``store``) import each other only as `DOMAIN_DEPENDENCIES` allows, and
  never the runtime, the command line or the cluster;
- the runtime (``actors`` itself and its root modules) never imports the command line or the
  cluster; the cluster never imports the command line.

Every import counts: at the top of a module, inside a function, or under ``TYPE_CHECKING``, since
each is a dependency a reader has to hold in mind. For the same reason no two modules may depend
on each other, directly or through others.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("actors", "wire", "bench")
DOMAINS = ("session_log", "session_references", "file_references", "store")
#: Which domain packages each domain package may import.
DOMAIN_DEPENDENCIES: dict[str, frozenset[str]] = {
    "session_log": frozenset(),
    "session_references": frozenset(),
    "file_references": frozenset(),
    "store": frozenset({"session_log", "session_references"}),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {
    module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
}


def imports_of(name: str) -> Iterator[tuple[str, int]]:
    """The project modules that module ``name`` imports, with the line of each import."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield from _known(submodule if submodule in MODULES else base, node.lineno)


def _known(target: str, line: int) -> Iterator[tuple[str, int]]:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    if target:
        yield target, line


def layer(name: str) -> str:
    """``wire``, ``bench``, ``cli``, ``cluster``, ``runtime``, or ``domain:<package>``."""
    parts = name.split(".")
    if parts[0] != "actors":
        return parts[0]
    if len(parts) > 1 and parts[1] in DOMAINS:
        return f"domain:{parts[1]}"
    if len(parts) > 1 and parts[1] in ("cli", "cluster"):
        return parts[1]
    if parts[1:] == ["__main__"]:  # ``python -m actors`` is the command line
        return "cli"
    return "runtime"


def allowed(importer: str, imported: str) -> bool:
    """Whether a module of layer ``importer`` may import one of layer ``imported``."""
    if importer == imported or imported == "wire":
        return importer != "wire" or imported == "wire"
    if importer == "wire":
        return False
    if importer.startswith("domain:"):
        own = DOMAIN_DEPENDENCIES[importer.removeprefix("domain:")]
        return imported.startswith("domain:") and imported.removeprefix("domain:") in own
    return {
        "runtime": imported.startswith("domain:"),
        "cluster": imported == "runtime" or imported.startswith("domain:"),
        "cli": imported != "bench",
        "bench": True,
    }[importer]


def test_the_rules_can_fail() -> None:
    """The rules forbid the imports the layers exist to prevent."""
    assert not allowed("wire", "runtime")
    assert not allowed("domain:session_log", "runtime")
    assert not allowed("domain:store", "cluster")
    assert not allowed("domain:session_log", "domain:store")
    assert not allowed("runtime", "cli")
    assert not allowed("runtime", "cluster")
    assert not allowed("cluster", "cli")
    assert allowed("domain:store", "domain:session_log")
    assert allowed("cli", "cluster")


def test_every_domain_package_is_known() -> None:
    """Each subpackage of actors is a domain, the command line or the cluster."""
    subpackages = {path.parent.name for path in (ROOT / "actors").glob("*/__init__.py")}
    assert subpackages == {*DOMAINS, "cli", "cluster"}


def test_runtime_root_stays_small() -> None:
    """The runtime at the root of actors/ keeps to at most 16 modules; domains have packages."""
    assert len(list((ROOT / "actors").glob("*.py"))) <= 16


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_run_one_way(name: str) -> None:
    """No module imports a layer above its own."""
    wrong = [
        f"line {line}: {name} ({layer(name)}) imports {target} ({layer(target)})"
        for target, line in imports_of(name)
        if not allowed(layer(name), layer(target))
    ]
    assert not wrong


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target, [*path, target])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_find_cycle_finds_one() -> None:
    """The cycle finder reports a cycle through other modules, and none in a tree."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package: str) -> None:
    """No two modules depend on each other, directly or through others."""
    graph = {
        name: {target for target, _ in imports_of(name) if target != name}
        for name in MODULES
        if name.split(".")[0] == package
    }
    for targets in graph.values():
        targets.intersection_update(graph)
    assert find_cycle(graph) is None
