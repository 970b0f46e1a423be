"""wire: protocol v1 of agent-actors over ZeroMQ, and its trio client and server.

Layout: the sans-IO core (``_messages``, ``_codec``, ``_codec_relay``, ``_errors``, ``_state``,
``_server_protocol``, ``_server_events``, ``_client_protocol``, ``_shapes``, ``_constraints``,
``_marks``, ``_schema``, ``_endpoints``, ``_detached``, ``_call_context``, ``_server_system``)
never imports trio or zmq and never reads a clock; ``_pump``, ``_server``, ``_server_socket``,
``_client`` and ``_proxy`` are the thin trio transport. This module pulls together the public
API. ``wire`` never imports ``actors``.
"""

from wire._client import Client as Client
from wire._client import ClientStatistics as ClientStatistics
from wire._client import open_client as open_client
from wire._codec import decode as decode
from wire._codec import encode as encode
from wire._collector import YOUNG_COLLECTION_THRESHOLD as YOUNG_COLLECTION_THRESHOLD
from wire._collector import settle_collector as settle_collector
from wire._collector import watch_collector as watch_collector
from wire._constraints import NonNegativeFloat as NonNegativeFloat
from wire._constraints import NonNegativeInt as NonNegativeInt
from wire._constraints import PositiveInt as PositiveInt
from wire._constraints import Range as Range
from wire._detached import Detach as Detach
from wire._detached import DetachedCall as DetachedCall
from wire._endpoints import DEFERRED as DEFERRED
from wire._endpoints import CallContext as CallContext
from wire._endpoints import Endpoint as Endpoint
from wire._endpoints import EndpointSpec as EndpointSpec
from wire._endpoints import Param as Param
from wire._endpoints import Registry as Registry
from wire._endpoints import describe_endpoints as describe_endpoints
from wire._errors import ERROR_TYPES as ERROR_TYPES
from wire._errors import AgentBusyError as AgentBusyError
from wire._errors import ArgumentsInvalidError as ArgumentsInvalidError
from wire._errors import BadRequestError as BadRequestError
from wire._errors import CallCancelledError as CallCancelledError
from wire._errors import CancelReason as CancelReason
from wire._errors import DeadlineExceededError as DeadlineExceededError
from wire._errors import ErrorCode as ErrorCode
from wire._errors import InternalError as InternalError
from wire._errors import LocalProtocolError as LocalProtocolError
from wire._errors import MovedError as MovedError
from wire._errors import OverloadedError as OverloadedError
from wire._errors import PeerLostError as PeerLostError
from wire._errors import RemoteProtocolError as RemoteProtocolError
from wire._errors import ResultInvalidError as ResultInvalidError
from wire._errors import SessionNotFoundError as SessionNotFoundError
from wire._errors import SessionReferenceError as SessionReferenceError
from wire._errors import TooLargeError as TooLargeError
from wire._errors import UnauthorizedError as UnauthorizedError
from wire._errors import UnavailableError as UnavailableError
from wire._errors import UnknownEndpointError as UnknownEndpointError
from wire._errors import UnsupportedVersionError as UnsupportedVersionError
from wire._errors import WireError as WireError
from wire._io_threads import IO_THREAD_POLICIES as IO_THREAD_POLICIES
from wire._io_threads import IoThreadPolicy as IoThreadPolicy
from wire._io_threads import use_io_thread_policy as use_io_thread_policy
from wire._marks import HANDLER_CHECKED as HANDLER_CHECKED
from wire._marks import Named as Named
from wire._messages import PROTOCOL_VERSION as PROTOCOL_VERSION
from wire._messages import Bye as Bye
from wire._messages import Call as Call
from wire._messages import Cancel as Cancel
from wire._messages import Error as Error
from wire._messages import Hello as Hello
from wire._messages import Message as Message
from wire._messages import Ping as Ping
from wire._messages import Pong as Pong
from wire._messages import Result as Result
from wire._messages import Welcome as Welcome
from wire._metrics import CallMetrics as CallMetrics
from wire._metrics import Histogram as Histogram
from wire._metrics import counter as counter
from wire._metrics import gauge as gauge
from wire._metrics import histogram_family as histogram_family
from wire._metrics import merge as merge_metrics
from wire._metrics_http import render_prometheus as render_prometheus
from wire._metrics_http import serve_metrics as serve_metrics
from wire._schema import DIALECT as SCHEMA_DIALECT
from wire._schema import SchemaBuilder as SchemaBuilder
from wire._security import ClientSecurity as ClientSecurity
from wire._security import CurveKeyError as CurveKeyError
from wire._security import CurveKeyPair as CurveKeyPair
from wire._security import ServerSecurity as ServerSecurity
from wire._server import Server as Server
from wire._server import ServerStatistics as ServerStatistics
from wire._server_protocol import ServerLimits as ServerLimits
from wire._server_protocol import ServerProtocol as ServerProtocol
from wire._server_system import METRICS_SPEC as METRICS_SPEC
from wire._server_system import SERVER_FAMILIES as SERVER_FAMILIES
from wire._server_system import SYSTEM_SPECS as SYSTEM_SPECS
from wire._server_system import MetricsSource as MetricsSource
from wire._server_system import ServerStats as ServerStats
from wire._server_system import metrics_snapshot as metrics_snapshot
from wire._shapes import WIRE_NAME as WIRE_NAME
from wire._shapes import ShapeError as ShapeError

__all__ = [
    "DEFERRED",
    "ERROR_TYPES",
    "HANDLER_CHECKED",
    "IO_THREAD_POLICIES",
    "METRICS_SPEC",
    "PROTOCOL_VERSION",
    "SCHEMA_DIALECT",
    "SERVER_FAMILIES",
    "SYSTEM_SPECS",
    "WIRE_NAME",
    "YOUNG_COLLECTION_THRESHOLD",
    "AgentBusyError",
    "ArgumentsInvalidError",
    "BadRequestError",
    "Bye",
    "Call",
    "CallCancelledError",
    "CallContext",
    "CallMetrics",
    "Cancel",
    "CancelReason",
    "Client",
    "ClientSecurity",
    "ClientStatistics",
    "CurveKeyError",
    "CurveKeyPair",
    "DeadlineExceededError",
    "Detach",
    "DetachedCall",
    "Endpoint",
    "EndpointSpec",
    "Error",
    "ErrorCode",
    "Hello",
    "Histogram",
    "InternalError",
    "IoThreadPolicy",
    "LocalProtocolError",
    "Message",
    "MetricsSource",
    "MovedError",
    "Named",
    "NonNegativeFloat",
    "NonNegativeInt",
    "OverloadedError",
    "Param",
    "PeerLostError",
    "Ping",
    "Pong",
    "PositiveInt",
    "Range",
    "Registry",
    "RemoteProtocolError",
    "Result",
    "ResultInvalidError",
    "SchemaBuilder",
    "Server",
    "ServerLimits",
    "ServerProtocol",
    "ServerSecurity",
    "ServerStatistics",
    "ServerStats",
    "SessionNotFoundError",
    "SessionReferenceError",
    "ShapeError",
    "TooLargeError",
    "UnauthorizedError",
    "UnavailableError",
    "UnknownEndpointError",
    "UnsupportedVersionError",
    "Welcome",
    "WireError",
    "counter",
    "decode",
    "describe_endpoints",
    "encode",
    "gauge",
    "histogram_family",
    "merge_metrics",
    "metrics_snapshot",
    "open_client",
    "render_prometheus",
    "serve_metrics",
    "settle_collector",
    "use_io_thread_policy",
    "watch_collector",
]
