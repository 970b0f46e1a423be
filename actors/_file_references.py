"""``fileReferences/list``: path-only ``@``-completion inside an agent's session cwd.

The public names of the file reference subsystem, gathered from its private modules (one job
each): ``_file_references_query`` (candidate record, grammar, lexical containment),
``_file_references_rank`` (score tiers and tie-breaks), ``_file_references_pool`` (ranking a
prepared pool at keystroke rate), ``_file_references_groups`` and ``_file_references_bits``
(the path and subsequence tiers per parent directory, and with bit sets),
``_file_references_fs`` (link-proof
directory access), ``_file_references_index`` (breadth-first index), ``_file_references_ignore``
(opt-in ignore files), ``_file_references_listing`` (directory mode),
``_file_references_config`` (the ``[fileReferences]`` table) and ``_file_references_service``
(the trio service). Spec: ``shared/spec/file-reference.md``.
"""

from actors._file_references_config import (
    FileReferencesConfig as FileReferencesConfig,
)
from actors._file_references_config import (
    FileReferencesConfigError as FileReferencesConfigError,
)
from actors._file_references_index import FileIndex as FileIndex
from actors._file_references_index import FileIndexStatistics as FileIndexStatistics
from actors._file_references_index import build_index as build_index
from actors._file_references_listing import list_directory as list_directory
from actors._file_references_query import CandidateKind as CandidateKind
from actors._file_references_query import FileCandidate as FileCandidate
from actors._file_references_query import parse_query as parse_query
from actors._file_references_service import TOOL_RESULT_EVENT as TOOL_RESULT_EVENT
from actors._file_references_service import FileIndexFailedError as FileIndexFailedError
from actors._file_references_service import (
    FileIndexInvalidatedError as FileIndexInvalidatedError,
)
from actors._file_references_service import FileReferenceError as FileReferenceError
from actors._file_references_service import FileReferenceService as FileReferenceService
from actors._file_references_service import (
    FileReferenceStatistics as FileReferenceStatistics,
)

__all__ = [
    "TOOL_RESULT_EVENT",
    "CandidateKind",
    "FileCandidate",
    "FileIndex",
    "FileIndexFailedError",
    "FileIndexInvalidatedError",
    "FileIndexStatistics",
    "FileReferenceError",
    "FileReferenceService",
    "FileReferenceStatistics",
    "FileReferencesConfig",
    "FileReferencesConfigError",
    "build_index",
    "list_directory",
    "parse_query",
]
