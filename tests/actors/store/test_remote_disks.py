"""A store whose writable root is on a network file system writes every append in a worker
thread: an inline write there could hold the whole server for as long as the network is gone."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from actors.store._remote_disks import network_file_system, store_placement

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 0:50 / /srv/shared rw,relatime shared:20 - nfs4 files:/export rw,vers=4.2
41 40 254:1 / /srv/shared/scratch rw,relatime - ext4 /dev/vdb rw
42 27 0:51 / /mnt/my\\040docs rw,relatime - cifs //nas/docs rw
43 27 0:52 / /home/dev/remote rw,nosuid - fuse.sshfs dev@box:/ rw
44 27 0:53 / /home/dev/overlay rw - fuse.fuse-overlayfs fuse-overlayfs rw
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/var/lib/agent-actors", None),
        ("/srv/shared", "nfs4"),
        ("/srv/shared/sessions/2026", "nfs4"),
        ("/srv/shared/scratch/sessions", None),  # a local disk mounted inside the share
        ("/srv/sharedness", None),  # a sibling whose name starts like the mount point
        ("/mnt/my docs/sessions", "cifs"),  # mountinfo writes the space as \040
        ("/home/dev/remote/s", "fuse.sshfs"),
        ("/home/dev/overlay/s", None),  # a local FUSE file system
    ],
)
def test_the_longest_mount_point_decides(path: str, expected: str | None) -> None:
    assert network_file_system(Path(path), mountinfo=MOUNTINFO) == expected


def test_a_later_mount_over_the_same_point_wins() -> None:
    over = MOUNTINFO + "45 40 254:2 / /srv/shared rw - xfs /dev/vdc rw\n"
    assert network_file_system(Path("/srv/shared/x"), mountinfo=over) is None


def test_this_machines_temporary_directory_is_read_from_proc(tmp_path: Path) -> None:
    if not Path("/proc/self/mountinfo").exists():
        pytest.skip("no /proc/self/mountinfo here (not Linux)")
    assert network_file_system(tmp_path) is None


def test_a_root_on_a_network_file_system_turns_inline_writes_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    local = store_placement([Path("/var/lib/a")], inline_writes=True, mountinfo=MOUNTINFO)
    assert local.inline(100)
    with caplog.at_level(logging.INFO, logger="actors.store"):
        remote = store_placement(
            [Path("/var/lib/a"), Path("/srv/shared/s")], inline_writes=True, mountinfo=MOUNTINFO
        )
    assert not remote.inline(100)
    assert "/srv/shared/s is on nfs4: appends are written in worker threads" in caplog.text
    assert not store_placement([Path("/var/lib/a")], inline_writes=False).inline(100)
