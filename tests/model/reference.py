"""Numpy reference forward pass of a Llama GGUF: f32, weights dequantized as stored, interleaved RoPE.

The oracle for the WebGPU runtime. Written for clarity, not speed (about 24 tok/s on SmolLM2 here).
"""

import gguf
import numpy as np

from kernels.llm.gguf_model import dequantize, read_config, tensors_by_name


def causal_attention(q, k, v, start: int) -> np.ndarray:
    """softmax(q . k / sqrt(d)) . v [n, heads, d] for queries q [n, heads, d] at positions start..,
    over the keys and values [start + n, KV heads, d] (grouped-query: a KV head serves heads / KV heads)."""
    n, heads, d = q.shape
    group = heads // k.shape[1]
    keys = np.repeat(k, group, axis=1)  # [t, heads, d]
    values = np.repeat(v, group, axis=1)
    # A Python float keeps float32 (np.sqrt's float64 scalar would promote every later matmul).
    scores = np.einsum("nhd,thd->hnt", q, keys) * (1.0 / d**0.5)
    future = np.arange(len(k))[None, :] > np.arange(start, start + n)[:, None]
    scores = np.where(future[None], -np.inf, scores)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    scores /= scores.sum(axis=-1, keepdims=True)
    return np.einsum("hnt,thd->nhd", scores, values)


class ReferenceLlama:
    def __init__(self, gguf_path):
        reader = gguf.GGUFReader(str(gguf_path))
        self.config = read_config(reader)
        self.w = {name: dequantize(t) for name, t in tensors_by_name(reader).items()}
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

    def _rope(self, x, positions):
        """Rotate pairs (2i, 2i+1) of each head by position * theta^(-2i/d)."""
        d = x.shape[-1]
        freqs = self.config.rope_theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        angles = positions[:, None].astype(np.float64) * freqs[None, :]
        cos = np.cos(angles)[:, None, :].astype(np.float32)
        sin = np.sin(angles)[:, None, :].astype(np.float32)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def forward(self, tokens) -> np.ndarray:
        """Logits [len(tokens), vocab] for `tokens` appended after the cached positions."""
        c, w = self.config, self.w
        n, start = len(tokens), self.position
        positions = np.arange(start, start + n)
        x = w["token_embd.weight"][np.asarray(tokens)]
        for i in range(c.n_layers):
            p = f"blk.{i}."
            h = self._rms_norm(x, w[p + "attn_norm.weight"])
            q = (h @ w[p + "attn_q.weight"].T).reshape(n, c.n_heads, c.head_dim)
            k = (h @ w[p + "attn_k.weight"].T).reshape(n, c.n_kv_heads, c.head_dim)
            v = (h @ w[p + "attn_v.weight"].T).reshape(n, c.n_kv_heads, c.head_dim)
            q, k = self._rope(q, positions), self._rope(k, positions)
            self.k[i] = np.concatenate([self.k[i], k])
            self.v[i] = np.concatenate([self.v[i], v])
            attn = causal_attention(q, self.k[i], self.v[i], start).reshape(n, c.n_heads * c.head_dim)
            x = x + attn @ w[p + "attn_output.weight"].T
            h = self._rms_norm(x, w[p + "ffn_norm.weight"])
            gate = h @ w[p + "ffn_gate.weight"].T
            up = h @ w[p + "ffn_up.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
        x = self._rms_norm(x, w["output_norm.weight"])
        head = w.get("output.weight", w["token_embd.weight"])
        assert x.dtype == np.float32
        return x @ head.T

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
