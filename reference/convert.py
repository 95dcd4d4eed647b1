"""Loading weights from independent implementations into the reference model, and their configs.

Each loader takes the reference model and the other implementation's ``state_dict()`` (so a
checkpoint file works as well as a live module) and fills the model by its family's weight map, a
table (archspec.reference.weights; the tables live in archspec.reference.families), checking that
every source tensor was used and every parameter written. Shapes are checked on the way.

- ``load_transformers(model, state_dict, family=None)``: any entry of ``CHECKPOINTS`` (GPT-2, LLaMA,
  BERT, Mixtral, Qwen2, Gemma 2, GPT-NeoX, OPT, T5, ...), by default the one that represents the spec;
- ``load_gpt2``, ``load_llama``, ``load_bert``: the same for one family each;
- ``load_torch_transformer``: ``torch.nn.Transformer`` (post-norm, with a final norm per stack).

``transformers_config(spec)`` builds the equivalent transformers config (and ``transformers_model``
the model) of a spec a family represents, refusing by field name what it cannot.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from archspec.reference.families import CHECKPOINTS, Checkpoint, checkpoint
from archspec.reference.model import Transformer
from archspec.reference.weights import WeightMap, load_weights, row
from archspec.spec.model import ModelSpec

__all__ = ["CHECKPOINTS", "family_of", "load_bert", "load_gpt2", "load_llama", "load_torch_transformer",
           "load_transformers", "transformers_config", "transformers_model",
           "unsupported"]  # fmt: skip


def unsupported(spec: ModelSpec, name: str) -> list[str]:
    """Why the family `name` cannot represent `spec`: one phrase per field that differs (empty: it can)."""
    return checkpoint(name).unsupported(spec)


def family_of(spec: ModelSpec, name: str | None = None) -> Checkpoint:
    """The family `name` (refusing, by field, a spec it cannot represent) or, without a name, the first
    family that represents `spec` (refusing a spec none does, naming what differs in the closest two)."""
    if name is not None:
        f = checkpoint(name)
        reasons = f.unsupported(spec)
        if reasons:
            raise ValueError(f"{spec.name}: the {f.name} family cannot represent this spec: {'; '.join(reasons)}")
        return f
    ranked = sorted(CHECKPOINTS.values(), key=lambda f: len(f.unsupported(spec)))  # stable: registry order on ties
    if not ranked[0].unsupported(spec):
        return ranked[0]
    closest = "; then ".join(f"{f.name}, which differs in {'; '.join(f.unsupported(spec))}" for f in ranked[:2])
    raise ValueError(f"{spec.name}: no transformers equivalent ({', '.join(CHECKPOINTS)}); closest is {closest}")


def transformers_config(spec: ModelSpec, family: str | None = None):
    """The transformers config of the family that represents `spec` (or of `family`, by name or
    model_type), with no dropout and the spec's norm epsilon and activation (exact GELU), so both
    sides build the same model. A spec the family cannot represent is refused, naming the fields."""
    import transformers

    f = family_of(spec, family)
    config = transformers.CONFIG_MAPPING[f.model_type](**f.config_values(spec))
    for key, get in f.after.items():
        setattr(config, key, get(spec))
    return config


def transformers_model(spec: ModelSpec, family: str | None = None, attn_implementation: str = "eager"):
    """The transformers model of `spec` (its family's class, from transformers_config), randomly
    initialised, in eval mode; eager attention by default: explicit products, as the reference computes."""
    import transformers

    f = family_of(spec, family)
    config = transformers_config(spec, f.name)
    config._attn_implementation = attn_implementation
    model = getattr(transformers, f.model_class)(config)
    if f.untie and not spec.tie_embeddings:  # a head of its own, as a checkpoint with one gets on load
        head = model.get_submodule(f.untie)
        with torch.no_grad():
            head.weight = torch.nn.Parameter(torch.randn_like(head.weight) * spec.d_model**-0.5)
    return model.eval()


def load_transformers(model: Transformer, state_dict: Mapping[str, torch.Tensor], family: str | None = None):
    """Load a transformers state dict of `family` (default: the family that represents the model's
    spec) into `model`, by the family's weight map; every source tensor used, every parameter written."""
    f = family_of(model.spec, family)
    return load_weights(model, state_dict, f.weights)


def load_gpt2(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers GPT-2 state dict (GPT2LMHeadModel or GPT2Model) into `model`.
    GPT-2's Conv1D layers store weights (in, out): they are transposed."""
    return load_transformers(model, state_dict, "GPT-2")


def load_llama(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers LlamaForCausalLM state dict into `model` (RMSNorm, SwiGLU, rotary, GQA)."""
    return load_transformers(model, state_dict, "LLaMA")


def load_bert(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers BertModel state dict into `model` (encoder-only, post-norm, pooler)."""
    return load_transformers(model, state_dict, "BERT")


def load_torch_transformer(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a torch.nn.Transformer state dict into the stacks of an encoder-decoder `model`.

    nn.Transformer has no embeddings or output head: those keep their own weights. Its stacks end
    in a norm each, so the spec needs final_norm=true; post-norm needs norm_first=False.
    """
    s = model.spec
    reasons = [why for ok, why in (
        (s.kind == "encoder-decoder", f"kind={s.kind!r} (needs 'encoder-decoder')"),
        (s.norm == "layernorm", f"norm={s.norm!r} (needs 'layernorm')"),
        (s.bias, "bias=false (needs true)"),
        (s.activation in ("relu", "gelu"), f"activation={s.activation!r} (needs 'relu' or 'gelu')"),
        (s.n_kv_heads == s.n_heads, f"n_kv_heads={s.n_kv_heads} (needs n_heads)"),
        (s.d_head * s.n_heads == s.d_model == s.d_value * s.n_heads, "d_head, d_value (need n_heads * d = d_model)"),
        (s.final_norm, "final_norm=false (nn.Transformer ends each stack in a norm)"),
        (not s.embedding_norm, "embedding_norm=true (nn.Transformer has none)"),
    ) if not ok]  # fmt: skip
    if reasons:
        raise ValueError(f"{s.name}: torch.nn.Transformer cannot represent this spec: {'; '.join(reasons)}")
    return load_weights(model, state_dict, TORCH_TRANSFORMER_WEIGHTS, keep=("embed", "target_embed", "token_type",
                        "encoder.position", "decoder.position", "head", "pooler"))  # fmt: skip


def _torch_block(stack: str) -> tuple:
    at = stack + ".layers.{}."  # the same paths on both sides
    return (
        row(at + "self_attn.in_proj_{w}", at + "attention.qkv.{w}"),
        row(at + "self_attn.out_proj.{w}", at + "attention.out.{w}"),
        row(at + "linear1.{w}", at + "mlp.up.{w}"),
        row(at + "linear2.{w}", at + "mlp.down.{w}"),
        row(at + "norm1.{w}", at + "attention_norm.{w}"),
        row(at + ("norm3.{w}" if stack == "decoder" else "norm2.{w}"), at + "mlp_norm.{w}"),
        row(stack + ".norm.{w}", stack + ".final_norm.{w}"),
    )


# nn.Transformer has no embeddings, positions or output head: those keep their own weights
TORCH_TRANSFORMER_WEIGHTS = WeightMap("torch.nn.Transformer", _torch_block("encoder") + _torch_block("decoder") + (
    row("decoder.layers.{}.norm2.{w}", "decoder.layers.{}.cross_attention_norm.{w}"),
    # in_proj stacks q, k and v: q first, then k and v, the reference's kv
    row("decoder.layers.{}.multihead_attn.in_proj_{w}",
        ("decoder.layers.{}.cross_attention.q.{w}", "decoder.layers.{}.cross_attention.kv.{w}"), "split"),
    row("decoder.layers.{}.multihead_attn.out_proj.{w}", "decoder.layers.{}.cross_attention.out.{w}"),
))  # fmt: skip
