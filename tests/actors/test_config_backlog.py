"""``[wire] maxBacklogBytes``: the per-peer byte bound on held frames comes from the config."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors._config import ConfigError, load_config
from wire import Registry, Server, ServerLimits


def test_the_byte_bound_defaults_to_64_mib_and_is_read_from_the_wire_table(
    tmp_path: Path,
) -> None:
    """Without the key the bound is 64 MiB; with it, the configured value."""
    assert ServerLimits().max_backlog_bytes == 64 * 1024 * 1024
    path = tmp_path / "c.toml"
    path.write_text("[wire]\nmaxBacklogBytes = 1048576\nmaxBacklog = 500\n")
    config = load_config(path)
    assert (config.wire.max_backlog_bytes, config.wire.max_backlog) == (1_048_576, 500)


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "true", '"8"'])
def test_the_byte_bound_must_be_a_positive_integer(tmp_path: Path, value: str) -> None:
    """Anything but a positive integer stops the start and names the key."""
    path = tmp_path / "c.toml"
    path.write_text(f"[wire]\nmaxBacklogBytes = {value}\n")
    with pytest.raises(ConfigError, match=r"\[wire\] maxBacklogBytes"):
        load_config(path)


async def test_the_server_holds_frames_up_to_the_configured_bytes(tmp_path: Path) -> None:
    """The server's pump is built with the configured byte bound."""
    limits = ServerLimits(max_backlog_bytes=12_345)
    server = Server(Registry(), limits=limits)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run, f"ipc://{tmp_path}/s.sock")
            assert server._pump is not None and server._pump.held._max_bytes == 12_345
            await server.aclose()
