"""`$ref` resolution inside one schema document: `$id` bases, `$anchor`, JSON pointers.

Every subschema is a `Node`: the schema value, its base URI and its JSON pointer from the
document root (for error messages and as the identity used to name grammar rules).
Remote references (to documents that are not embedded via `$id`) raise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urldefrag

from ...errors import UnsupportedSchemaError

DEFAULT_BASE = "https://trellis.invalid/schema.json"

# Keywords whose value is a subschema, an array of subschemas, or an object of subschemas.
SCHEMA_KEYWORDS = {"additionalProperties", "propertyNames", "additionalItems", "contains", "not", "if", "then",
                   "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "items"}
SCHEMA_LIST_KEYWORDS = {"allOf", "anyOf", "oneOf", "prefixItems", "items"}
SCHEMA_MAP_KEYWORDS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class Node:
    schema: object  # dict or bool
    base: str
    pointer: str  # JSON pointer from the document root, "" for the root

    @property
    def key(self) -> tuple[str, str]:
        return (self.base, self.pointer)

    def __hash__(self):
        return hash((self.base, self.pointer))

    def __eq__(self, other):
        return isinstance(other, Node) and self.base == other.base and self.pointer == other.pointer


def join(base: str, ref: str) -> str:
    if _SCHEME.match(ref):
        return ref
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if _SCHEME.match(base) and base.split(":", 1)[0].lower() in ("http", "https", "file", "ftp"):
        return urljoin(base, ref)
    if base.startswith("urn:") or base.startswith("tag:"):
        return ref if not ref else urldefrag(base)[0] + ("" if ref.startswith("#") else "#") + ref
    return urljoin(base, ref)


def escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class Resolver:
    def __init__(self, root, *, draft7: bool):
        self.draft7 = draft7
        self.resources: dict[str, Node] = {}  # base URI (no fragment) -> resource root node
        self.anchors: dict[str, Node] = {}  # "uri#name" -> node
        self.by_pointer: dict[str, Node] = {}  # document pointer -> node
        base = DEFAULT_BASE
        if isinstance(root, dict) and isinstance(root.get("$id"), str):
            base = urldefrag(join(DEFAULT_BASE, root["$id"]))[0] or DEFAULT_BASE
        if draft7 and isinstance(root, dict) and "$ref" in root:
            id_base, base = base, DEFAULT_BASE  # draft-07 ignores the siblings of $ref, $id included
        else:
            id_base = base
        self.root = Node(root, base, "")
        self._walk(root, DEFAULT_BASE, "")
        self.resources.setdefault(id_base, self.root)  # refs written against the ignored $id still work

    def _walk(self, schema, base: str, pointer: str) -> None:
        if not isinstance(schema, dict):
            if isinstance(schema, bool):
                self.by_pointer[pointer] = Node(schema, base, pointer)
            return
        sid = schema.get("$id")
        if self.draft7 and "$ref" in schema:
            sid = None  # draft-07: siblings of $ref (including $id) are ignored
        if isinstance(sid, str):
            if self.draft7 and sid.startswith("#"):
                self.anchors[join(base, sid)] = Node(schema, base, pointer)
            else:
                base = urldefrag(join(base, sid))[0]
                self.resources.setdefault(base, Node(schema, base, pointer))
        node = Node(schema, base, pointer)
        self.by_pointer[pointer] = node
        if pointer == "":
            self.resources.setdefault(base, node)
            self.resources.setdefault(DEFAULT_BASE, node)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(schema.get(key), str):
                self.anchors.setdefault(base + "#" + schema[key], node)
        for key, value in schema.items():
            sub = pointer + "/" + escape_pointer(key)
            if key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
                for name, s in value.items():
                    if isinstance(s, (dict, bool)):
                        self._walk(s, base, sub + "/" + escape_pointer(name))
            elif key in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
                for i, s in enumerate(value):
                    self._walk(s, base, f"{sub}/{i}")
            elif key in SCHEMA_KEYWORDS and isinstance(value, (dict, bool)):
                self._walk(value, base, sub)

    def resolve(self, node: Node, ref, keyword: str = "$ref") -> Node:
        if not isinstance(ref, str):
            raise UnsupportedSchemaError("$ref must be a string", keyword, node.pointer)
        target = join(node.base, ref)
        uri, fragment = urldefrag(target)
        if uri not in self.resources:
            raise UnsupportedSchemaError(f"remote reference {ref!r} is not supported", keyword, node.pointer)
        resource = self.resources[uri]
        fragment = unquote(fragment)
        if fragment == "" or fragment.startswith("/"):
            return self._pointer(resource, fragment, node, keyword, ref)
        found = self.anchors.get(uri + "#" + fragment)
        if found is None:
            raise UnsupportedSchemaError(f"anchor in {ref!r} not found", keyword, node.pointer)
        return found

    def _pointer(self, resource: Node, fragment: str, at: Node, keyword: str, ref: str) -> Node:
        value = resource.schema
        pointer = resource.pointer
        for token in fragment.split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            pointer += "/" + escape_pointer(token)
            if isinstance(value, dict) and token in value:
                value = value[token]
            elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
                value = value[int(token)]
            else:
                raise UnsupportedSchemaError(f"reference {ref!r} does not resolve", keyword, at.pointer)
        known = self.by_pointer.get(pointer)
        if known is not None and known.schema is value:
            return known
        if not isinstance(value, (dict, bool)):
            raise UnsupportedSchemaError(f"reference {ref!r} is not a schema", keyword, at.pointer)
        base = resource.base
        if isinstance(value, dict) and isinstance(value.get("$id"), str):
            base = urldefrag(join(base, value["$id"]))[0]
        return Node(value, base, pointer)
