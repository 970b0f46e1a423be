"""The import rules of the layers, checked on the source with ast."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WIRE = Path(__file__).resolve().parents[2] / "wire"
SANS_IO = [
    "_messages.py",
    "_codec.py",
    "_codes.py",
    "_errors.py",
    "_state.py",
    "_server_protocol.py",
    "_client_protocol.py",
    "_shapes.py",
    "_constraints.py",
    "_marks.py",
    "_metrics.py",
    "_schema.py",
    "_extension_types.py",
    "_endpoints.py",
    "_detached.py",
    "_codec_relay.py",
    "_staging.py",
    "_call_context.py",
    "_server_system.py",
    "_limits.py",
]


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", SANS_IO)
def test_core_is_sans_io(module: str) -> None:
    """The protocol core imports neither trio nor zmq, and reads no clock."""
    roots = imported_roots(WIRE / module)
    assert not roots & {"trio", "zmq", "time", "socket", "asyncio"}


@pytest.mark.parametrize("path", sorted(WIRE.glob("*.py")), ids=lambda p: p.name)
def test_wire_never_imports_actors(path: Path) -> None:
    """wire/ stands alone: the import direction is downward only."""
    assert "actors" not in imported_roots(path)
