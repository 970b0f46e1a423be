"""The data directory of the commands that keep one (``serve``, ``index``, ``sessions
import``): its default, and its projection cache opened for a command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from actors.cli._errors import CliError

if TYPE_CHECKING:
    from actors.store import ProjectionCache

__all__ = ["default_data_dir", "open_data_cache"]


def default_data_dir() -> Path:
    """The data directory when ``--data`` is not given: under the XDG data home."""
    import platformdirs

    return Path(platformdirs.user_data_dir("agent-actors"))


def open_data_cache(data: Path) -> ProjectionCache:
    """The projection cache of ``data`` (created with it if need be).

    Raises:
        CliError: the directory or the cache cannot be opened.
    """
    from actors._store_services import CACHE_NAME
    from actors.store import ProjectionCache, ProjectionCacheError

    try:
        data.mkdir(parents=True, exist_ok=True)
        return ProjectionCache.open(data / CACHE_NAME)
    except (OSError, ProjectionCacheError) as exc:
        raise CliError(f"cannot open the cache: {exc}") from None
