"""GPT-2 and its descendants' checkpoints: GPT-2, GPT-NeoX and OPT (their adapters: archspec.hf.gpt)."""

from __future__ import annotations

from archspec.reference.families.engine import (
    ACT,
    BASE,
    DEC,
    NON_GATED,
    ROTARY,
    Checkpoint,
    d_value_is_d_head,
    default_scale,
    embedding_is_d_model,
    heads_span_d_model,
    mha,
    one_attention_bias,
    one_bias,
)
from archspec.sources.weightmap import WeightMap, each, row
from archspec.spec.model import ModelSpec


def final_norm_with_pre(s: ModelSpec) -> str | None:
    ok = s.final_norm == (s.norm_position == "pre")
    return None if ok else f"final_norm={s.final_norm} (needs a final norm with pre-norm, none with post-norm)"


GPT2_WEIGHTS = WeightMap("GPT-2", strip=("transformer.",), ignore=(r"h\.\d+\.attn\.(masked_)?bias",), rows=(
    row("wte.weight", "embed.weight"),
    row("wpe.weight", "decoder.position.weight"),
    row("h.{}.ln_1.{w}", DEC + "attention_norm.{w}"),
    row("h.{}.attn.c_attn.{w}", DEC + "attention.qkv.{w}", "transpose"),  # Conv1D: (in, out)
    row("h.{}.attn.c_proj.{w}", DEC + "attention.out.{w}", "transpose"),
    row("h.{}.ln_2.{w}", DEC + "mlp_norm.{w}"),
    row("h.{}.mlp.c_fc.{w}", DEC + "mlp.up.{w}", "transpose"),
    row("h.{}.mlp.c_proj.{w}", DEC + "mlp.down.{w}", "transpose"),
    row("ln_f.{w}", "decoder.final_norm.{w}"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


NEOX_ROWS = (
    row("embed_in.weight", "embed.weight"),
    row("layers.{}.input_layernorm.{w}", DEC + "attention_norm.{w}"),
    row("layers.{}.attention.query_key_value.{w}", DEC + "attention.qkv.{w}", "heads"),  # per head: q, k, v
    row("layers.{}.attention.dense.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.post_attention_layernorm.{w}", DEC + "mlp_norm.{w}"),
    row("layers.{}.mlp.dense_h_to_4h.{w}", DEC + "mlp.up.{w}"),
    row("layers.{}.mlp.dense_4h_to_h.{w}", DEC + "mlp.down.{w}"),
    row("final_layer_norm.{w}", "decoder.final_norm.{w}"),
)
GPT_NEOX_WEIGHTS = (
    WeightMap("GPT-NeoX", NEOX_ROWS + (row("lm_head.weight", "head.weight"),), strip=("gpt_neox.",)),
    # transformers 4 and the Pythia checkpoints: the head is embed_out; masks and frequencies are buffers
    WeightMap("GPT-NeoX (embed_out checkpoint)", NEOX_ROWS + (row("embed_out.weight", "head.weight"),),
              strip=("gpt_neox.",),
              ignore=(r"layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)",)),
)  # fmt: skip

OPT_WEIGHTS = WeightMap("OPT", strip=("model.decoder.", "decoder."), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row("embed_positions.weight", "decoder.position.weight"),  # 2 rows in front: position p reads row p + 2
    row("layers.{}.self_attn_layer_norm.{w}", DEC + "attention_norm.{w}"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.out_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.final_layer_norm.{w}", DEC + "mlp_norm.{w}"),
    row("layers.{}.fc1.{w}", DEC + "mlp.up.{w}"),
    row("layers.{}.fc2.{w}", DEC + "mlp.down.{w}"),
    row("final_layer_norm.{w}", "decoder.final_norm.{w}"),
    row("project_in.weight", "embed_proj.weight"),  # word_embed_proj_dim -> hidden_size (OPT-350M)
    row("project_out.weight", "project_out.weight"),  # hidden_size -> word_embed_proj_dim
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


def opt_embedding(s: ModelSpec) -> str | None:
    """OPT's embeddings: d_model wide, or word_embed_proj_dim wide with project_in and project_out (no biases)
    and the positions hidden_size wide."""
    e = s.embedding
    if e.d_embed in (None, s.d_model):
        return None
    if e.projection_bias or not e.project_out or e.position_width != "d_model":
        return (f"embedding.d_embed={e.d_embed} with projection_bias={e.projection_bias}, project_out={e.project_out}, "
                f"position_width={e.position_width!r} (OPT's: false, true, 'd_model')")  # fmt: skip
    return None


# fmt: off
CHECKPOINTS = [
    Checkpoint(
        "GPT-2", "gpt2",
        {**BASE, "activation": NON_GATED},
        (mha, heads_span_d_model, d_value_is_d_head, embedding_is_d_model),
        {
            "n_inner": lambda s: s.d_ff,
            "activation_function": lambda s: ACT[s.activation],  # GPT-2's own default is gelu_new (tanh)
            "tie_word_embeddings": lambda s: s.tie_embeddings,
            "resid_pdrop": lambda s: 0.0, "embd_pdrop": lambda s: 0.0, "attn_pdrop": lambda s: 0.0,
        },
        (GPT2_WEIGHTS,),
    ),
    Checkpoint(
        "GPT-NeoX", "gpt_neox",
        {**BASE, **ROTARY, "position.fraction": None, "block.kind": ("sequential", "parallel"),
         "block.shared_norm": (False,), "bias.mlp": (True,), "activation": NON_GATED},
        (one_attention_bias, mha, heads_span_d_model, d_value_is_d_head, default_scale),
        {
            "hidden_act": lambda s: ACT[s.activation],
            "rotary_pct": lambda s: s.position.fraction,  # transformers 5 folds both into rope_parameters
            "rotary_emb_base": lambda s: s.position.base,
            "use_parallel_residual": lambda s: s.block.kind == "parallel",
            "attention_bias": lambda s: s.biases.qkv,
            "tie_word_embeddings": lambda s: s.tie_embeddings,
            "hidden_dropout": lambda s: 0.0, "attention_dropout": lambda s: 0.0,
        },
        GPT_NEOX_WEIGHTS,
    ),
    Checkpoint(
        "OPT", "opt",
        {**BASE, "norm_position": ("pre", "post"), "final_norm": None, "activation": NON_GATED},
        (final_norm_with_pre, one_bias, mha, heads_span_d_model, d_value_is_d_head, default_scale, opt_embedding),
        {
            "word_embed_proj_dim": lambda s: s.d_embed,
            "do_layer_norm_before": lambda s: s.norm_position == "pre",
            "activation_function": lambda s: ACT[s.activation],
            "tie_word_embeddings": lambda s: s.tie_embeddings,
            "dropout": lambda s: 0.0, "attention_dropout": lambda s: 0.0, "layerdrop": lambda s: 0.0,
        },
        (OPT_WEIGHTS,),
    ),
]
# fmt: on
