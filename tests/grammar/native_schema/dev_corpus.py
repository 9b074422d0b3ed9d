"""MaskBench dev (../shared beside the checkout), as the tests of this folder read it."""

from __future__ import annotations

import gzip
import json

from .building import ROOT

DEV = ROOT.parent / "shared" / "data" / "maskbench-dev.jsonl.gz"


def dev_entries():
    """(id, schema, its test instances) for every dev schema."""
    assert DEV.exists(), f"MaskBench dev is not at {DEV} (../shared beside the checkout)"
    with gzip.open(DEV, "rt", encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            s = e["schema"]
            yield e["id"], json.loads(s) if isinstance(s, str) else s, e.get("tests", [])


def dev_schemas():
    """(id, schema) for every dev schema."""
    for sid, schema, _ in dev_entries():
        yield sid, schema


def dev_objects():
    """Every JSON object inside every dev schema (in data too), without recursion."""
    for _, schema, _ in dev_entries():
        stack = [schema]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                yield x
                stack.extend(x.values())
            elif isinstance(x, list):
                stack.extend(x)
