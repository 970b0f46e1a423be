"""``fileReferences/list``: path-only ``@``-completion inside an agent's session cwd.

The public names of the file reference subsystem, gathered from its private modules (one job
each): ``_query`` (candidate record, grammar, lexical containment), ``_rank`` (score tiers and
tie-breaks), ``_pool`` (ranking a prepared pool at keystroke rate), ``_groups`` and ``_bits``
(the path and subsequence tiers per parent directory, and with bit sets), ``_fs`` (link-proof
directory access), ``_index`` (breadth-first index), ``_ignore`` (opt-in ignore files),
``_listing`` (directory mode), ``_config`` (the ``[fileReferences]`` table) and ``_service``
(the trio service). Spec: ``file-reference`` in the DSH specs.
"""

from actors.file_references._config import (
    FileReferencesConfig as FileReferencesConfig,
)
from actors.file_references._config import (
    FileReferencesConfigError as FileReferencesConfigError,
)
from actors.file_references._index import FileIndex as FileIndex
from actors.file_references._index import FileIndexStatistics as FileIndexStatistics
from actors.file_references._index import build_index as build_index
from actors.file_references._listing import list_directory as list_directory
from actors.file_references._query import CandidateKind as CandidateKind
from actors.file_references._query import FileReferenceCandidate as FileReferenceCandidate
from actors.file_references._query import parse_query as parse_query
from actors.file_references._service import TOOL_RESULT_EVENT as TOOL_RESULT_EVENT
from actors.file_references._service import FileIndexFailedError as FileIndexFailedError
from actors.file_references._service import (
    FileIndexInvalidatedError as FileIndexInvalidatedError,
)
from actors.file_references._service import FileReferenceError as FileReferenceError
from actors.file_references._service import FileReferenceService as FileReferenceService
from actors.file_references._service import (
    FileReferenceStatistics as FileReferenceStatistics,
)

__all__ = [
    "TOOL_RESULT_EVENT",
    "CandidateKind",
    "FileIndex",
    "FileIndexFailedError",
    "FileIndexInvalidatedError",
    "FileIndexStatistics",
    "FileReferenceCandidate",
    "FileReferenceError",
    "FileReferenceService",
    "FileReferenceStatistics",
    "FileReferencesConfig",
    "FileReferencesConfigError",
    "build_index",
    "list_directory",
    "parse_query",
]
