"""OpenAI-shaped response objects: plain JSON-ready dicts that also read as attributes
(`completion.choices[0].message.content`), so that the browser worker can post them as they are."""

from __future__ import annotations

import time
import uuid


class Record(dict):
    """A dict whose keys read as attributes too; nested dicts become Records."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, value in self.items():
            self[key] = _wrap(value)

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _wrap(value):
    if isinstance(value, dict) and not isinstance(value, Record):
        return Record(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())


def usage(prompt_tokens: int, completion_tokens: int, extra: dict) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens, "extra": extra}


def logprobs_content(entries, token_bytes) -> dict | None:
    """OpenAI's `logprobs` from (token, logprob, [(token, logprob), ...]) entries."""
    if entries is None:
        return None

    def item(token, logprob):
        data = token_bytes(token)
        return {"token": data.decode("utf-8", "replace"), "logprob": logprob, "bytes": list(data)}

    return {"content": [dict(item(t, lp), top_logprobs=[item(u, ulp) for u, ulp in top])
                        for t, lp, top in entries]}
