"""A model's chat template (`tokenizer.chat_template`, Jinja) rendered as Hugging Face renders it.

`apply_chat_template` in transformers is the reference every model publisher tests its template
against, so the environment here is set up the same way:

  * a sandboxed, immutable environment (templates come with downloaded models: they may read the
    conversation, not reach into Python), `trim_blocks` and `lstrip_blocks`, the `loopcontrols`
    extension (`{% break %}`, `{% continue %}`);
  * variables: `messages`, `tools` and `documents` (None when absent: templates test
    `tools is not none`), `add_generation_prompt`, `bos_token`, `eos_token`, plus the caller's
    (e.g. `enable_thinking`);
  * functions: `raise_exception(message)`, `strftime_now(format)` (the local time), and a `tojson`
    filter that writes JSON as `json.dumps` does (no HTML escaping, `ensure_ascii` false, `indent`,
    `separators` and `sort_keys` false by default) instead of Jinja's HTML-safe one;
  * `namespace(...)` refuses attribute names starting with "_".

Messages are the request's, converted for templates the way transformers expects them
(`template_messages`): tool-call arguments as objects, not JSON text; no key whose value is None.

Every failure of a template (its own `raise_exception`, a syntax error, an undefined value used,
a type error inside it) is an `InvalidRequestError` naming `messages`: the template judges the
conversation. jinja2 is imported when a template is first compiled (under Pyodide it comes from
the site's files, see web/site.py).
"""

from __future__ import annotations

import json
import re
from datetime import datetime

from trellis.errors import InvalidRequestError

# End-of-turn markers of the common families; those a template writes also end generation.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|end|>")
# Always a stop token where the vocabulary has it (the ChatML models' end of document).
END_OF_TEXT = "<|endoftext|>"

_environment = None


def _make_environment():
    """The shared Jinja environment (made once: it holds no per-template state)."""
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace

    class TemplateNamespace(Namespace):
        """`namespace(...)`, refusing names starting with "_" (no way to CPython's internals)."""

        def __init__(*args, **kwargs):  # noqa: N805 (Namespace's signature: `self` may be a keyword)
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                _check_name(name)
            Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            _check_name(name)
            Namespace.__setitem__(self, name, value)

    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a namespace attribute may not start with '_': {name!r}")

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["namespace"] = TemplateNamespace
    env.globals["dict"] = _Dict()
    return env


class _Dict:
    """`dict(...)` and `dict.fromkeys(...)` for templates, without handing them the type itself."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args):
        return dict.fromkeys(*args)


def environment():
    global _environment
    if _environment is None:
        _environment = _make_environment()
    return _environment


_compiled: dict = {}  # source -> compiled template (a model's template is compiled once per process)


def _compile(source: str):
    template = _compiled.get(source)
    if template is None:
        template = environment().from_string(source)
        if len(_compiled) >= 16:
            _compiled.pop(next(iter(_compiled)))
        _compiled[source] = template
    return template


def _failed(e: Exception) -> InvalidRequestError:
    what = "the model's chat template refused the conversation"
    detail = str(e) or type(e).__name__
    if type(e).__name__ == "TemplateSyntaxError":
        what = f"the model's chat template is not valid Jinja (line {getattr(e, 'lineno', '?')})"
    elif type(e).__name__ == "UndefinedError":
        what = "the model's chat template used a value the conversation does not have"
    return InvalidRequestError(f"{what}: {detail}", "messages")


class ChatTemplate:
    """One model's chat template: `render(messages)` -> the prompt text.

    `source` None: the model has no template (a base model); `render` then refuses the
    conversation, since there is no right way to write it for such a model (use completions).
    `now`: the clock for `strftime_now` (tests fix it).
    """

    def __init__(self, source: str | None, *, bos_token: str | None = None, eos_token: str | None = None,
                 now=datetime.now):
        self.source, self.bos_token, self.eos_token, self._now = source, bos_token, eos_token, now
        self._compiled = None
        text = source or ""
        # Whether the template writes `tools` itself (else Trellis's own tool prompt is used).
        self.supports_tools = re.search(r"\btools\b", text) is not None
        # The system text a ChatML template inserts when the conversation has none (SmolLM2's
        # "You are a helpful AI assistant named SmolLM, ..."): Trellis's tool prompt keeps it.
        found = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", text, re.S)
        self.default_system = found.group(1) if found and "{" not in found.group(1) else None
        self.stop_tokens = tuple(t for t in END_OF_TURN if t in text) + (END_OF_TEXT,)

    @classmethod
    def from_manifest(cls, manifest: dict, tokens, **kw) -> "ChatTemplate":
        """The template a built model's manifest carries, with its BOS and EOS token texts."""
        tok = manifest.get("tokenizer", {})

        def text(key):
            i = tok.get(key)
            return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None

        return cls(manifest.get("chat_template"), bos_token=text("bos_token_id"), eos_token=text("eos_token_id"), **kw)

    def _template(self):
        if self.source is None:
            raise InvalidRequestError("this model has no chat template (a base model): send the prompt as text "
                                      "with completions.create", "messages")
        if self._compiled is None:
            try:
                self._compiled = _compile(self.source)
            except Exception as e:  # TemplateSyntaxError, or a limit of the parser
                raise _failed(e) from e
        return self._compiled

    def render(self, messages: list[dict], *, add_generation_prompt: bool = True, tools: list[dict] | None = None,
               documents: list[dict] | None = None, **variables) -> str:
        """The prompt for `messages` (dicts as `template_messages` makes them). `variables`
        (e.g. enable_thinking) go to the template as they are; bos_token and eos_token may be
        overridden there."""
        template = self._template()
        # A token the model lacks stays undefined, as in transformers' special_tokens_map.
        specials = {k: v for k, v in (("bos_token", self.bos_token), ("eos_token", self.eos_token)) if v is not None}
        context = {**specials, **variables,
                   "messages": messages, "tools": tools, "documents": documents,
                   "add_generation_prompt": add_generation_prompt,
                   "strftime_now": lambda fmt: self._now().strftime(fmt)}
        try:
            return template.render(**context)
        except RecursionError as e:
            raise InvalidRequestError("the model's chat template recursed too deeply", "messages") from e
        except Exception as e:  # the template's own raise_exception, undefined values, type errors
            raise _failed(e) from e


def template_messages(messages: list[dict]) -> list[dict]:
    """Request messages (as `parse_chat_request` normalizes them) in the form chat templates
    expect (transformers' conventions): a tool call's `arguments` is an object, not JSON text, and
    no key's value is None. An assistant message that only calls tools keeps `content` "" (OpenAI
    sends null there): templates such as Qwen3's read it unconditionally."""
    out = []
    for m in messages:
        msg = {k: v for k, v in m.items() if v is not None}
        if m.get("tool_calls"):
            msg["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["function"]["name"],
                                               "arguments": _arguments(c["function"]["arguments"])}}
                                 for c in m["tool_calls"]]
            msg.setdefault("content", "")
        out.append(msg)
    return out


def _arguments(text):
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text
