"""Where a restarted one-host coordinator starts counting revisions (and so epochs).

Epochs are fencing tokens that outlive the coordinator: an owner writes ``fence/epoch-open``
records into the session logs it touches, and a log refuses a writer whose epoch is below the
highest one it has seen. The in-process coordinator keeps its revision in memory, so a
supervisor restarted from revision 0 would hand out epochs below those of its previous life,
and every session written then would refuse its new owner.

The floor is the later of the wall clock in microseconds and the previous floor plus a
billion, written to ``<data dir>/cluster/epoch-floor`` before any claim: the clock keeps it
above the previous life's revisions (a life would need more changes than microseconds it
lasted to catch up), and the stored floor keeps it rising when the clock is stepped back.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["FLOOR_FILE", "revision_floor"]

#: The floor's file, under the data directory.
FLOOR_FILE = Path("cluster") / "epoch-floor"
#: Changes one coordinator life may make before the next life's floor must exceed them.
_LIFE_SPAN = 1_000_000_000


def revision_floor(data_dir: Path, *, now_us: int | None = None) -> int:
    """Read, raise and durably store the floor for a coordinator starting now.

    Raises:
        OSError: the floor file cannot be written (the data directory is not writable).
    """
    path = data_dir / FLOOR_FILE
    previous = 0
    try:
        previous = int(path.read_text(encoding="ascii").strip() or 0)
    except FileNotFoundError:
        pass
    except ValueError:
        previous = 0  # a damaged file: the clock alone still puts us above the last life
    clock = time.time_ns() // 1000 if now_us is None else now_us
    floor = max(clock, previous + _LIFE_SPAN if previous else 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w", encoding="ascii") as out:
        out.write(f"{floor}\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    return floor
