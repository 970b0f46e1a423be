"""actors: agent actors, their ``@Remote`` services, and the domains they serve.

This package is the actor runtime: ``_remote`` (``@Remote`` declarations), ``_system``
(activation and passivation), ``_mailbox`` (reader/writer admission), ``_agents``,
``_authorization``, ``_config``, the built-in services (``_builtin_services``,
``_session_service``, ``_store_services``, ``_reference_services``) and ``_serve`` (the
composition that ``serve`` and the cluster workers run).

The domains are subpackages of plain functions over attrs classes that never import the runtime:
`actors.session_log` (DSH session logs), `actors.store` (the session store and its caches),
`actors.session_references` and `actors.file_references`. `actors.cli` is the command line and
`actors.cluster` the scale-out.
"""

from actors._agents import Agent as Agent
from actors._agents import AgentDirectory as AgentDirectory
from actors._agents import AgentState as AgentState
from actors._agents import InMemoryAgentDirectory as InMemoryAgentDirectory
from actors._builtin_services import Agents as Agents
from actors._builtin_services import Diagnostics as Diagnostics
from actors._config import Config as Config
from actors._config import ConfigError as ConfigError
from actors._config import load_config as load_config
from actors._mailbox import Mailbox as Mailbox
from actors._mailbox import MailboxStatistics as MailboxStatistics
from actors._remote import Remote as Remote
from actors._remote import RemoteService as RemoteService
from actors._system import ActorSystem as ActorSystem
from actors._system import ActorSystemStatistics as ActorSystemStatistics

__all__ = [
    "ActorSystem",
    "ActorSystemStatistics",
    "Agent",
    "AgentDirectory",
    "AgentState",
    "Agents",
    "Config",
    "ConfigError",
    "Diagnostics",
    "InMemoryAgentDirectory",
    "Mailbox",
    "MailboxStatistics",
    "Remote",
    "RemoteService",
    "load_config",
]
