"""CURVE encryption, the ZAP allowlist and read/write roles over real tcp connections
(issue 9, items 1 and 2)."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import trio
import zmq

from actors._authorization import Role, authorizer, required_role
from actors._keys import (
    ClientAllowlist,
    KeyFileError,
    generate_key_files,
    read_key_pair,
    server_security,
)
from tests.security._helpers import RawPeer
from wire import (
    Endpoint,
    EndpointSpec,
    Param,
    Registry,
    Server,
    UnauthorizedError,
    UnavailableError,
    open_client,
)
from wire._security import ClientSecurity, CurveKeyPair, ServerSecurity
from wire._zap import zap_reply


def _registry() -> Registry:
    async def echo(ctx: Any, args: dict[str, Any]) -> Any:
        return args["value"]

    value = Param(name="value", wire_name="value")
    return Registry(
        [
            Endpoint(spec=EndpointSpec(name="t/read", params=(value,)), handler=echo),
            Endpoint(
                spec=EndpointSpec(name="t/write", params=(value,), mutates=True), handler=echo
            ),
            Endpoint(spec=EndpointSpec(name="agents/create", params=(value,)), handler=echo),
        ]
    )


class Keys:
    """A server key pair and an allowlist file with a read and a write client."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.server = read_key_pair(generate_key_files(directory, "server")[0])
        self.reader = read_key_pair(generate_key_files(directory, "reader")[0])
        self.writer = read_key_pair(generate_key_files(directory, "writer")[0])
        self.stranger = CurveKeyPair.generate()
        self.allowlist = directory / "clients.toml"
        self.write_allowlist({"reader": (self.reader, "read"), "writer": (self.writer, "write")})

    def write_allowlist(self, clients: dict[str, tuple[CurveKeyPair, str]]) -> None:
        text = "".join(
            f'[clients.{name}]\nkey = "{pair.public.decode()}"\nrole = "{role}"\n'
            for name, (pair, role) in clients.items()
        )
        self.allowlist.write_text(text, encoding="utf-8")
        self.allowlist.chmod(0o600)

    def client(self, pair: CurveKeyPair, server: CurveKeyPair | None = None) -> ClientSecurity:
        return ClientSecurity(server_key=(server or self.server).public, keys=pair)


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys")


async def _serve(nursery: trio.Nursery, keys: Keys, address: str = "tcp://127.0.0.1:0") -> str:
    security = server_security(keys.directory / "server.key", keys.allowlist)
    server = Server(_registry(), security=security)
    [bound] = await nursery.start(server.run, address)
    return str(bound)


async def test_listed_keys_connect_and_roles_hold(nursery: trio.Nursery, keys: Keys) -> None:
    """Over CURVE/tcp a write key calls everything; a read key calls read endpoints and gets
    unauthorized for a mutates=True endpoint and for agents/create, and stays connected."""
    with trio.fail_after(15):
        bound = await _serve(nursery, keys)
        async with open_client(bound, security=keys.client(keys.writer)) as writer:
            assert await writer.call("t/read", {"value": 1}) == 1
            assert await writer.call("t/write", {"value": 2}) == 2
            assert await writer.call("agents/create", {"value": 3}) == 3
        async with open_client(bound, security=keys.client(keys.reader)) as reader:
            assert await reader.call("t/read", {"value": 1}) == 1
            with pytest.raises(UnauthorizedError, match="a 'read' client may not call it") as exc:
                await reader.call("t/write", {"value": 2})
            assert exc.value.details == {"endpoint": "t/write"}
            with pytest.raises(UnauthorizedError):
                await reader.call("agents/create", {"value": 3})
            described = await reader.call("system/describe")
            assert "endpoints" in described
            assert await reader.call("t/read", {"value": "still"}) == "still"


async def test_unlisted_key_gets_no_reply_and_is_logged(
    nursery: trio.Nursery, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """A client whose key is not listed never gets a frame (no welcome), and the refusal is
    logged with its key and address."""
    caplog.set_level(logging.WARNING, logger="wire.zap")
    with trio.fail_after(15):
        bound = await _serve(nursery, keys)
        with pytest.raises(UnavailableError, match="no welcome"):
            async with open_client(bound, security=keys.client(keys.stranger), connect_timeout=1.0):
                pass  # pragma: no cover
        stranger = keys.stranger.public.decode()
        refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert any(stranger in m and "127.0.0.1" in m for m in refusals), refusals


async def test_raw_sockets_without_a_listed_key_receive_nothing(
    nursery: trio.Nursery, keys: Keys
) -> None:
    """A plain (non-CURVE) DEALER, a stranger's key, and a client that pins the wrong server
    key all send hello and receive nothing at all."""
    with trio.fail_after(15):
        bound = await _serve(nursery, keys)
        context = zmq.Context()
        impostor = CurveKeyPair.generate()
        peers = [RawPeer(bound, context=context) for _ in range(3)]
        try:
            keys.client(keys.stranger).configure(peers[1].socket)
            keys.client(keys.writer, server=impostor).configure(peers[2].socket)
            for peer in peers:
                peer.socket.setsockopt(zmq.RCVTIMEO, 1000)
                peer.socket.disconnect(bound)
                peer.socket.connect(bound)
                peer.send({"type": "hello", "versions": [1]})
            for peer in peers:
                with pytest.raises(zmq.Again):
                    await peer.receive()
        finally:
            for peer in peers:
                peer.close()
            context.term()


async def test_revoked_key_is_refused_on_its_next_call(nursery: trio.Nursery, keys: Keys) -> None:
    """Removing a key from the allowlist file makes that client's next call unauthorized,
    without a restart; demoting write to read takes effect the same way."""
    with trio.fail_after(15):
        bound = await _serve(nursery, keys)
        async with open_client(bound, security=keys.client(keys.writer)) as writer:
            assert await writer.call("t/write", {"value": 1}) == 1
            keys.write_allowlist({"writer": (keys.writer, "read")})
            os.utime(keys.allowlist, ns=(1, 1))  # a new stamp even within one clock tick
            with pytest.raises(UnauthorizedError):
                await writer.call("t/write", {"value": 2})
            assert await writer.call("t/read", {"value": 3}) == 3
            keys.write_allowlist({"reader": (keys.reader, "read")})
            os.utime(keys.allowlist, ns=(2, 2))
            with pytest.raises(UnauthorizedError, match="no longer"):
                await writer.call("t/read", {"value": 4})


async def test_ipc_socket_file_is_owner_only(nursery: trio.Nursery, tmp_path: Path) -> None:
    """An ipc:// socket file, and a directory the server creates for it, are owner-only."""
    with trio.fail_after(10):
        path = tmp_path / "new-dir" / "s.sock"
        server = Server(_registry())
        await nursery.start(server.run, f"ipc://{path}")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        async with open_client(f"ipc://{path}") as client:
            assert await client.call("t/read", {"value": 1}) == 1


async def test_curve_over_ipc(nursery: trio.Nursery, keys: Keys, tmp_path: Path) -> None:
    """CURVE and roles work over ipc:// as over tcp://."""
    with trio.fail_after(10):
        bound = await _serve(nursery, keys, f"ipc://{tmp_path}/c.sock")
        async with open_client(bound, security=keys.client(keys.reader)) as reader:
            assert await reader.call("t/read", {"value": 1}) == 1
            with pytest.raises(UnauthorizedError):
                await reader.call("t/write", {"value": 1})


async def test_two_curve_servers_in_one_process(nursery: trio.Nursery, keys: Keys) -> None:
    """Each CURVE server gets its own ZeroMQ context, so each binds its own ZAP handler."""
    with trio.fail_after(10):
        first, second = await _serve(nursery, keys), await _serve(nursery, keys)
        for bound in (first, second):
            async with open_client(bound, security=keys.client(keys.writer)) as client:
                assert await client.call("t/read", {"value": bound}) == bound


# -- the pure parts ------------------------------------------------------------------------------


def test_zap_reply_decisions() -> None:
    """ZAP accepts a listed CURVE key with it as User-Id; refuses others and other
    mechanisms; ignores malformed requests."""
    pair = CurveKeyPair.generate()
    from zmq.utils import z85

    raw_key = z85.decode(pair.public)
    request = [b"1.0", b"7", b"d", b"10.0.0.1", b"", b"CURVE", raw_key]
    allowed = zap_reply(request, lambda key: key == pair.public.decode())
    assert allowed is not None
    assert allowed[0] == [b"1.0", b"7", b"200", b"OK", pair.public, b""]
    refused = zap_reply(request, lambda key: False)
    assert refused is not None and refused[0][2] == b"400" and not refused[1].allowed
    null = zap_reply([b"1.0", b"8", b"d", b"a", b"", b"NULL"], lambda key: True)
    assert null is not None and null[0][2] == b"400"
    assert zap_reply([b"2.0", b"1"], lambda key: True) is None

    def broken(key: str) -> bool:
        raise RuntimeError("allowlist broke")

    crashed = zap_reply(request, broken)
    assert crashed is not None and crashed[0][2] == b"400"


def test_required_roles() -> None:
    """mutates=True and creating endpoints need write; everything else read."""
    assert required_role(EndpointSpec(name="a/b")) is Role.READ
    assert required_role(EndpointSpec(name="a/b", mutates=True)) is Role.WRITE
    assert required_role(EndpointSpec(name="sessions/create")) is Role.WRITE
    authorize = authorizer(lambda: {"k": Role.READ})
    assert authorize("k", EndpointSpec(name="a/b")) is None
    assert authorize(None, EndpointSpec(name="a/b")) is not None
    assert authorize("other", EndpointSpec(name="a/b")) is not None


def test_server_security_rejects_a_missing_handler_domain() -> None:
    """The server socket enforces ZAP, so a context without a handler admits nobody."""
    pair = CurveKeyPair.generate()
    security = ServerSecurity(keys=pair, is_allowed=lambda key: True)
    context = zmq.Context()
    try:
        socket = context.socket(zmq.ROUTER)
        security.configure(socket)
        assert socket.getsockopt(zmq.ZAP_ENFORCE_DOMAIN) == 1
        assert socket.getsockopt(zmq.CURVE_SERVER) == 1
        socket.close(linger=0)
    finally:
        context.term()


def test_allowlist_rejects_bad_files(tmp_path: Path, keys: Keys) -> None:
    """A malformed key or role, an unknown table, a duplicate key or a group-writable file
    is an error that names the file."""
    good = keys.reader.public.decode()
    cases = {
        "bad-key": '[clients.a]\nkey = "short"\nrole = "read"\n',
        "bad-role": f'[clients.a]\nkey = "{good}"\nrole = "admin"\n',
        "unknown": "[server]\nx = 1\n",
        "duplicate": f'[clients.a]\nkey = "{good}"\nrole = "read"\n'
        f'[clients.b]\nkey = "{good}"\nrole = "write"\n',
        "extra-field": f'[clients.a]\nkey = "{good}"\nrole = "read"\nnote = 1\n',
    }
    for name, text in cases.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        path.chmod(0o600)
        with pytest.raises(KeyFileError, match=name + ".toml"):
            ClientAllowlist.load(path)
    keys.allowlist.chmod(0o620)
    with pytest.raises(KeyFileError, match="writable by its owner only"):
        ClientAllowlist.load(keys.allowlist)


def test_broken_allowlist_edit_keeps_the_last_good_list(keys: Keys) -> None:
    """A bad edit of the allowlist while serving keeps the previous list and reports it."""
    allowlist = ClientAllowlist.load(keys.allowlist)
    assert allowlist.is_allowed(keys.reader.public.decode())
    keys.allowlist.write_text("[clients.a]\nkey = 1\n")
    os.utime(keys.allowlist, ns=(5, 5))
    assert allowlist.is_allowed(keys.reader.public.decode())
    assert allowlist.last_error is not None and "key" in allowlist.last_error


async def test_routing_id_reuse_does_not_inherit_a_session(
    nursery: trio.Nursery, keys: Keys
) -> None:
    """A read client that reuses the routing id of a write client that left is a new peer:
    its call without a hello is refused (peer-lost), and after hello a write call is
    unauthorized; nothing of the writer's session or role carries over."""
    with trio.fail_after(15):
        bound = await _serve(nursery, keys)
        context = zmq.Context()
        try:
            writer = RawPeer(bound, context=context)
            writer.socket.disconnect(bound)
            writer.socket.setsockopt(zmq.ROUTING_ID, b"shared-id")
            keys.client(keys.writer).configure(writer.socket)
            writer.socket.connect(bound)
            await writer.greet()
            writer.send({"type": "call", "id": 1, "endpoint": "t/write", "args": {"value": 1}})
            assert (await writer.receive())["type"] == "result"
            writer.close()
            await trio.sleep(0.2)
            reader = RawPeer(bound, context=context)
            reader.socket.disconnect(bound)
            reader.socket.setsockopt(zmq.ROUTING_ID, b"shared-id")
            keys.client(keys.reader).configure(reader.socket)
            reader.socket.connect(bound)
            reader.send({"type": "call", "id": 2, "endpoint": "t/write", "args": {"value": 2}})
            refused = await reader.receive()
            assert (refused["code"], refused["details"]) == ("peer-lost", {"id": 2})
            await reader.greet()
            reader.send({"type": "call", "id": 3, "endpoint": "t/write", "args": {"value": 3}})
            denied = await reader.receive()
            assert (denied["id"], denied["code"]) == (3, "unauthorized")
            reader.close()
        finally:
            context.term()


async def test_bind_failure_of_a_curve_server_releases_everything(
    nursery: trio.Nursery, keys: Keys
) -> None:
    """A CURVE server whose bind fails raises ZMQError and leaves no socket or context open
    (a second server on a free address then starts normally)."""
    with trio.fail_after(10):
        bound = await _serve(nursery, keys)
        security = server_security(keys.directory / "server.key", keys.allowlist)
        with pytest.raises(zmq.ZMQError):
            await Server(_registry(), security=security).run(bound)
        assert await _serve(nursery, keys)
