"""``agent-actors call``: one call, httpie style, and what it says when the call fails.

``key=text`` passes a string, ``key:=json`` any JSON value; the JSON result goes to stdout. A
failure is one line on stderr and exit status 1: the server's ``code: message`` (its details as
JSON on the next line, then hints from ``_hints``), ``unavailable: no server answered …`` when
no server welcomed the client in time, ``deadline-exceeded`` when the call outlived
``--timeout``. A malformed endpoint or item is a usage error (status 2) and nothing is sent.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from actors.cli._addresses import check_endpoint, check_host
from actors.cli._errors import EXIT_CALL_FAILED, CliError
from actors.cli._hints import error_hints, needs_describe

__all__ = ["CONNECT_TIMEOUT", "add_call_command", "call_once", "parse_items", "run_call"]

#: How long a call waits for the server's welcome (at most ``--timeout``).
CONNECT_TIMEOUT = 5.0
#: How long the hints may wait for ``system/describe`` after an error.
_DESCRIBE_TIMEOUT = 2.0

log = logging.getLogger("actors.cli.call")


def add_call_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from actors.cli._security import add_call_options

    call_cmd = commands.add_parser(
        "call",
        help="make one call and print its JSON result",
        description="Make one call and print its JSON result. key=text passes a string, "
        "key:=json any JSON value (limit:=10, 'refs:=[1, 2]').",
        epilog="example: agent-actors call tcp://127.0.0.1:7555 sessions/list limit:=10",
    )
    call_cmd.add_argument("endpoint", help="server endpoint, e.g. tcp://127.0.0.1:7555")
    call_cmd.add_argument("method", help="NAMESPACE/METHOD, e.g. sessions/list")
    call_cmd.add_argument("items", nargs="*", help="key=text or key:=json arguments")
    call_cmd.add_argument("--agent", help="agent (session) id, sent as agentId")
    call_cmd.add_argument(
        "--timeout", type=float, default=30.0, help="deadline in seconds (default 30)"
    )
    add_call_options(call_cmd)
    call_cmd.set_defaults(run=run_call)


def parse_items(items: Sequence[str]) -> dict[str, Any]:
    """httpie's convention: ``key=text`` is a string, ``key:=json`` any JSON value.

    Raises:
        ValueError: an item has neither form, or its JSON does not parse.
    """
    out: dict[str, Any] = {}
    for item in items:
        json_key, json_sep, json_value = item.partition(":=")
        text_key, text_sep, text_value = item.partition("=")
        if json_sep and len(json_key) < len(text_key):
            try:
                out[json_key] = json.loads(json_value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{item!r}: invalid JSON: {exc}") from None
        elif text_sep and text_key:
            out[text_key] = text_value
        else:
            raise ValueError(f"{item!r}: expected key=text or key:=json")
    return out


def run_call(args: argparse.Namespace) -> int:
    from actors._keys import ENV_SERVER_KEY, KeyFileError, client_security

    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise CliError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        wire_args = parse_items(args.items)
    except ValueError as exc:
        raise CliError(
            str(exc), hints=["write key=text for a string, key:=json for any JSON"]
        ) from None
    if args.agent is not None:
        wire_args["agentId"] = args.agent
    try:
        security = client_security(args.server_key, args.key)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    if security is None and args.key is not None:
        raise CliError(
            f"--key needs --server-key KEY (or ${ENV_SERVER_KEY}): the server's public key"
        )
    check_endpoint(args.endpoint, bind=False)  # last: no socket file is a call failure (1)

    import trio

    started = time.monotonic()
    outcome = "ok"
    try:
        result = trio.run(
            functools.partial(
                call_once,
                args,
                args.method,
                wire_args,
                security,
                name="agent-actors call",
                explain=functools.partial(_server_error, args=args),
            )
        )
    except CliError as exc:
        outcome = str(exc.fields.get("code", "failed"))
        raise
    finally:
        log.info(
            "call %s: %s",
            args.method,
            outcome,
            extra={
                "endpoint": args.endpoint,
                "method": args.method,
                "agent_id": args.agent,
                "outcome": outcome,
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
            },
        )
    print(json.dumps(result, ensure_ascii=False, indent=2, default=_json_default))
    return 0


async def call_once(
    args: argparse.Namespace,
    method: str,
    wire_args: dict[str, Any],
    security: Any,
    *,
    name: str,
    explain: Callable[[Any, Any], Awaitable[CliError]] | None = None,
) -> Any:
    """One call to ``args.endpoint`` under ``args.timeout``; every failure becomes a
    :class:`CliError`: no welcome, the deadline, or the server's error (through ``explain``,
    which may add hints, else as it is)."""
    import trio

    from wire import UnavailableError, WireError, open_client

    connect_within = min(CONNECT_TIMEOUT, args.timeout)
    connected = False
    try:
        with trio.fail_after(args.timeout):
            await trio.to_thread.run_sync(
                lambda: check_host(args.endpoint, bind=False), abandon_on_cancel=True
            )
            async with open_client(
                args.endpoint, name=name, connect_timeout=connect_within, security=security
            ) as client:
                connected = True
                log.debug(
                    "connected",
                    extra={"endpoint": args.endpoint, "peer_timeout_ms": _peer_timeout(client)},
                )
                try:
                    return await client.call(method, wire_args)
                except WireError as exc:
                    if explain is None:
                        raise _wire_error(exc, args, []) from None
                    raise await explain(client, exc) from None
    except (trio.TooSlowError, UnavailableError) as exc:
        if not connected:
            raise _unreachable(args, connect_within, security is not None) from None
        if isinstance(exc, WireError):
            raise _wire_error(exc, args, []) from None
        raise CliError(
            f"deadline-exceeded: no reply within {args.timeout:g} s",
            status=EXIT_CALL_FAILED,
            prefixed=False,
            hints=["--timeout SECONDS allows a longer call"],
            fields={"code": "deadline-exceeded", "endpoint": args.endpoint},
        ) from None
    except WireError as exc:  # from open_client itself
        raise _wire_error(exc, args, []) from None
    except OSError as exc:  # zmq.ZMQError: ZeroMQ refused the endpoint after all
        raise CliError(f"cannot connect to {args.endpoint}: {exc}") from None


def _peer_timeout(client: Any) -> int | None:
    welcome = client.welcome
    return None if welcome is None else int(welcome.peer_timeout_ms)


def _unreachable(args: argparse.Namespace, waited: float, secured: bool) -> CliError:
    hints = [f"is `agent-actors serve` running there (serve --endpoint {args.endpoint})?"]
    if secured:
        hints.append(
            "with CURVE, check that --server-key is the server's public key and that the "
            "server's --clients list has this client's key"
        )
    else:
        hints.append(
            "a server started with --curve answers only clients that pass --server-key and --key"
        )
    return CliError(
        f"unavailable: no server answered at {args.endpoint} within {waited:g} s (no welcome)",
        status=EXIT_CALL_FAILED,
        prefixed=False,
        hints=hints,
        fields={"code": "unavailable", "endpoint": args.endpoint},
    )


async def _server_error(client: Any, exc: Any, *, args: argparse.Namespace) -> CliError:
    """The server's error with its hints; fetches ``system/describe`` when they need it."""
    import trio

    from wire import WireError

    code = exc.code.value
    described = None
    if needs_describe(code, exc.message):
        with trio.move_on_after(_DESCRIBE_TIMEOUT):
            try:
                described = await client.call("system/describe")
            except WireError:
                pass
    hints = error_hints(
        code,
        exc.message,
        exc.details,
        method=args.method,
        items=[*args.items, *([f"agentId={args.agent}"] if args.agent is not None else [])],
        described=described if isinstance(described, dict) else None,
    )
    return _wire_error(exc, args, hints)


def _wire_error(exc: Any, args: argparse.Namespace, hints: list[str]) -> CliError:
    details = dict(exc.details)
    return CliError(
        f"{exc.code.value}: {exc.message}",
        status=EXIT_CALL_FAILED,
        prefixed=False,
        detail=json.dumps(details, default=str) if details else None,
        hints=hints,
        fields={"code": exc.code.value, "endpoint": args.endpoint, "details": details},
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"cannot print a {type(value).__name__}")
