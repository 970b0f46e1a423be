"""Text of ``docs/api.md`` in other languages: TypeScript types, shell and TypeScript calls.

:func:`type_text` writes a JSON Schema of ``system/describe`` as a TypeScript type, with each
record name between NUL characters so the caller can link it. :func:`shell_line` writes an
``agent-actors call`` command (httpie style: ``key=text``, ``key:=json``) and
:func:`call_snippet` the same call with the TypeScript client. Both spell a
:class:`~actors.cli._api_examples.Placeholder` as the reader's variable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from actors.cli._api_examples import AGENT, Placeholder

__all__ = ["ENDPOINT", "call_snippet", "shell_line", "type_text"]

#: The server the examples call.
ENDPOINT = "tcp://127.0.0.1:7555"

#: Lines longer than this are broken, one argument per line.
_WIDTH = 100

_SAFE_SHELL = re.compile(r"[\w@%+=:,./-]+")
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")


def type_text(schema: Mapping[str, Any]) -> str:
    """``schema`` as a TypeScript type; a ``$ref`` becomes ``\\0Name\\0``."""
    text, _ = _type(schema)
    return text


def _type(schema: Mapping[str, Any]) -> tuple[str, bool]:
    """The type's text, and whether it is a union (needs parentheses before ``[]``)."""
    if "$ref" in schema:
        return f"\0{str(schema['$ref']).rsplit('/', 1)[-1]}\0", False
    if "anyOf" in schema:
        return _union([_type(part)[0] for part in schema["anyOf"]])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False), False
    if "enum" in schema:
        return _union([json.dumps(v, ensure_ascii=False) for v in schema["enum"]])
    if schema.get("x-msgpack") == "bin":
        return "Uint8Array", False
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([_type({**schema, "type": k})[0] for k in kind])
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(_type(item)[0] for item in schema["prefixItems"]) + "]", False
        item, is_union = _type(schema.get("items", {}))
        return (f"({item})[]" if is_union else f"{item}[]"), False
    if kind == "object":
        return _object(schema), False
    if kind in ("string", "boolean", "null", "integer", "number"):
        return str(kind), False
    return "any", False


def _union(parts: Sequence[str]) -> tuple[str, bool]:
    unique = list(dict.fromkeys(parts))
    return " | ".join(unique), len(unique) > 1


def _object(schema: Mapping[str, Any]) -> str:
    properties: Mapping[str, Any] | None = schema.get("properties")
    if properties:
        required = set(schema.get("required", []))
        fields = [
            f"{name}{'' if name in required else '?'}: {_type(prop)[0]}"
            for name, prop in properties.items()
        ]
        return "{ " + "; ".join(fields) + " }"
    extra = schema.get("additionalProperties", True)
    value = _type(extra)[0] if isinstance(extra, Mapping) else "any"
    return f"Record<string, {value}>"


def shell_line(name: str, args: Mapping[str, Any], *, agent: bool, wrap: bool = True) -> str:
    """``agent-actors call ENDPOINT name [--agent $AGENT] key=value …``, broken with ``\\``
    when long (and ``wrap``)."""
    head = f"agent-actors call {ENDPOINT} {name}" + (f" --agent {AGENT.shell}" if agent else "")
    items = [_shell_item(key, value) for key, value in args.items()]
    line = " ".join([head, *items])
    if len(line) <= _WIDTH or not wrap:
        return line
    return " \\\n  ".join([head, *items])


def _shell_item(key: str, value: Any) -> str:
    if isinstance(value, Placeholder):
        return f'{key}="{value.shell}"'
    if isinstance(value, str):
        return f"{key}={_shell_quote(value)}"
    placeholders: dict[str, str] = {}
    text = json.dumps(_with_markers(value, placeholders), ensure_ascii=False)
    item = f"{key}:={text}"
    if not placeholders:
        return item if _SAFE_SHELL.fullmatch(item) else _single_quoted(item)
    quoted = _double_quoted(item)
    for marker, variable in placeholders.items():
        quoted = quoted.replace(marker, variable)
    return quoted


def _with_markers(value: Any, placeholders: dict[str, str]) -> Any:
    """``value`` with each placeholder replaced by a marker string (recorded in
    ``placeholders``) that survives JSON encoding and shell quoting unchanged."""
    if isinstance(value, Placeholder):
        marker = f"PLACEHOLDER{len(placeholders)}MARK"
        placeholders[marker] = value.shell
        return marker
    if isinstance(value, Mapping):
        return {k: _with_markers(v, placeholders) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_with_markers(v, placeholders) for v in value]
    return value


def _shell_quote(text: str) -> str:
    return text if _SAFE_SHELL.fullmatch(text) else _double_quoted(text)


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _double_quoted(text: str) -> str:
    return '"' + re.sub(r'(["\\$`])', r"\\\1", text) + '"'


def call_snippet(name: str, args: Mapping[str, Any], order: Sequence[str], *, agent: bool) -> str:
    """The call with the TypeScript client: an agent proxy with positional arguments in
    ``order`` when the endpoint takes an agent, else ``client.call(name, {…})``."""
    if not agent:
        return _statement("client.call(", [json.dumps(name), _js(dict(args))], ")")
    given = [key for key in order if key in args]
    unknown = sorted(set(args) - set(order))
    if unknown:
        raise ValueError(f"{name}: example arguments {unknown} are not parameters")
    last = order.index(given[-1]) + 1 if given else 0
    values = [_js(args[key]) if key in args else "undefined" for key in order[:last]]
    namespace, method = name.split("/", 1)
    return _statement(f"client.agent({AGENT.typescript}).{namespace}.{method}(", values, ")")


def _statement(head: str, values: Sequence[str], tail: str) -> str:
    line = f"const result = await {head}{', '.join(values)}{tail};"
    if len(line) <= _WIDTH and "\n" not in line:
        return line
    body = "".join(f"  {_indent(value)},\n" for value in values)
    return f"const result = await {head}\n{body}{tail};"


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def _js(value: Any, depth: int = 0) -> str:
    """``value`` as a JavaScript literal; objects and arrays break over lines when long."""
    flat = _js_flat(value)
    if len(flat) + 2 * depth + 4 <= _WIDTH or not isinstance(value, Mapping | list | tuple):
        return flat
    if isinstance(value, Mapping):
        inner = [f"{_js_key(k)}: {_js(v, depth + 1)}" for k, v in value.items()]
        open_, close = "{", "}"
    else:
        inner = [_js(v, depth + 1) for v in value]
        open_, close = "[", "]"
    body = "".join(f"  {_indent(item)},\n" for item in inner)
    return f"{open_}\n{body}{close}"


def _js_flat(value: Any) -> str:
    if isinstance(value, Placeholder):
        return value.typescript
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_js_key(k)}: {_js_flat(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_js_flat(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _js_key(key: str) -> str:
    return key if _IDENTIFIER.fullmatch(key) else json.dumps(key, ensure_ascii=False)
