"""Numpy reference forward pass of the GGUF architectures the build supports: f32, weights dequantized
as stored, with a KV cache.

The oracle for the WebGPU runtime, written from llama.cpp's documented semantics per architecture
(not from the GPU plan): RoPE rotates the pairs it names directly (interleaved pairs 2i, 2i+1 for
Llama and Mistral; the halves i, i + d/2 for NeoX-style Qwen, Gemma and Phi-3), where the GPU
reorders rows. Written for clarity, not speed (about 24 tok/s on SmolLM2 here).
"""

import gguf
import numpy as np

from trellis.kernels.gguf_model import dequantize, read_config


def causal_attention(q, k, v, start: int, scale: float | None = None, softcap: float = 0.0,
                     window: int = 0) -> np.ndarray:
    """softmax(q . k * scale) . v [n, heads, d] for queries q [n, heads, d] at positions start..,
    over the keys and values [start + n, KV heads, d] (grouped-query: a KV head serves heads / KV heads).
    `scale` defaults to 1/sqrt(d); `softcap` caps the scores (cap * tanh(s / cap)); with `window`, a
    query sees only the last `window` positions, its own included."""
    n, heads, d = q.shape
    group = heads // k.shape[1]
    keys = np.repeat(k, group, axis=1)  # [t, heads, d]
    values = np.repeat(v, group, axis=1)
    # A Python float keeps float32 (np.sqrt's float64 scalar would promote every later matmul).
    scores = np.einsum("nhd,thd->hnt", q, keys) * (1.0 / d**0.5 if scale is None else float(scale))
    if softcap:
        scores = softcap * np.tanh(scores / softcap)
    key_pos, query_pos = np.arange(len(k))[None, :], np.arange(start, start + n)[:, None]
    hidden = key_pos > query_pos
    if window:
        hidden |= key_pos <= query_pos - window
    scores = np.where(hidden[None], -np.inf, scores)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    scores /= scores.sum(axis=-1, keepdims=True)
    return np.einsum("hnt,thd->nhd", scores, values)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.float32(np.sqrt(2 / np.pi)) * (x + np.float32(0.044715) * x**3)))


def silu(x):
    return x / (1 + np.exp(-x))


class ReferenceModel:
    def __init__(self, gguf_path):
        reader = gguf.GGUFReader(str(gguf_path))
        self.config = read_config(reader)
        # Every tensor type gguf dequantizes (the reference also reads models the GPU build cannot yet).
        self.w = {t.name: dequantize(t) for t in reader.tensors}
        self.reset()

    def reset(self):
        c = self.config
        self.k = [np.zeros((0, c.n_kv_heads, c.head_dim), np.float32) for _ in range(c.n_layers)]
        self.v = [np.zeros((0, c.n_kv_heads, c.head_dim), np.float32) for _ in range(c.n_layers)]

    @property
    def position(self) -> int:
        return self.k[0].shape[0]

    def _rms_norm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.config.rms_eps) * weight

    def _angles(self, positions, d, layer):
        """position * theta^(-2i/d) per pair i: the layer's base (sliding-window layers may have their
        own), positions over the linear scale (global layers), frequencies over rope_freqs."""
        c = self.config
        sliding = c.sliding(layer)
        theta = c.rope_theta_local if sliding and c.rope_theta_local else c.rope_theta
        freqs = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        if "rope_freqs.weight" in self.w:
            freqs = freqs / self.w["rope_freqs.weight"].reshape(-1).astype(np.float64)
        scale = 1.0 if sliding else c.rope_scale
        return (positions.astype(np.float64) / scale)[:, None] * freqs[None, :]

    def _rope(self, x, positions, layer=0):
        """Rotate each head's pairs by their angle: (2i, 2i+1) interleaved, or (i, i + d/2) NeoX."""
        d = x.shape[-1]
        angles = self._angles(positions, d, layer)
        cos = np.cos(angles)[:, None, :].astype(np.float32)
        sin = np.sin(angles)[:, None, :].astype(np.float32)
        if self.config.rope_style == "neox":
            first, second = x[..., : d // 2], x[..., d // 2:]
            return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def _qkv(self, h, p):
        c, w = self.config, self.w
        q_rows, kv_rows = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        if c.fused_qkv:
            qkv = h @ w[p + "attn_qkv.weight"].T
            q, k, v = qkv[:, :q_rows], qkv[:, q_rows:q_rows + kv_rows], qkv[:, q_rows + kv_rows:]
        else:
            q, k, v = (h @ w[p + f"attn_{n}.weight"].T for n in "qkv")
        if c.qkv_bias:
            q, k, v = q + w[p + "attn_q.bias"], k + w[p + "attn_k.bias"], v + w[p + "attn_v.bias"]
        return q, k, v

    def _ffn(self, h, p):
        c, w = self.config, self.w
        if c.fused_gate_up:
            gate_up = h @ w[p + "ffn_up.weight"].T
            gate, up = gate_up[:, :c.ffn], gate_up[:, c.ffn:]
        else:
            gate, up = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
        act = gelu_tanh(gate) if c.activation == "gelu_tanh" else silu(gate)
        return (act * up) @ w[p + "ffn_down.weight"].T

    def forward(self, tokens) -> np.ndarray:
        """Logits [len(tokens), vocab] for `tokens` appended after the cached positions."""
        c, w = self.config, self.w
        n, start = len(tokens), self.position
        positions = np.arange(start, start + n)
        x = w["token_embd.weight"][np.asarray(tokens)]
        if c.embed_scale != 1.0:
            x = x * np.float32(c.embed_scale)
        for i in range(c.n_layers):
            p = f"blk.{i}."
            h = self._rms_norm(x, w[p + "attn_norm.weight"])
            q, k, v = self._qkv(h, p)
            q = q.reshape(n, c.n_heads, c.head_dim)
            k = k.reshape(n, c.n_kv_heads, c.head_dim)
            v = v.reshape(n, c.n_kv_heads, c.head_dim)
            if c.qk_norm:
                q, k = self._rms_norm(q, w[p + "attn_q_norm.weight"]), self._rms_norm(k, w[p + "attn_k_norm.weight"])
            q, k = self._rope(q, positions, i), self._rope(k, positions, i)
            self.k[i] = np.concatenate([self.k[i], k])
            self.v[i] = np.concatenate([self.v[i], v])
            attn = causal_attention(q, self.k[i], self.v[i], start, c.scale, c.attn_softcap,
                                    c.sliding_window if c.sliding(i) else 0).reshape(n, c.n_heads * c.head_dim)
            out = attn @ w[p + "attn_output.weight"].T
            if c.post_norms:
                out = self._rms_norm(out, w[p + "post_attention_norm.weight"])
            x = x + out
            out = self._ffn(self._rms_norm(x, w[p + "ffn_norm.weight"]), p)
            if c.post_norms:
                out = self._rms_norm(out, w[p + "post_ffw_norm.weight"])
            x = x + out
        x = self._rms_norm(x, w["output_norm.weight"])
        head = w.get("output.weight", w["token_embd.weight"])
        assert x.dtype == np.float32
        logits = x @ head.T
        if c.final_softcap:
            logits = c.final_softcap * np.tanh(logits / c.final_softcap)
        return logits

    def greedy(self, prompt_ids, max_tokens: int, eos: int | None = None) -> list[int]:
        logits = self.forward(prompt_ids)[-1]
        out = []
        for _ in range(max_tokens):
            token = int(np.argmax(logits))
            out.append(token)
            if token == eos:
                break
            logits = self.forward([token])[-1]
        return out


ReferenceLlama = ReferenceModel  # the name from before other architectures
