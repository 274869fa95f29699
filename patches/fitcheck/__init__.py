"""Build-time proof that every attention launch fits the GPU's shared memory.

    python -m patches.fitcheck --device sm75|sm70|sm86|sm90 [--cc N --limit BYTES]
        [--model-config config.json [--tensor-parallel-size N] | --matrix all|gemma4] [--compare-unpatched]
        [--dtype float16|bfloat16|float32] [--write-table PATH] [--known-table PATH] [--full-compile] [--json]

Calls vLLM's real unified_attention() (decoder layers) and context_attention_fwd() (encoder /
bidirectional layers) with CPU tensors shaped like each layer (built-in Gemma 4 classes at tensor
parallel 1, 2 and 4, the attention-only families' head sizes and query-per-KV ratios and the encoder
layers of embedding models, BERT-family encoders and multimodal towers; or one rank of the model of
--model-config), records the kernel launches they make on the simulated device, cross-compiles each
with the installed Triton for that compute capability and compares the compiled kernel's shared
memory with the limit. A compile stops once Triton has allocated shared memory; the launch of largest
need of each kernel is compiled in full to confirm the number (--full-compile: every launch; compiler.py).

--write-table PATH first compiles the unpatched launcher's launches, and smaller tiles where they do not fit,
and merges them into the fit table the clamp reads, then records the patched launches.
--known-table PATH (the run-time check) takes each launch's need from a fit table written by the same
vLLM and Triton where it has the launch's key, and compiles only the others; a table of other versions
is ignored (the report says why).
Exit: 0 every launch fits, 1 a launch exceeds the limit (named on stderr), 2 bad input.
"""
from __future__ import annotations

import importlib

__all__ = ["DEVICES", "ConfigProblem", "FitOptions", "FitPlan", "UsageError", "plan", "resolve_device", "run"]


def __getattr__(name: str):
    """The package's names, imported on first use: the preflight's lookup imports only what the
    table answer needs (lookup.py), not the compile path (proof.py and what it imports)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = "family" if name == "ConfigProblem" else "proof"
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
