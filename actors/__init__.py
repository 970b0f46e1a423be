"""actors: agent actors, their ``@Remote`` services and the session domain.

Layout: the runtime (``_remote`` declarations, ``_system`` activation, ``_mailbox``
admission, ``_agents``), the built-in services, the command line (``_cli``), and the domain
modules (session logs, file and session references) as plain functions over attrs classes.
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
