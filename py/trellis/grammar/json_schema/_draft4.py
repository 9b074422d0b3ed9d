"""draft-04's own forms, rewritten into the later drafts' that the converter reads.

draft-04 writes an exclusive bound as a flag on the bound (`"maximum": 5, "exclusiveMaximum":
true`); draft-06 on made the flag the bound itself (`"exclusiveMaximum": 5`). Every subschema
of the document is rewritten (data such as `enum` values are left alone), so that `$ref`
pointers still lead to the same places.
"""

from __future__ import annotations

from ._keywords import subschemas

_FLAGS = (("exclusiveMaximum", "maximum"), ("exclusiveMinimum", "minimum"))


def is_draft4(schema) -> bool:
    return isinstance(schema, dict) and isinstance(schema.get("$schema"), str) and "draft-04" in schema["$schema"]


def draft6_bounds(schema, pointer: str = "", depth: int = 0):
    """The schema with draft-04's boolean exclusive bounds in draft-06's form."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        subs = subschemas(key, value, pointer, depth)  # also checks the keyword's shape
        if not subs:
            out[key] = value
        elif subs[0][0] == "":
            out[key] = draft6_bounds(value, f"{pointer}/{key}", depth + 1)
        elif isinstance(value, list):
            out[key] = [draft6_bounds(s, f"{pointer}/{key}/{i}", depth + 2) for i, s in enumerate(value)]
        else:
            out[key] = {name: draft6_bounds(s, f"{pointer}/{key}/{name}", depth + 2) for name, s in value.items()}
    for flag, bound in _FLAGS:
        if isinstance(out.get(flag), bool):
            exclusive = out.pop(flag)
            if exclusive and bound in out:  # without its bound the flag says nothing
                out[flag] = out.pop(bound)
    return out
