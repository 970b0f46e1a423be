/**
 * agent-actors client for TypeScript: protocol v1 over ZeroMQ and msgpack, with calls that
 * take an `AbortSignal` and cancel across the wire. See README.md and docs/protocol.md.
 */

export { Client, connect, type ClientStatistics } from "./client.js";
export type { CallOptions, ClientOptions } from "./options.js";
export type { WireMap, WireValue } from "./codec.js";
export type { Welcome } from "./messages.js";
export { PROTOCOL_VERSIONS } from "./messages.js";
export type { ClientState, Limits } from "./protocol.js";
export { DEFAULT_LIMITS } from "./protocol.js";
export type { Description, EndpointSpec, ParamSpec } from "./catalog.js";
export type {
  AgentServices,
  CallArguments,
  DynamicService,
  DynamicServices,
  EndpointDeclaration,
  EndpointDeclarations,
  RemoteMethod,
  ServerServices,
  TypedServices,
} from "./proxy.js";
export type * from "./endpoints.js";
export { MAX_BACKLOG } from "./transport.js";
export {
  decodeSessionReferenceUri,
  encodeSessionReferenceUri,
  formatSessionReferenceMention,
  parseSessionReferenceText,
  SESSION_REFERENCE_SCHEME,
  type MentionReference,
  type ParsedSessionReferenceText,
} from "./mentions.js";
export {
  checkZ85Key,
  curveKeysFromFiles,
  KeyError,
  readKeyPair,
  readPublicKey,
  type CurveKeys,
  type KeyPair,
} from "./keys.js";
export {
  AgentBusyError,
  ArgumentsInvalidError,
  BadRequestError,
  CallCancelledError,
  CANCEL_REASONS,
  DeadlineExceededError,
  ERROR_CODES,
  errorFromWire,
  InternalError,
  MovedError,
  OverloadedError,
  PeerLostError,
  ResultInvalidError,
  SESSION_REFERENCE_CODES,
  SessionNotFoundError,
  SessionReferenceError,
  TooLargeError,
  UnauthorizedError,
  UnavailableError,
  UnknownEndpointError,
  UnsupportedVersionError,
  WireError,
  type CancelReason,
  type ErrorDetails,
} from "./errors.js";
