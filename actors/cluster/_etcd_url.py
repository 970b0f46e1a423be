"""``etcd://`` URLs: which etcd members to talk to, and which cluster's keys to use."""

from __future__ import annotations

__all__ = ["DEFAULT_CLUSTER", "parse_etcd_url", "split_etcd_url"]

#: Cluster name when an ``etcd://`` URL names none.
DEFAULT_CLUSTER = "default"


def split_etcd_url(url: str) -> tuple[list[str], str]:
    """``etcd://h1:p1[,h2:p2…][/cluster]`` to the members' gateway base URLs and the cluster name.

    ``http://host:port`` is accepted too. The cluster defaults to ``default``.

    Raises:
        ValueError: not an ``etcd://`` or ``http://`` URL, no host, or a bad cluster name.
    """
    for scheme in ("etcd://", "http://"):
        if url.startswith(scheme):
            hosts_part, _, cluster = url[len(scheme) :].partition("/")
            cluster = cluster.strip("/") or DEFAULT_CLUSTER
            hosts = [h for h in hosts_part.split(",") if h]
            if hosts and "/" not in cluster:
                return [f"http://{host}" for host in hosts], cluster
    raise ValueError(f"not an etcd URL (want etcd://host:port[,host:port…][/cluster]): {url!r}")


def parse_etcd_url(url: str) -> list[str]:
    """The members' gateway base URLs of an ``etcd://`` URL (see `split_etcd_url`)."""
    return split_etcd_url(url)[0]
