"""CURVE key files, the client allowlist, and where a client finds its keys.

Files (all TOML, all written owner-only, 0600):

- ``NAME.key``: a key pair, ``public = "…"`` and ``secret = "…"`` (40 Z85 characters each).
  A key pair file readable by group or others is refused, as ssh refuses such a private key.
- ``NAME.pub``: the public half only, ``public = "…"``, to hand to the other side.
- the allowlist (``serve --clients FILE``): one table per client,
  ``[clients.NAME]`` with ``key = "…"`` (its public key) and ``role = "read" | "write"``.
  It is re-read when its modification time changes, so keys can be added, demoted or revoked
  without a restart.

A client takes its keys from files or the environment (:func:`client_security`):
``AGENT_ACTORS_SERVER_KEY`` (the server's public key, or the path of its ``.pub`` file) and
``AGENT_ACTORS_CLIENT_KEY`` (the path of the client's ``.key`` file) or
``AGENT_ACTORS_CLIENT_SECRET`` (the client's secret key itself; the public half is derived).
"""

from __future__ import annotations

import os
import stat
import threading
import tomllib
from collections.abc import Mapping
from pathlib import Path

import attrs

from actors._authorization import Role, authorizer
from wire._security import (
    ClientSecurity,
    CurveKeyError,
    CurveKeyPair,
    ServerSecurity,
    check_z85_key,
)

__all__ = [
    "ENV_CLIENT_KEY",
    "ENV_CLIENT_SECRET",
    "ENV_SERVER_KEY",
    "ClientAllowlist",
    "KeyFileError",
    "client_security",
    "generate_key_files",
    "read_key_pair",
    "read_public_key",
    "server_security",
]

ENV_SERVER_KEY = "AGENT_ACTORS_SERVER_KEY"
ENV_CLIENT_KEY = "AGENT_ACTORS_CLIENT_KEY"
ENV_CLIENT_SECRET = "AGENT_ACTORS_CLIENT_SECRET"

#: ZAP domain of ``agent-actors serve``.
ZAP_DOMAIN = "agent-actors"


class KeyFileError(ValueError):
    """A key file or the allowlist is missing, unreadable, malformed or too widely readable."""


def _write_private(path: Path, text: str) -> None:
    # O_EXCL: never follow a planted symlink or overwrite an existing key; mode 0600 from the
    # first byte (the umask can only narrow it).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    os.chmod(path, 0o600)


def generate_key_files(directory: Path, name: str) -> tuple[Path, Path]:
    """Write a new key pair as ``directory/NAME.key`` and ``directory/NAME.pub`` (both 0600).

    Raises:
        KeyFileError: ``name`` is not a plain file name, or either file exists already.
    """
    if not name or name != Path(name).name or name.startswith("."):
        raise KeyFileError(f"key name {name!r} must be a plain file name")
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    pair = CurveKeyPair.generate()
    secret_path, public_path = directory / f"{name}.key", directory / f"{name}.pub"
    for path in (secret_path, public_path):
        if path.exists() or path.is_symlink():
            raise KeyFileError(f"{path}: already exists; refusing to overwrite a key")
    public = pair.public.decode("ascii")
    _write_private(
        secret_path,
        f'# agent-actors CURVE key pair "{name}". Keep this file secret.\n'
        f'public = "{public}"\nsecret = "{pair.secret.decode("ascii")}"\n',
    )
    _write_private(public_path, f'# agent-actors CURVE public key "{name}".\npublic = "{public}"\n')
    return secret_path, public_path


def _read_toml(path: Path, what: str) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise KeyFileError(f"{path}: cannot read {what}: {exc}") from None


def read_key_pair(path: Path) -> CurveKeyPair:
    """Read a ``.key`` file.

    Raises:
        KeyFileError: unreadable, malformed, the halves do not match, or the file is
            readable or writable by group or others.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read the key pair: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(
            f"{path}: permissions {stat.S_IMODE(mode):04o} are too open; a key pair file must "
            "be accessible by its owner only (chmod 600)"
        )
    document = _read_toml(path, "the key pair")
    public, secret = document.get("public"), document.get("secret")
    if not isinstance(public, str) or not isinstance(secret, str):
        raise KeyFileError(f"{path}: a key pair file needs string keys 'public' and 'secret'")
    try:
        return CurveKeyPair(public=public, secret=secret)
    except CurveKeyError as exc:
        raise KeyFileError(f"{path}: {exc}") from None


def read_public_key(source: str) -> bytes:
    """A public key given as its 40 Z85 characters or as the path of a ``.pub``/``.key`` file.

    Raises:
        KeyFileError: neither a valid key nor a readable key file.
    """
    if len(source) == 40 and not os.path.exists(source):
        try:
            return check_z85_key(source, "public key")
        except CurveKeyError as exc:
            raise KeyFileError(f"public key: {exc}") from None
    path = Path(source)
    document = _read_toml(path, "the public key")
    public = document.get("public")
    if not isinstance(public, str):
        raise KeyFileError(f"{path}: a public key file needs a string key 'public'")
    try:
        return check_z85_key(public, "public key")
    except CurveKeyError as exc:
        raise KeyFileError(f"{path}: {exc}") from None


def parse_allowlist(path: Path) -> dict[str, Role]:
    """Client public key (Z85) → role, from an allowlist file.

    Raises:
        KeyFileError: unreadable, an unknown key, a malformed key or role, a key listed twice.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read the client allowlist: {exc}") from None
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        # Whoever can write the allowlist can grant themselves the write role.
        raise KeyFileError(
            f"{path}: permissions {stat.S_IMODE(mode):04o} let others change the client "
            "allowlist; make it writable by its owner only (chmod 600)"
        )
    document = _read_toml(path, "the client allowlist")
    unknown = sorted(set(document) - {"clients"})
    if unknown:
        raise KeyFileError(f"{path}: unknown table [{unknown[0]}] (expected [clients.NAME])")
    clients = document.get("clients", {})
    if not isinstance(clients, dict):
        raise KeyFileError(f"{path}: 'clients' must be a table of [clients.NAME] tables")
    roles: dict[str, Role] = {}
    for name, entry in clients.items():
        where = f"{path}: [clients.{name}]"
        if not isinstance(entry, dict) or set(entry) - {"key", "role"}:
            raise KeyFileError(f"{where} must hold only 'key' and 'role'")
        key, role = entry.get("key"), entry.get("role")
        if not isinstance(key, str):
            raise KeyFileError(f"{where}: 'key' must be a public key string")
        try:
            public = check_z85_key(key, "public key").decode("ascii")
        except CurveKeyError as exc:
            raise KeyFileError(f"{where}: {exc}") from None
        if role not in ("read", "write"):
            raise KeyFileError(f'{where}: \'role\' must be "read" or "write", got {role!r}')
        if public in roles:
            raise KeyFileError(f"{where}: this key is listed twice")
        roles[public] = Role(role)
    return roles


@attrs.define
class ClientAllowlist:
    """The allowlist file, re-read when it changes.

    A file that becomes unreadable or malformed keeps the last good list in force (and the
    error is reported by :meth:`roles` through ``last_error``), so a bad edit never opens the
    server and never locks everybody out mid-flight.
    """

    path: Path
    _roles: dict[str, Role] = attrs.field(factory=dict)
    _stamp: tuple[int, int] | None = None
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    last_error: str | None = None

    @classmethod
    def load(cls, path: Path) -> ClientAllowlist:
        """Read ``path`` now; a broken file at start is an error."""
        allowlist = cls(path)
        allowlist._roles = parse_allowlist(path)
        allowlist._stamp = _stamp(path)
        return allowlist

    def roles(self) -> Mapping[str, Role]:
        with self._lock:
            stamp = _stamp(self.path)
            if stamp != self._stamp:
                try:
                    self._roles = parse_allowlist(self.path)
                    self.last_error = None
                except KeyFileError as exc:
                    self.last_error = str(exc)
                self._stamp = stamp
            return self._roles

    def is_allowed(self, client_key: str) -> bool:
        return client_key in self.roles()


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def server_security(key_file: Path, allowlist_file: Path) -> ServerSecurity:
    """CURVE with the server key pair in ``key_file``, clients and roles from the allowlist.

    Raises:
        KeyFileError: either file is unusable.
    """
    keys = read_key_pair(key_file)
    allowlist = ClientAllowlist.load(allowlist_file)
    return ServerSecurity(
        keys=keys,
        is_allowed=allowlist.is_allowed,
        authorize=authorizer(allowlist.roles),
        domain=ZAP_DOMAIN,
    )


def client_security(
    server_key: str | None = None,
    key_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientSecurity | None:
    """The client's CURVE settings from arguments, else the environment; ``None`` if neither
    names a server key (plain, unencrypted connection).

    Raises:
        KeyFileError: a server key is named but the client's own key pair is missing or bad,
            or a key is malformed.
    """
    env = os.environ if environ is None else environ
    server = server_key or env.get(ENV_SERVER_KEY)
    if not server:
        return None
    if key_file is None and env.get(ENV_CLIENT_KEY):
        key_file = Path(env[ENV_CLIENT_KEY])
    if key_file is not None:
        pair = read_key_pair(key_file)
    elif env.get(ENV_CLIENT_SECRET):
        try:
            pair = CurveKeyPair.from_secret(env[ENV_CLIENT_SECRET])
        except CurveKeyError as exc:
            raise KeyFileError(f"{ENV_CLIENT_SECRET}: {exc}") from None
    else:
        raise KeyFileError(
            f"a server key is set but no client key: give --key FILE, or set {ENV_CLIENT_KEY} "
            f"(a key pair file) or {ENV_CLIENT_SECRET}"
        )
    return ClientSecurity(server_key=read_public_key(server), keys=pair)
