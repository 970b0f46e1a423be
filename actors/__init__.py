"""actors: agent actors, their ``@Remote`` services, and the domains they serve.

This package is the actor runtime: ``_remote`` (``@Remote`` declarations), ``_system``
(activation and passivation), ``_mailbox`` (reader/writer admission), ``_agents``,
``_authorization``, ``_config``, the built-in services (``_builtin_services``,
``_session_service``, ``_store_services``, ``_reference_services``) and ``_serve`` (the
composition that ``serve`` and the cluster workers run).

This module is the public face a client imports from: the built-in services
(`Agents`, `Diagnostics`, `Sessions`, `SessionReferenceResolver`, `SessionFileReferences`,
all in `BUILTIN_SERVICES`) for typed proxies (``client.remote(Sessions)``), the types their
endpoints take and return, and the CURVE key loading of a client (`client_security`).

The domains are subpackages of plain functions over attrs classes that never import the runtime:
`actors.session_log` (DSH session logs), `actors.store` (the session store and its caches),
`actors.session_references` and `actors.file_references`. `actors.cli` is the command line and
`actors.cluster` the scale-out.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors._agents import Agent as Agent
    from actors._agents import AgentDirectory as AgentDirectory
    from actors._agents import AgentState as AgentState
    from actors._agents import InMemoryAgentDirectory as InMemoryAgentDirectory
    from actors._builtin_services import AgentInfo as AgentInfo
    from actors._builtin_services import Agents as Agents
    from actors._builtin_services import Diagnostics as Diagnostics
    from actors._builtin_services import HandlerEnding as HandlerEnding
    from actors._config import Config as Config
    from actors._config import ConfigError as ConfigError
    from actors._config import load_config as load_config
    from actors._keys import ENV_CLIENT_KEY as ENV_CLIENT_KEY
    from actors._keys import ENV_CLIENT_SECRET as ENV_CLIENT_SECRET
    from actors._keys import ENV_SERVER_KEY as ENV_SERVER_KEY
    from actors._keys import KeyFileError as KeyFileError
    from actors._keys import client_security as client_security
    from actors._keys import generate_key_files as generate_key_files
    from actors._keys import read_key_pair as read_key_pair
    from actors._keys import read_public_key as read_public_key
    from actors._mailbox import Mailbox as Mailbox
    from actors._mailbox import MailboxStatistics as MailboxStatistics
    from actors._reference_services import SessionFileReferences as SessionFileReferences
    from actors._reference_services import SessionReferenceResolver as SessionReferenceResolver
    from actors._remote import Remote as Remote
    from actors._remote import RemoteService as RemoteService
    from actors._serve import BUILTIN_SERVICES as BUILTIN_SERVICES
    from actors._serve import describe_builtin as describe_builtin
    from actors._session_service import AppendResult as AppendResult
    from actors._session_service import CreatedSession as CreatedSession
    from actors._session_service import ModelRouteInfo as ModelRouteInfo
    from actors._session_service import PageCursor as PageCursor
    from actors._session_service import SessionInfo as SessionInfo
    from actors._session_service import SessionPage as SessionPage
    from actors._session_service import Sessions as Sessions
    from actors._session_service import SurfaceSnapshotResult as SurfaceSnapshotResult
    from actors._session_service import TitleResult as TitleResult
    from actors._system import ActorSystem as ActorSystem
    from actors._system import ActorSystemStatistics as ActorSystemStatistics
    from actors.file_references import CandidateKind as CandidateKind
    from actors.file_references import FileReferenceCandidate as FileReferenceCandidate
    from actors.session_references import ContentBlock as ContentBlock
    from actors.session_references import ImageContent as ImageContent
    from actors.session_references import MentionReference as MentionReference
    from actors.session_references import ParsedSessionReferenceText as ParsedSessionReferenceText
    from actors.session_references import PreparedReferencedMessage as PreparedReferencedMessage
    from actors.session_references import ReasoningContent as ReasoningContent
    from actors.session_references import SessionReferenceCandidate as SessionReferenceCandidate
    from actors.session_references import SessionReferenceErrorCode as SessionReferenceErrorCode
    from actors.session_references import SessionReferenceInput as SessionReferenceInput
    from actors.session_references import (
        SessionReferenceMentionCandidate as SessionReferenceMentionCandidate,
    )
    from actors.session_references import SessionReferenceSource as SessionReferenceSource
    from actors.session_references import (
        SessionReferenceSourceReference as SessionReferenceSourceReference,
    )
    from actors.session_references import TextContent as TextContent
    from actors.session_references import ToolCallContent as ToolCallContent
    from actors.session_references import ToolResultContent as ToolResultContent
    from actors.session_references import UserMessage as UserMessage
    from actors.store import EventInput as EventInput
    from actors.store import SessionListing as SessionListing

#: The module each public name lives in. They are imported on first use (PEP 562), so a program
#: that needs one name, or only ``actors.cli``'s ``--help``, does not load the rest.
_EXPORTS: dict[str, str] = {
    "ActorSystem": "actors._system",
    "ActorSystemStatistics": "actors._system",
    "Agent": "actors._agents",
    "AgentDirectory": "actors._agents",
    "AgentInfo": "actors._builtin_services",
    "AgentState": "actors._agents",
    "Agents": "actors._builtin_services",
    "AppendResult": "actors._session_service",
    "BUILTIN_SERVICES": "actors._serve",
    "CandidateKind": "actors.file_references",
    "Config": "actors._config",
    "ConfigError": "actors._config",
    "ContentBlock": "actors.session_references",
    "CreatedSession": "actors._session_service",
    "Diagnostics": "actors._builtin_services",
    "ENV_CLIENT_KEY": "actors._keys",
    "ENV_CLIENT_SECRET": "actors._keys",
    "ENV_SERVER_KEY": "actors._keys",
    "EventInput": "actors.store",
    "FileReferenceCandidate": "actors.file_references",
    "HandlerEnding": "actors._builtin_services",
    "ImageContent": "actors.session_references",
    "InMemoryAgentDirectory": "actors._agents",
    "KeyFileError": "actors._keys",
    "Mailbox": "actors._mailbox",
    "MailboxStatistics": "actors._mailbox",
    "MentionReference": "actors.session_references",
    "ModelRouteInfo": "actors._session_service",
    "PageCursor": "actors._session_service",
    "ParsedSessionReferenceText": "actors.session_references",
    "PreparedReferencedMessage": "actors.session_references",
    "ReasoningContent": "actors.session_references",
    "Remote": "actors._remote",
    "RemoteService": "actors._remote",
    "SessionFileReferences": "actors._reference_services",
    "SessionInfo": "actors._session_service",
    "SessionListing": "actors.store",
    "SessionPage": "actors._session_service",
    "SessionReferenceCandidate": "actors.session_references",
    "SessionReferenceErrorCode": "actors.session_references",
    "SessionReferenceInput": "actors.session_references",
    "SessionReferenceMentionCandidate": "actors.session_references",
    "SessionReferenceResolver": "actors._reference_services",
    "SessionReferenceSource": "actors.session_references",
    "SessionReferenceSourceReference": "actors.session_references",
    "Sessions": "actors._session_service",
    "SurfaceSnapshotResult": "actors._session_service",
    "TextContent": "actors.session_references",
    "TitleResult": "actors._session_service",
    "ToolCallContent": "actors.session_references",
    "ToolResultContent": "actors.session_references",
    "UserMessage": "actors.session_references",
    "client_security": "actors._keys",
    "describe_builtin": "actors._serve",
    "generate_key_files": "actors._keys",
    "load_config": "actors._config",
    "read_key_pair": "actors._keys",
    "read_public_key": "actors._keys",
}

__all__ = [
    "BUILTIN_SERVICES",
    "ENV_CLIENT_KEY",
    "ENV_CLIENT_SECRET",
    "ENV_SERVER_KEY",
    "ActorSystem",
    "ActorSystemStatistics",
    "Agent",
    "AgentDirectory",
    "AgentInfo",
    "AgentState",
    "Agents",
    "AppendResult",
    "CandidateKind",
    "Config",
    "ConfigError",
    "ContentBlock",
    "CreatedSession",
    "Diagnostics",
    "EventInput",
    "FileReferenceCandidate",
    "HandlerEnding",
    "ImageContent",
    "InMemoryAgentDirectory",
    "KeyFileError",
    "Mailbox",
    "MailboxStatistics",
    "MentionReference",
    "ModelRouteInfo",
    "PageCursor",
    "ParsedSessionReferenceText",
    "PreparedReferencedMessage",
    "ReasoningContent",
    "Remote",
    "RemoteService",
    "SessionFileReferences",
    "SessionInfo",
    "SessionListing",
    "SessionPage",
    "SessionReferenceCandidate",
    "SessionReferenceErrorCode",
    "SessionReferenceInput",
    "SessionReferenceMentionCandidate",
    "SessionReferenceResolver",
    "SessionReferenceSource",
    "SessionReferenceSourceReference",
    "Sessions",
    "SurfaceSnapshotResult",
    "TextContent",
    "TitleResult",
    "ToolCallContent",
    "ToolResultContent",
    "UserMessage",
    "client_security",
    "describe_builtin",
    "generate_key_files",
    "load_config",
    "read_key_pair",
    "read_public_key",
]


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'actors' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
