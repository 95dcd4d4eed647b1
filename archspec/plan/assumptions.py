"""What an inference estimate assumes (archspec.plan.inference): the roofline's bounds, the formats, the
routing, the layout and its communication, and the engine's reserve beside the largest batch, as the
lines the estimate travels with."""

from __future__ import annotations

from archspec.plan.hardware import MATH_DTYPES
from archspec.plan.routing import touched
from archspec.spec.layers import moe_specs


def assumptions(spec, acc, key, x_key, kv_key, layout, batch, context, peak, mfu, mbu, res,
                latency) -> tuple[str, ...]:  # fmt: skip
    """The assumptions an inference estimate travels with (InferenceEstimate.assumptions); `latency`: the
    collectives' latency note (archspec.plan.collectives)."""
    from archspec.memory.runtime import engine as engine_of
    from archspec.memory.serving import reserve_note
    from archspec.render.text import human_bytes

    tp, ep, pp = layout.tensor_parallel, layout.expert_parallel, layout.pipeline_parallel
    out = [
        "prefill compute-bound: exact forward matmul FLOPs (full attention score matrix; a mixture of experts "
        f"its top-k experts: the active FLOPs) / ({acc.title} dense peak {peak / 1e12:g} TFLOP/s x mfu {mfu:g}"
        + (f" x {tp * ep} devices of a stage" if tp * ep > 1 else "") + ")"
        + ("; quantised and 8-bit weights computed at the 16-bit peak" if key not in MATH_DTYPES else ""),
        f"decode memory-bound: (weights read + mean KV cache read) / (bandwidth {acc.bandwidth_gbs:g} GB/s x mbu "
        f"{mbu:g}) per step{', stages one after another' if pp > 1 else ''}; kernel launches and compute not "
        "modelled",
        f"weights in {key}" + (f", routed experts in {x_key}" if x_key else "") + f", KV cache in {kv_key}",
    ]  # fmt: skip
    for m in (k.mlp for k in moe_specs(spec)):
        out.append(
            f"routing uniform and independent: a decode step of {batch} token{'s' if batch > 1 else ''} reads "
            "E(1 - (1 - k/E)^B) = "
            f"{float(m.experts * touched(m, batch)):.3g} of {m.experts} routed experts per MoE layer (top-{m.top_k}); "
            "shared experts, routers, dense layers, attention, embeddings and head read every step"
        )
    if layout.devices > 1:
        out.append(
            f"layout tp {tp} x ep {ep} x pp {pp} = {layout.devices} devices: Megatron-LM column/row splits"
            + (f"; experts spread over {ep} devices that serve {-(-batch // ep)} sequences each (data-parallel "
               "attention)" if ep > 1 else "")
            + (f"; {pp} stages of {-(-spec.n_layers // pp)} layers, one batch in flight" if pp > 1 else "")
            + f"; communication over {acc.interconnect_gbs:g} GB/s per direction ({acc.interconnect_source}): "
            "ring all-reduce after every sublayer, MoE all-to-all dispatch and combine, stage hand-overs, bf16 "
            f"activations, not overlapped with compute; {latency}"
        )  # fmt: skip
    page = engine_of(res.engine).page_source
    return (*out,
            f"max_batch: sequences of {context:,} tokens whose KV cache ({page}) fits beside the weights in "
            + reserve_note(res, human_bytes) + (" per device" if layout.devices > 1 else ""),
            "tokens_per_second: batch x gen_len generated tokens over prefill + gen_len decode steps")  # fmt: skip
