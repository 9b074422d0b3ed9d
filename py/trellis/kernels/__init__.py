"""The model compiler (build time): a GGUF's architecture and weights (gguf_model), the dispatch plans
(graph), TVM TensorIR kernels (kernels) lowered to WGSL (wgsl), GPU-ready weight packing (pack), and
the command that writes a model folder (build_model: `python3 build.py model`, `trellis build-model`).
Needs the `models` extra (TVM, gguf, numpy); never imported by code that runs in the browser."""
