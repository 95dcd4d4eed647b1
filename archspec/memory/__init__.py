"""Memory for training and inference: weights, gradients, optimizer states, activations, KV cache.

One module per concept, each a sum over the model's description (archspec.describe.blocks):

- ``storage``: the storage formats and computation dtypes, bits per value with block scales;
- ``parallel``: where the weights sit — pipeline stages, tensor / expert splits, ZeRO shards,
  the layouts a number of devices allows;
- ``cache``: the KV cache and recurrent states;
- ``saved``: what autograd keeps for backward, as rule sets that turn each part of the description into
  ``Saved`` records (``torch-cpu``: what torch's CPU kernels keep, one module per part kind);
- ``activations``: the bytes autograd saves for backward, summed from a rule set's records;
- ``lora``: LoRA adapters' targets and parameters;
- ``training``: ``estimate_memory``, one device's training and inference bytes (its
  ``MemoryEstimate``), the largest micro-batch that fits;
- ``roles``: storage by role (``--weights`` maps and released layouts);
- ``runtime``: the serving engine's reserve on each device; ``paging``: the KV cache in the engine's
  pages; ``serving``: what each device of a serving layout holds and the largest batch.

Every public name is importable from ``archspec.memory``; docs/architecture.md shows where the
package sits in the flow.
"""

# Every public name and the module that holds it: imported on first use (PEP 562), so that a command
# that needs the KV cache's bytes does not load the training planner, the LoRA targets and the rules of
# what autograd keeps.
_HOME = {
    "ATTENTION": "archspec.core.vocab",
    "RECOMPUTE": "archspec.core.vocab",
    "ZERO_STAGES": "archspec.core.vocab",
    "activation_bytes_per_layer": "archspec.memory.activations",
    "attention_mode": "archspec.memory.activations",
    "korthikanti_bytes_per_layer": "archspec.memory.activations",
    "saved_bytes": "archspec.memory.activations",
    "KV_DTYPES": "archspec.memory.cache",
    "cached_bytes": "archspec.memory.cache",
    "default_kv_dtype": "archspec.memory.cache",
    "kv_cache_bytes": "archspec.memory.cache",
    "kv_cache_bytes_per_token": "archspec.memory.cache",
    "kv_cache_dtype": "archspec.memory.cache",
    "kv_dtype_asked": "archspec.memory.cache",
    "kv_stage_bytes": "archspec.memory.cache",
    "LORA_GROUPS": "archspec.memory.lora",
    "LORA_PROJECTIONS": "archspec.memory.lora",
    "lora_params": "archspec.memory.lora",
    "lora_targets_of": "archspec.memory.lora",
    "COLUMN_PARALLEL": "archspec.memory.parallel",
    "ParallelLayout": "archspec.memory.parallel",
    "ROW_PARALLEL": "archspec.memory.parallel",
    "Slot": "archspec.memory.parallel",
    "check_split": "archspec.memory.parallel",
    "module_name": "archspec.memory.parallel",
    "more_bits_layers": "archspec.memory.parallel",
    "parallel_layout": "archspec.memory.parallel",
    "rank_elements": "archspec.memory.parallel",
    "slot_bytes": "archspec.memory.parallel",
    "distinct_stages": "archspec.memory.parallel",
    "stage_slots": "archspec.memory.parallel",
    "stored_weights_bytes": "archspec.memory.parallel",
    "weights_bytes": "archspec.memory.parallel",
    "DTYPE_BYTES": "archspec.memory.storage",
    "STORAGE": "archspec.memory.storage",
    "Storage": "archspec.memory.storage",
    "canonical_dtype": "archspec.memory.storage",
    "canonical_format": "archspec.memory.storage",
    "dtype_bytes": "archspec.memory.storage",
    "nbytes": "archspec.memory.storage",
    "use_more_bits": "archspec.memory.storage",
    "MemoryEstimate": "archspec.memory.training",
    "OPTIMIZERS": "archspec.memory.training",
    "estimate_memory": "archspec.memory.training",
    "fits": "archspec.memory.training",
    "layer_kinds_memory": "archspec.memory.training",
    "max_micro_batch": "archspec.memory.training",
    "training_bytes_per_param": "archspec.memory.training",
}  # fmt: skip

__all__ = [
    "ATTENTION",
    "COLUMN_PARALLEL",
    "DTYPE_BYTES",
    "LORA_GROUPS",
    "LORA_PROJECTIONS",
    "OPTIMIZERS",
    "RECOMPUTE",
    "ROW_PARALLEL",
    "STORAGE",
    "ZERO_STAGES",
    "MemoryEstimate",
    "ParallelLayout",
    "Slot",
    "Storage",
    "activation_bytes_per_layer",
    "attention_mode",
    "cached_bytes",
    "canonical_dtype",
    "canonical_format",
    "check_split",
    "dtype_bytes",
    "estimate_memory",
    "fits",
    "korthikanti_bytes_per_layer",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "default_kv_dtype",
    "kv_cache_dtype",
    "kv_dtype_asked",
    "KV_DTYPES",
    "kv_stage_bytes",
    "layer_kinds_memory",
    "lora_params",
    "lora_targets_of",
    "max_micro_batch",
    "module_name",
    "more_bits_layers",
    "nbytes",
    "parallel_layout",
    "rank_elements",
    "saved_bytes",
    "slot_bytes",
    "distinct_stages",
    "stage_slots",
    "stored_weights_bytes",
    "training_bytes_per_param",
    "use_more_bits",
    "weights_bytes",
]


def __getattr__(name: str):
    import importlib

    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    if not name.startswith("_"):  # a module of the package: archspec.memory.cache
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
