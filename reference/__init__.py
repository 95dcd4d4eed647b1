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

try:
    import torch  # noqa: F401
except ImportError:  # without torch the weight-map tables (archspec.reference.families) still import: `archspec
    pass  # check` reads a checkpoint's names by them
else:
    from archspec.reference.build import (
        InsufficientMemoryError,
        available_memory,
        build,
        init_weights,
        materialize,
        resolve_device,
        resolve_dtype,
    )
    from archspec.reference.convert import (
        load_bert,
        load_gpt2,
        load_llama,
        load_torch_transformer,
        load_transformers,
        transformers_config,
        transformers_model,
    )
    from archspec.reference.distributed import RanksReport, measure_ranks
    from archspec.reference.measure import count_by_component, count_total
    from archspec.reference.memory_measure import (
        ActivationReport,
        measure_activations,
        measure_kv_cache,
        measure_weights,
    )
    from archspec.reference.model import Transformer, cache_bytes, cache_length
    from archspec.reference.verify import (
        MemoryReport,
        Pair,
        RanksVerifyReport,
        VerifyReport,
        compare_tensors,
        verify,
        verify_memory,
        verify_ranks,
    )

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
