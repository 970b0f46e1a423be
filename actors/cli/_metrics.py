"""``serve --metrics HOST:PORT``: where Prometheus scrapes a server, and whether it may.

Off by default. The listener speaks plain HTTP with no authentication, so like a plain tcp
endpoint it binds a loopback address unless the operator says ``--insecure``
(``docs/operations.md``).
"""

from __future__ import annotations

import argparse
import ipaddress

__all__ = ["add_metrics_option", "metrics_address"]


def add_metrics_option(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics, with /healthz and /readyz "
        "probes (port 0: a free one, printed); loopback only unless --insecure",
    )


def metrics_address(value: str | None, *, insecure: bool) -> tuple[str, int] | None:
    """The (host, port) of ``--metrics``, or ``None`` when not given.

    Raises:
        ValueError: not ``HOST:PORT`` (``[v6]:PORT`` for IPv6), a bad port, or a host that is
            not loopback without ``insecure``; the message says what to write instead.
    """
    if value is None:
        return None
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"--metrics {value!r}: expected HOST:PORT, for example 127.0.0.1:9464")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"--metrics {value!r}: the port must be a number from 0 to 65535")
    if not insecure and not _is_loopback(host):
        raise ValueError(
            f"--metrics {value!r}: {host} is not a loopback address; metrics have no "
            "authentication, so bind 127.0.0.1 (and let the scraper reach it locally) or add "
            "--insecure"
        )
    return host, port


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
