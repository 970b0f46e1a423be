"""The security side of the ``agent-actors`` command line.

``keys NAME``            write a new CURVE key pair (``NAME.key``, ``NAME.pub``, both 0600).
``serve --curve FILE``   CURVE with the server key pair in FILE; ``--clients FILE`` is the
                         allowlist of client keys and their roles (required with ``--curve``).
``serve --insecure``     allow a non-loopback ``tcp://`` endpoint without ``--curve``.
``call --server-key``    the server's public key (or its ``.pub`` file) and ``--key FILE`` the
                         client's key pair; both also from the environment (``actors._keys``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from actors.cli._errors import CliError

if TYPE_CHECKING:
    from wire._security import ServerSecurity

__all__ = [
    "ENV_CLIENT_KEY",
    "ENV_SERVER_KEY",
    "add_call_options",
    "add_keys_command",
    "add_serve_options",
    "exposure_problem",
    "serve_security",
]


#: ``actors._keys``' environment variables, spelled out so that ``--help`` need not import the
#: key handling (and ``wire``); a test keeps them equal.
ENV_SERVER_KEY = "AGENT_ACTORS_SERVER_KEY"
ENV_CLIENT_KEY = "AGENT_ACTORS_CLIENT_KEY"


def add_serve_options(serve_cmd: argparse.ArgumentParser) -> None:
    serve_cmd.add_argument(
        "--curve",
        type=Path,
        metavar="KEYFILE",
        help="encrypt and authenticate with CURVE, using this server key pair file",
    )
    serve_cmd.add_argument(
        "--clients",
        type=Path,
        metavar="FILE",
        help="allowlist of client public keys and their roles (TOML; needed with --curve)",
    )
    serve_cmd.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback tcp endpoint without --curve (anyone who can reach it "
        "can read and write every session)",
    )


def add_call_options(call_cmd: argparse.ArgumentParser) -> None:
    call_cmd.add_argument(
        "--server-key",
        metavar="KEY",
        help=f"the server's CURVE public key or its .pub file (default: ${ENV_SERVER_KEY})",
    )
    call_cmd.add_argument(
        "--key",
        type=Path,
        metavar="KEYFILE",
        help=f"this client's CURVE key pair file (default: ${ENV_CLIENT_KEY})",
    )


def add_keys_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys_cmd = commands.add_parser(
        "keys", help="generate a CURVE key pair (NAME.key and NAME.pub, owner-only)"
    )
    keys_cmd.add_argument("name", help="file name of the pair, e.g. server or ide")
    keys_cmd.add_argument(
        "--dir",
        type=Path,
        help="directory for the files (default: under the XDG config home)",
    )
    keys_cmd.set_defaults(run=_run_keys)


def _run_keys(args: argparse.Namespace) -> int:
    import platformdirs

    from actors._keys import KeyFileError, generate_key_files

    if args.dir is None:
        args.dir = Path(platformdirs.user_config_dir("agent-actors")) / "keys"
    try:
        secret_path, public_path = generate_key_files(args.dir, args.name)
    except (OSError, KeyFileError) as exc:
        raise CliError(str(exc)) from None
    public = public_path.read_text(encoding="utf-8").split('"')[-2]
    print(f"key pair:   {secret_path}  (keep secret)")
    print(f"public key: {public_path}")
    print(public)
    return 0


def exposure_problem(endpoints: Sequence[str], *, curve: bool, insecure: bool) -> str | None:
    """Why serving ``endpoints`` would be unsafe, or ``None``.

    Without CURVE, anyone who can reach a tcp endpoint can call every endpoint: only loopback
    addresses (and ipc/inproc) are allowed unless the operator says ``--insecure``.
    """
    if curve or insecure:
        return None
    from wire._security import is_loopback

    exposed = [endpoint for endpoint in endpoints if not is_loopback(endpoint)]
    if not exposed:
        return None
    return (
        f"refusing to serve {', '.join(exposed)} without encryption: a non-loopback tcp "
        "endpoint needs --curve (or --insecure to accept that anyone who can reach it may "
        "read and write every session)"
    )


def serve_security(args: argparse.Namespace) -> ServerSecurity | None:
    """The server's security settings from ``serve``'s arguments.

    Raises:
        KeyFileError: a key file or the allowlist is unusable, or ``--clients`` is missing.
    """
    from actors._keys import KeyFileError, server_security

    if args.curve is None:
        if args.clients is not None:
            raise KeyFileError("--clients needs --curve")
        return None
    if args.clients is None:
        raise KeyFileError("--curve needs --clients FILE (the allowlist of client keys)")
    return server_security(args.curve, args.clients)
