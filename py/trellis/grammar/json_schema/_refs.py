"""`$ref` and `$dynamicRef` resolution inside one schema document: `$id` bases, `$anchor`,
`$dynamicAnchor`, JSON pointers.

Every subschema is a `Node`: the schema value, its base URI and its JSON pointer from the
document root (for error messages and as the identity used to name grammar rules).
Remote references (to documents that are not embedded via `$id`) raise.

`$dynamicRef` (2020-12): a Node also carries `dyn`, the part of its dynamic scope that matters:
for each anchor name some bookended `$dynamicRef` uses, the outermost schema resource entered
on the way to the node that declares it with `$dynamicAnchor`. Nodes, and so the grammar rules
made from them, are specialized by it; the outermost binding of a name never changes, so `dyn`
only grows, and specialization ends. A document without such names keeps `dyn` None.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote, urljoin, urldefrag

from ...errors import UnsupportedSchemaError
from ._keywords import NOTES, check_depth, subschemas

DEFAULT_BASE = "https://trellis.invalid/schema.json"

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class Node:
    """A subschema where it is: its value, its base URI, its JSON pointer from the document root
    ("" for the root) and, where a $dynamicRef can depend on it, the sorted (anchor name,
    resource URI) bindings of its dynamic scope (see the module docstring). Never changed once
    built; `key` (what tells nodes apart, memo tables' keys) is made once, as nodes are asked for
    it thousands of times in a conversion."""

    __slots__ = ("schema", "base", "pointer", "dyn", "key")

    def __init__(self, schema, base: str, pointer: str, dyn: tuple | None = None):
        self.schema, self.base, self.pointer, self.dyn = schema, base, pointer, dyn
        self.key = (base, pointer) if dyn is None else (base, pointer, dyn)

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, Node) and self.key == other.key

    def __repr__(self):
        return f"Node({self.base!r}, {self.pointer!r}{'' if self.dyn is None else f', {self.dyn!r}'})"


def defrag(uri: str) -> tuple[str, str]:
    """(the URI without its fragment, the fragment); unparsable: UnsupportedSchemaError."""
    try:
        return urldefrag(uri)
    except ValueError as e:  # urllib: "Invalid IPv6 URL", ...
        raise UnsupportedSchemaError(f"cannot parse the URI {uri!r}: {e}", "$ref", "") from None


def join(base: str, ref: str) -> str:
    """`ref` resolved against `base`; a URI that cannot be parsed is UnsupportedSchemaError."""
    try:
        return _join(base, ref)
    except ValueError as e:  # urllib: "Invalid IPv6 URL", a bad port, ...
        raise UnsupportedSchemaError(f"cannot resolve {ref!r} against {base!r}: {e}", "$ref", "") from None


def _join(base: str, ref: str) -> str:
    if _SCHEME.match(ref):
        return ref
    if ref.startswith("#"):
        return defrag(base)[0] + ref
    if _SCHEME.match(base) and base.split(":", 1)[0].lower() in ("http", "https", "file", "ftp"):
        return urljoin(base, ref)
    if base.startswith("urn:") or base.startswith("tag:"):
        return ref if not ref else defrag(base)[0] + ("" if ref.startswith("#") else "#") + ref
    return urljoin(base, ref)


def plain_name(ref: str) -> str | None:
    """The anchor name of a reference's fragment (not a JSON pointer), or None."""
    fragment = unquote(defrag(ref)[1])
    return fragment if fragment and not fragment.startswith("/") else None


# What a subschema may say that tells nothing about instances (see Resolver.canonical): notes,
# and definitions, which references reach by their own pointers.
_SILENT = NOTES | {"$defs", "definitions"}

# Subschemas are numbered by what they say (see Resolver.canonical) in documents of at least
# this many: below, the numbering costs more than building a few small copies again.
MIN_NUMBERED = 64

# In `dyn`: the way to the node went through a negation (a schema rebuilt from pieces), so its
# dynamic scope is not known exactly. "" is no anchor name.
UNKNOWN_SCOPE = ("", "")


def escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class Resolver:
    def __init__(self, root, *, draft7: bool):
        self.draft7 = draft7
        self.resources: dict[str, Node] = {}  # base URI (no fragment) -> resource root node
        self.anchors: dict[str, Node] = {}  # "uri#name" -> node
        self.by_pointer: dict[str, Node] = {}  # document pointer -> node
        self.dynamic_anchors: dict[tuple[str, str], Node] = {}  # (resource URI, name) -> node
        self.dynamic_names: set[str] = set()  # the anchor names of the $dynamicRefs
        self._resolved: dict[tuple[str, str], Node] = {}  # (base URI, reference) -> its target
        self._base_uris: dict[str, str] = {}  # base URI -> it without its fragment
        self.content: dict[str, int] = {}  # walked subschema's pointer -> the number of what it says
        self._numbers: dict = {}  # what a subschema says -> its number
        self._canonical: dict = {}  # (number, base, dyn) -> the first node met
        base = DEFAULT_BASE
        if isinstance(root, dict) and isinstance(root.get("$id"), str):
            base = defrag(join(DEFAULT_BASE, root["$id"]))[0] or DEFAULT_BASE
        if draft7 and isinstance(root, dict) and "$ref" in root:
            id_base, base = base, DEFAULT_BASE  # draft-07 ignores the siblings of $ref, $id included
        else:
            id_base = base
        self.root = Node(root, base, "")
        self._walk(root, DEFAULT_BASE, "")
        self.resources.setdefault(id_base, self.root)  # refs written against the ignored $id still work
        self._scope_init()

    def _walk(self, root, base: str, pointer: str, late: bool = False) -> None:
        """Visits every subschema (depth first, in document order, without recursion: nesting is
        the user's), checks its keywords (_keywords.subschemas), records its pointer, `$id`,
        anchors and dynamic references, and numbers it by what it says. `late`: a subschema a
        reference reaches inside an unknown keyword (a folder of definitions), whose `$id`s and
        anchors are not a schema's: only its pointers and numbers are recorded, every node with
        `base`, so that its copies of one definition are built once too."""
        todo = [(root, base, pointer, pointer.count("/"))]
        walked: list = []
        while todo:
            schema, base, pointer, depth = todo.pop()
            if not isinstance(schema, dict):
                if isinstance(schema, bool):
                    self.by_pointer[pointer] = Node(schema, base, pointer)
                continue
            check_depth(depth, pointer)
            children = []
            kids = None  # keyword -> its subschemas as subschemas() gives them, for _content
            for key, value in schema.items():
                subs = subschemas(key, value, pointer, depth)
                if subs:
                    at = pointer + "/" + escape_pointer(key)
                    for token, sub in subs:
                        children.append((sub, at + token, depth + 1 + (token != "")))
                    if kids is None:
                        kids = {}
                    kids[key] = subs
            if late:
                self.by_pointer[pointer] = Node(schema, base, pointer)
            else:
                base = self._register(schema, base, pointer)
            walked.append((pointer, schema, kids))
            todo.extend((sub, base, ptr, d) for sub, ptr, d in reversed(children))
        if len(walked) >= MIN_NUMBERED or (late and self.content):
            self._content(walked)

    def _content(self, walked: list) -> None:
        """Numbers the walked subschemas by what they say: equal numbers for subschemas equal
        but for notes (and definitions, which references reach by their own pointers). `walked`
        lists parents before their subschemas, so they are numbered from the end."""
        numbers = self._numbers
        content = self.content
        for pointer, schema, kids in reversed(walked):
            said = []
            for key, value in schema.items():
                if key in _SILENT:
                    continue
                t = type(value)
                subs = kids.get(key) if kids else None
                if subs is not None and (t is not dict or len(subs) == len(value)):
                    # its subschemas' pointer tokens and own numbers (or "True"/"False")
                    at = pointer + "/" + escape_pointer(key)
                    said.append((key, tuple([token for token, _ in subs]),
                                 tuple([content.get(at + token) or str(sub) for token, sub in subs])))
                elif t is str:
                    said.append((key, value))
                else:
                    # the type tells 1, 1.0, true and "1" apart; values hashed as text, as Python
                    # hashes numbers alike modulo 2^61 - 1 (a schema of such numbers would make
                    # this table quadratic)
                    said.append((key, t, json.dumps(value) if t is dict or t is list else repr(value)))
            content[pointer] = numbers.setdefault(tuple(said), len(numbers) + 1)  # from 1: 0 is none

    def canonical(self, node: Node) -> Node:
        """The first node met of those that say what `node` says, from the same base and dynamic
        scope: contexts built from it are built once for all its copies (a normalized schema
        writes its definitions out in place, a third of some schemas' text)."""
        number = self.content.get(node.pointer)
        if number is None or self.by_pointer[node.pointer].schema is not node.schema:
            return node  # not walked here (a synthetic or unregistered subschema): its own
        return self._canonical.setdefault((number, node.base, node.dyn), node)

    def _register(self, schema: dict, base: str, pointer: str) -> str:
        """Records one walked subschema; returns the base URI its subschemas have."""
        sid = schema.get("$id")
        if self.draft7 and "$ref" in schema:
            sid = None  # draft-07: siblings of $ref (including $id) are ignored
        if isinstance(sid, str):
            if self.draft7 and sid.startswith("#"):
                self.anchors[join(base, sid)] = Node(schema, base, pointer)
            else:
                base = defrag(join(base, sid))[0]
                self.resources.setdefault(base, Node(schema, base, pointer))
        node = Node(schema, base, pointer)
        self.by_pointer[pointer] = node
        if pointer == "":
            self.resources.setdefault(base, node)
            self.resources.setdefault(DEFAULT_BASE, node)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(schema.get(key), str):
                self.anchors.setdefault(base + "#" + schema[key], node)
        if isinstance(schema.get("$dynamicAnchor"), str):
            self.dynamic_anchors.setdefault((base, schema["$dynamicAnchor"]), node)
        if isinstance(schema.get("$dynamicRef"), str):
            name = plain_name(schema["$dynamicRef"])
            if name is not None:
                self.dynamic_names.add(name)
        return base

    def resolve(self, node: Node, ref, keyword: str = "$ref") -> Node:
        if not isinstance(ref, str):
            raise UnsupportedSchemaError(f"{keyword} must be a string", keyword, node.pointer)
        known = self._resolved.get((node.base, ref))  # URI parsing is most of a resolution
        if known is None:
            known = self._resolved[(node.base, ref)] = self._resolve(node, ref, keyword)
        return known

    def _resolve(self, node: Node, ref: str, keyword: str) -> Node:
        if ref.startswith("#"):  # in the node's own resource (nearly every reference): its URI is the base's
            uri = self._base_uris.get(node.base)
            if uri is None:
                uri = self._base_uris[node.base] = defrag(node.base + "#")[0]  # parsed, as a target is
            fragment = ref[1:]
        else:
            uri, fragment = defrag(join(node.base, ref))
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
        # not walked yet (inside an unknown keyword, such as a folder of definitions): walked now
        base = resource.base
        if isinstance(value, dict) and isinstance(value.get("$id"), str):
            base = defrag(join(base, value["$id"]))[0]
        self._walk(value, base, pointer, late=True)
        return self.by_pointer[pointer]

    # ---- dynamic scope ($dynamicRef) --------------------------------------------------------

    def _scope_init(self) -> None:
        # Only names that a $dynamicRef uses and a $dynamicAnchor declares can make it dynamic.
        live = self.dynamic_names & {name for _, name in self.dynamic_anchors}
        self._declares: dict[str, tuple[str, ...]] = {}  # resource URI -> live names it declares
        for uri, name in sorted(self.dynamic_anchors):
            if name in live:
                self._declares[uri] = self._declares.get(uri, ()) + (name,)
        self._extended: dict = {}
        if live:
            self.root = self.enter(self.root, ())

    def enter(self, node: Node, dyn: tuple | None) -> Node:
        """node reached with the dynamic scope `dyn`: its resource joins the scope."""
        if dyn is None:
            return node
        names = self._declares.get(node.base)
        if names:
            key = (dyn, node.base)
            grown = self._extended.get(key)
            if grown is None:
                bound = {name for name, _ in dyn}
                new = tuple((name, node.base) for name in names if name not in bound)
                grown = self._extended[key] = tuple(sorted(dyn + new)) if new else dyn
            dyn = grown
        return Node(node.schema, node.base, node.pointer, dyn)

    def child(self, node: Node, pointer: str, value) -> Node:
        """The subschema `value` at `pointer` below node (the walked node when there is one)."""
        known = self.by_pointer.get(pointer)
        if known is None:
            known = Node(value, node.base, pointer)
        if node.dyn is None:
            return known
        return Node(known.schema, known.base, pointer, node.dyn) if known.base == node.base else \
            self.enter(known, node.dyn)

    def follow(self, node: Node, keyword: str) -> Node:
        """The target of node's `$ref` or `$dynamicRef`, in node's dynamic scope."""
        ref = node.schema[keyword]
        if keyword == "$dynamicRef" and self.draft7:
            raise UnsupportedSchemaError("$dynamicRef (2020-12) is not supported with draft-07 semantics", keyword,
                                         node.pointer)
        target = self.resolve(node, ref, keyword)
        if keyword == "$dynamicRef":
            target = self._dynamic_target(node, ref, target)
        return self.enter(target, node.dyn)

    def _dynamic_target(self, node: Node, ref: str, target: Node) -> Node:
        name = plain_name(ref)
        if name is None or not isinstance(target.schema, dict) or target.schema.get("$dynamicAnchor") != name:
            return target  # not bookended by a matching $dynamicAnchor: like $ref
        walked = self.by_pointer.get(node.pointer)
        if node.dyn is None or UNKNOWN_SCOPE in node.dyn or walked is None or walked.schema is not node.schema:
            raise UnsupportedSchemaError("$dynamicRef where its dynamic scope is not known (inside a negated or "
                                         "rebuilt subschema) is not supported", "$dynamicRef", node.pointer)
        for bound, uri in node.dyn:
            if bound == name:
                return self.dynamic_anchors[(uri, name)]
        return target

    @staticmethod
    def unknown_scope(dyn: tuple | None) -> tuple | None:
        """`dyn` for a schema rebuilt from pieces of others (a negation)."""
        if dyn is None or UNKNOWN_SCOPE in dyn:
            return dyn
        return tuple(sorted(dyn + (UNKNOWN_SCOPE,)))
