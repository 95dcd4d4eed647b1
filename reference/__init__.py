"""archspec.reference: the real PyTorch model generated from a ModelSpec, and measuring helpers.

    from archspec.reference import build
    model = build(spec, device="meta")     # allocates nothing, GPT-3 175B included
    model = build(spec, device="cpu")      # real weights, GPT-2-style initialisation, seeded
    logits = model(tokens)                 # decoder-only / encoder-only: (B, T) -> (B, T, V)
    logits = model(src, tgt)               # encoder-decoder: (B, S), (B, T) -> (B, T, V)
    verify(spec).ok                        # analytic == instantiated: tensors, parameters, FLOPs
    measure_activations(spec, batch=2, seq_len=128, dtype="bf16", attention="flash")  # saved bytes
    measure_ranks(spec, ranks=2, zero=3)   # per-rank bytes of a sharded AdamW step (N processes)

This package needs torch (``pip install 'archspec-transformers[reference]'``).
"""

from __future__ import annotations

import sys
import types

# Each name is imported from its module on first use, so that the torch-free parts of this package (the
# families' tables and weight maps, archspec.reference.families, which `archspec check` reads) import
# without torch. `build` and `verify` are also the names of their modules: importing the module must not
# hide the function (as the eager `from ... import` of earlier versions made sure), hence __setattr__.
_WHERE = {
    "InsufficientMemoryError": "archspec.reference.build",
    "available_memory": "archspec.reference.build",
    "build": "archspec.reference.build",
    "init_weights": "archspec.reference.build",
    "materialize": "archspec.reference.build",
    "resolve_device": "archspec.reference.build",
    "resolve_dtype": "archspec.reference.build",
    "load_bert": "archspec.reference.convert",
    "load_gpt2": "archspec.reference.convert",
    "load_llama": "archspec.reference.convert",
    "load_torch_transformer": "archspec.reference.convert",
    "load_transformers": "archspec.reference.convert",
    "transformers_config": "archspec.reference.convert",
    "transformers_model": "archspec.reference.convert",
    "RanksReport": "archspec.reference.distributed",
    "measure_ranks": "archspec.reference.distributed",
    "count_by_component": "archspec.reference.measure",
    "count_total": "archspec.reference.measure",
    "ActivationReport": "archspec.reference.memory_measure",
    "measure_activations": "archspec.reference.memory_measure",
    "measure_kv_cache": "archspec.reference.memory_measure",
    "measure_weights": "archspec.reference.memory_measure",
    "Transformer": "archspec.reference.model",
    "cache_bytes": "archspec.reference.model",
    "cache_length": "archspec.reference.model",
    "MemoryReport": "archspec.reference.verify",
    "Pair": "archspec.reference.verify",
    "RanksVerifyReport": "archspec.reference.verify",
    "VerifyReport": "archspec.reference.verify",
    "compare_tensors": "archspec.reference.verify",
    "verify": "archspec.reference.verify",
    "verify_memory": "archspec.reference.verify",
    "verify_ranks": "archspec.reference.verify",
}


class _Package(types.ModuleType):
    def __getattr__(self, name: str):
        if name not in _WHERE:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)

    def __setattr__(self, name: str, value) -> None:
        if name in _WHERE and isinstance(value, types.ModuleType):
            return  # a submodule of the same name as a function: the function stays the attribute
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "ActivationReport",
    "RanksReport",
    "InsufficientMemoryError",
    "Pair",
    "VerifyReport",
    "compare_tensors",
    "verify",
    "verify_memory",
    "verify_ranks",
    "MemoryReport",
    "RanksVerifyReport",
    "Transformer",
    "available_memory",
    "build",
    "cache_bytes",
    "cache_length",
    "count_by_component",
    "count_total",
    "init_weights",
    "load_bert",
    "load_gpt2",
    "load_llama",
    "load_torch_transformer",
    "load_transformers",
    "materialize",
    "measure_activations",
    "measure_kv_cache",
    "measure_ranks",
    "measure_weights",
    "resolve_device",
    "resolve_dtype",
    "transformers_config",
    "transformers_model",
]
