"""The DSH reference endpoints over the wire, against a real server process and real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from wire import SessionReferenceError, open_client


async def make_agent(client: Any, cwd: Path, title: str) -> str:
    created = await client.call("agents/create", {"cwd": str(cwd), "title": title})
    return str(created["agentId"])


async def test_file_references_list(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """fileReferences/list answers inside the agent's cwd, path-only, and never leaves it."""
    _, address = server_process
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "mailbox.py").write_text("x")
    (work / ".env").write_text("secret")
    (tmp_path / "outside-secret.txt").write_text("secret")
    async with open_client(address) as client:
        agent = await make_agent(client, work, "files")
        proxy = client.agent(agent).fileReferences
        with trio.fail_after(20):
            assert await proxy.list("") == [{"path": "src", "kind": "directory"}]
            assert await proxy.list("mailb") == [{"path": "src/mailbox.py", "kind": "file"}]
            assert await proxy.list(".e") == [{"path": ".env", "kind": "file"}]
            for escape in ("../", "../outside", "/", "~/", str(tmp_path) + "/"):
                assert await proxy.list(escape) == []


async def test_candidates_rank_workspace_first(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """candidates excludes the agent itself, ranks same-cwd sessions first and builds the
    canonical mention from the title."""
    _, address = server_process
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    async with open_client(address) as client:
        with trio.fail_after(20):
            near = await make_agent(client, here, "Near notes")
            await make_agent(client, elsewhere, "Far notes")
            me = await make_agent(client, here, "Me")
            found = await client.agent(me).sessionReferenceResolver.candidates("notes")
    assert [c["label"] for c in found] == ["Near notes", "Far notes"]
    assert found[0]["sessionId"] == near
    assert found[0]["sameWorkspace"] is True
    assert found[1]["sameWorkspace"] is False
    assert found[0]["mention"].startswith("@[Near notes](dsh-session:")
    assert all(c["sessionId"] != me for c in found)


async def test_prepare_freezes_a_referenced_session(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """prepare returns the content and a context message naming the source; referencing
    oneself is the upstream SESSION_REFERENCE_SELF_REFERENCE error, code kept."""
    _, address = server_process
    async with open_client(address) as client:
        with trio.fail_after(20):
            source = await make_agent(client, tmp_path, "Source")
            me = await make_agent(client, tmp_path, "Me")
            resolver = client.agent(me).sessionReferenceResolver
            prepared = await resolver.prepare("see the source", [{"sessionId": source}])
            assert prepared["content"] == "see the source"
            context = str(prepared["additionalContext"])
            assert "<referenced-sessions>" in context
            assert source in context
            with pytest.raises(SessionReferenceError) as info:
                await resolver.prepare("me", [{"sessionId": me}])
            assert info.value.code == "SESSION_REFERENCE_SELF_REFERENCE"
            no_refs = await resolver.prepare("plain", [])
            assert no_refs == {"content": "plain"}
