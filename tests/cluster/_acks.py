"""A client-side log of acknowledged appends, checked against the session logs on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from actors._log_reader import load_session


@attrs.frozen
class Ack:
    agent: str
    text: str
    seq: int


@attrs.define
class AckLog:
    """Every append the server acknowledged, as the client saw it."""

    acks: list[Ack] = attrs.Factory(list)
    failures: list[tuple[float, str]] = attrs.Factory(list)

    def record(self, agent: str, text: str, result: dict[str, Any]) -> None:
        self.acks.append(Ack(agent, text, result["seqs"][0]))

    def missing(self, paths: dict[str, Path]) -> list[Ack]:
        """Acknowledged appends not found (text at its seq) in the logs on disk."""
        found: dict[str, dict[int, str]] = {}
        for agent, path in paths.items():
            loaded = load_session(path, expected_id=agent)
            texts: dict[int, str] = {}
            for event in loaded.events[: loaded.stored_count]:
                if event.get("type") == "user/message":
                    texts[event["seq"]] = event["data"]["id"]
            found[agent] = texts
        return [ack for ack in self.acks if found[ack.agent].get(ack.seq) != ack.text]
