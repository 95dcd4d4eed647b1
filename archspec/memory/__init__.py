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

from archspec.core.vocab import (  # the vocabulary's, re-exported for the planners' callers
    ATTENTION,
    RECOMPUTE,
    ZERO_STAGES,
)
from archspec.memory.activations import (
    activation_bytes_per_layer,
    attention_mode,
    korthikanti_bytes_per_layer,
    saved_bytes,
)
from archspec.memory.cache import (
    KV_DTYPES,
    cached_bytes,
    default_kv_dtype,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    kv_cache_dtype,
    kv_dtype_asked,
    kv_stage_bytes,
)
from archspec.memory.lora import LORA_GROUPS, LORA_PROJECTIONS, lora_params, lora_targets_of
from archspec.memory.parallel import (
    COLUMN_PARALLEL,
    ROW_PARALLEL,
    ParallelLayout,
    Slot,
    check_split,
    module_name,
    more_bits_layers,
    parallel_layout,
    rank_elements,
    slot_bytes,
    stage_slots,
    stored_weights_bytes,
    weights_bytes,
)
from archspec.memory.storage import (
    DTYPE_BYTES,
    STORAGE,
    Storage,
    canonical_dtype,
    canonical_format,
    dtype_bytes,
    nbytes,
    use_more_bits,
)
from archspec.memory.training import (
    OPTIMIZERS,
    MemoryEstimate,
    estimate_memory,
    fits,
    layer_kinds_memory,
    max_micro_batch,
    training_bytes_per_param,
)

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
    "stage_slots",
    "stored_weights_bytes",
    "training_bytes_per_param",
    "use_more_bits",
    "weights_bytes",
]
