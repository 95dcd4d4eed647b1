"""Loading weights from independent implementations into the reference model.

Each loader takes the reference model and the other implementation's ``state_dict()`` (so a
checkpoint file works as well as a live module), copies every tensor into place and checks that
nothing was left over on either side. Shapes are checked by ``copy_``.

- ``load_gpt2``: HuggingFace transformers ``GPT2LMHeadModel`` / ``GPT2Model`` (Conv1D weights are
  stored (in, out) and are transposed here);
- ``load_llama``: transformers ``LlamaForCausalLM``;
- ``load_bert``: transformers ``BertModel``;
- ``load_torch_transformer``: ``torch.nn.Transformer`` (post-norm, with a final norm per stack).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from archspec.reference.model import LAYERNORM_EPS, RMSNORM_EPS, Transformer
from archspec.spec import ModelSpec


def is_gpt2_shaped(s: ModelSpec) -> bool:
    return (s.kind == "decoder-only" and s.position == "learned" and s.norm == "layernorm" and s.norm_position == "pre"
            and s.final_norm and s.bias and not s.gated and s.n_kv_heads == s.n_heads
            and s.d_head * s.n_heads == s.d_model and s.d_value == s.d_head)  # fmt: skip


def is_llama_shaped(s: ModelSpec) -> bool:
    return (s.kind == "decoder-only" and s.position == "rotary" and s.norm == "rmsnorm" and s.activation == "swiglu"
            and s.norm_position == "pre" and s.final_norm and s.d_value == s.d_head)  # fmt: skip


def is_bert_shaped(s: ModelSpec) -> bool:
    return (s.kind == "encoder-only" and s.position == "learned" and s.norm == "layernorm" and s.norm_position == "post"
            and s.embedding_norm and s.type_vocab_size > 0 and not s.final_norm and s.bias and not s.gated
            and s.n_kv_heads == s.n_heads and s.d_head * s.n_heads == s.d_model and s.d_value == s.d_head)  # fmt: skip


def transformers_config(spec: ModelSpec):
    """The equivalent transformers config for a GPT-2-, LLaMA- or BERT-shaped spec (no dropout, the
    reference model's norm epsilons, exact GELU), so both sides build the same model from random weights."""
    import transformers

    if is_gpt2_shaped(spec):
        return transformers.GPT2Config(
            vocab_size=spec.vocab_size, n_positions=spec.max_positions, n_embd=spec.d_model,
            n_layer=spec.decoder_layers, n_head=spec.n_heads, n_inner=spec.d_ff, activation_function="gelu",
            layer_norm_epsilon=LAYERNORM_EPS, tie_word_embeddings=spec.tie_embeddings,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        )  # fmt: skip
    if is_llama_shaped(spec):
        return transformers.LlamaConfig(
            vocab_size=spec.vocab_size, hidden_size=spec.d_model, intermediate_size=spec.d_ff,
            num_hidden_layers=spec.decoder_layers, num_attention_heads=spec.n_heads,
            num_key_value_heads=spec.n_kv_heads, head_dim=spec.d_head, max_position_embeddings=spec.max_positions,
            rms_norm_eps=RMSNORM_EPS, attention_bias=spec.bias, mlp_bias=spec.bias,
            tie_word_embeddings=spec.tie_embeddings,
        )  # fmt: skip
    if is_bert_shaped(spec):
        return transformers.BertConfig(
            vocab_size=spec.vocab_size, hidden_size=spec.d_model, num_hidden_layers=spec.encoder_layers,
            num_attention_heads=spec.n_heads, intermediate_size=spec.d_ff,
            max_position_embeddings=spec.max_positions, type_vocab_size=spec.type_vocab_size,
            layer_norm_eps=LAYERNORM_EPS, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )  # fmt: skip
    raise ValueError(f"{spec.name}: no transformers equivalent (GPT-2, LLaMA or BERT shaped) for this spec")


def spec_from_gpt2_config(config, name: str = "gpt2-hf") -> ModelSpec:
    """The spec of a transformers GPT2Config (reads n_embd, n_layer, n_head, n_positions, n_inner)."""
    return ModelSpec(
        name=name,
        vocab_size=config.vocab_size,
        d_model=config.n_embd,
        decoder_layers=config.n_layer,
        n_heads=config.n_head,
        d_ff=config.n_inner or 4 * config.n_embd,
        max_positions=config.n_positions,
        tie_embeddings=bool(getattr(config, "tie_word_embeddings", True)),
    )


class _Copier:
    """Copies named source tensors into target tensors and reports what was not used."""

    def __init__(self, source: Mapping[str, torch.Tensor], what: str):
        self.source = {k: v for k, v in source.items() if not _is_buffer_key(k)}
        self.used: set[str] = set()
        self.what = what

    def get(self, key: str) -> torch.Tensor:
        if key not in self.source:
            raise KeyError(f"{self.what} state dict has no {key!r}")
        self.used.add(key)
        return self.source[key]

    @torch.no_grad()
    def copy(self, target: torch.Tensor, key: str | torch.Tensor, transpose: bool = False) -> None:
        src = self.get(key) if isinstance(key, str) else key
        src = src.t() if transpose else src
        if tuple(src.shape) != tuple(target.shape):
            raise ValueError(
                f"{self.what}: {key if isinstance(key, str) else 'tensor'} has shape "
                f"{tuple(src.shape)}, the reference model expects {tuple(target.shape)}"
            )
        target.copy_(src)

    def finish(self, optional: tuple[str, ...] = ()) -> None:
        left = sorted(k for k in set(self.source) - self.used if k not in optional)
        if left:
            raise ValueError(f"{self.what}: {len(left)} tensors were not loaded, e.g. {left[:3]}")


def _is_buffer_key(key: str) -> bool:
    return key.endswith((".attn.bias", ".attn.masked_bias", "position_ids", "rotary_emb.inv_freq"))


def _strip(sd: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Drop a leading `prefix` (e.g. 'transformer.') where every key has it."""
    keys = [k for k in sd if not k.startswith("lm_head.")]
    if keys and all(k.startswith(prefix) for k in keys):
        return {k.removeprefix(prefix): v for k, v in sd.items()}
    return dict(sd)


def _need(model: Transformer, ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"{what} weights do not fit this spec ({model.spec.name}: {model.spec.kind})")


def load_gpt2(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers GPT-2 state dict (GPT2LMHeadModel or GPT2Model) into `model`."""
    s = model.spec
    _need(
        model,
        s.kind == "decoder-only"
        and s.position == "learned"
        and s.norm == "layernorm"
        and s.norm_position == "pre"
        and s.final_norm
        and s.bias
        and not s.gated,
        "GPT-2",
    )
    c = _Copier(_strip(state_dict, "transformer."), "GPT-2")
    c.copy(model.embed.weight, "wte.weight")
    c.copy(model.decoder.position.weight, "wpe.weight")
    for i, layer in enumerate(model.decoder.layers):
        p = f"h.{i}."
        c.copy(layer.attention_norm.weight, p + "ln_1.weight")
        c.copy(layer.attention_norm.bias, p + "ln_1.bias")
        c.copy(layer.attention.qkv.weight, p + "attn.c_attn.weight", transpose=True)  # Conv1D: (in, out)
        c.copy(layer.attention.qkv.bias, p + "attn.c_attn.bias")
        c.copy(layer.attention.out.weight, p + "attn.c_proj.weight", transpose=True)
        c.copy(layer.attention.out.bias, p + "attn.c_proj.bias")
        c.copy(layer.mlp_norm.weight, p + "ln_2.weight")
        c.copy(layer.mlp_norm.bias, p + "ln_2.bias")
        c.copy(layer.mlp.up.weight, p + "mlp.c_fc.weight", transpose=True)
        c.copy(layer.mlp.up.bias, p + "mlp.c_fc.bias")
        c.copy(layer.mlp.down.weight, p + "mlp.c_proj.weight", transpose=True)
        c.copy(layer.mlp.down.bias, p + "mlp.c_proj.bias")
    c.copy(model.decoder.final_norm.weight, "ln_f.weight")
    c.copy(model.decoder.final_norm.bias, "ln_f.bias")
    if not s.tie_embeddings:
        c.copy(model.head.weight, "lm_head.weight")
    c.finish(optional=("lm_head.weight",))  # tied: the same tensor as wte
    return model


def load_llama(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers LlamaForCausalLM state dict into `model` (RMSNorm, SwiGLU, rotary, GQA)."""
    s = model.spec
    _need(
        model,
        s.kind == "decoder-only"
        and s.position == "rotary"
        and s.norm == "rmsnorm"
        and s.activation == "swiglu"
        and s.norm_position == "pre",
        "LLaMA",
    )
    c = _Copier(_strip(state_dict, "model."), "LLaMA")
    c.copy(model.embed.weight, "embed_tokens.weight")
    for i, layer in enumerate(model.decoder.layers):
        p = f"layers.{i}."
        c.copy(layer.attention_norm.weight, p + "input_layernorm.weight")
        qkv = torch.cat([c.get(p + f"self_attn.{n}_proj.weight") for n in "qkv"], dim=0)
        c.copy(layer.attention.qkv.weight, qkv)
        c.copy(layer.attention.out.weight, p + "self_attn.o_proj.weight")
        if s.bias:
            c.copy(layer.attention.qkv.bias, torch.cat([c.get(p + f"self_attn.{n}_proj.bias") for n in "qkv"]))
            c.copy(layer.attention.out.bias, p + "self_attn.o_proj.bias")
        c.copy(layer.mlp_norm.weight, p + "post_attention_layernorm.weight")
        for ours, theirs in ((layer.mlp.gate, "gate_proj"), (layer.mlp.up, "up_proj"), (layer.mlp.down, "down_proj")):
            c.copy(ours.weight, p + f"mlp.{theirs}.weight")
            if s.bias:
                c.copy(ours.bias, p + f"mlp.{theirs}.bias")
    c.copy(model.decoder.final_norm.weight, "norm.weight")
    if not s.tie_embeddings:
        c.copy(model.head.weight, "lm_head.weight")
    c.finish(optional=("lm_head.weight",))
    return model


def load_bert(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers BertModel state dict into `model` (encoder-only, post-norm, pooler)."""
    s = model.spec
    _need(
        model,
        s.kind == "encoder-only"
        and s.position == "learned"
        and s.norm == "layernorm"
        and s.norm_position == "post"
        and s.embedding_norm
        and s.type_vocab_size > 0,
        "BERT",
    )
    c = _Copier(_strip(state_dict, "bert."), "BERT")
    enc = model.encoder
    c.copy(model.embed.weight, "embeddings.word_embeddings.weight")
    c.copy(enc.position.weight, "embeddings.position_embeddings.weight")
    c.copy(model.token_type.weight, "embeddings.token_type_embeddings.weight")
    c.copy(enc.embedding_norm.weight, "embeddings.LayerNorm.weight")
    c.copy(enc.embedding_norm.bias, "embeddings.LayerNorm.bias")
    for i, layer in enumerate(enc.layers):
        p = f"encoder.layer.{i}."
        a = p + "attention.self."
        c.copy(layer.attention.qkv.weight, torch.cat([c.get(a + f"{n}.weight") for n in ("query", "key", "value")]))
        c.copy(layer.attention.qkv.bias, torch.cat([c.get(a + f"{n}.bias") for n in ("query", "key", "value")]))
        c.copy(layer.attention.out.weight, p + "attention.output.dense.weight")
        c.copy(layer.attention.out.bias, p + "attention.output.dense.bias")
        c.copy(layer.attention_norm.weight, p + "attention.output.LayerNorm.weight")
        c.copy(layer.attention_norm.bias, p + "attention.output.LayerNorm.bias")
        c.copy(layer.mlp.up.weight, p + "intermediate.dense.weight")
        c.copy(layer.mlp.up.bias, p + "intermediate.dense.bias")
        c.copy(layer.mlp.down.weight, p + "output.dense.weight")
        c.copy(layer.mlp.down.bias, p + "output.dense.bias")
        c.copy(layer.mlp_norm.weight, p + "output.LayerNorm.weight")
        c.copy(layer.mlp_norm.bias, p + "output.LayerNorm.bias")
    if model.pooler is not None:
        c.copy(model.pooler.dense.weight, "pooler.dense.weight")
        c.copy(model.pooler.dense.bias, "pooler.dense.bias")
    c.finish()
    return model


def load_torch_transformer(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a torch.nn.Transformer state dict into the stacks of an encoder-decoder `model`.

    nn.Transformer has no embeddings or output head: those keep their own weights. Its stacks end
    in a norm each, so the spec needs final_norm=true; post-norm needs norm_first=False.
    """
    s = model.spec
    _need(
        model,
        s.kind == "encoder-decoder"
        and s.norm == "layernorm"
        and s.bias
        and not s.gated
        and s.n_kv_heads == s.n_heads
        and s.d_head * s.n_heads == s.d_model == s.d_value * s.n_heads
        and s.final_norm,
        "torch.nn.Transformer",
    )
    c = _Copier(state_dict, "torch.nn.Transformer")

    def norm(target, key):
        c.copy(target.weight, key + ".weight")
        c.copy(target.bias, key + ".bias")

    for i, layer in enumerate(model.encoder.layers):
        p = f"encoder.layers.{i}."
        c.copy(layer.attention.qkv.weight, p + "self_attn.in_proj_weight")
        c.copy(layer.attention.qkv.bias, p + "self_attn.in_proj_bias")
        c.copy(layer.attention.out.weight, p + "self_attn.out_proj.weight")
        c.copy(layer.attention.out.bias, p + "self_attn.out_proj.bias")
        c.copy(layer.mlp.up.weight, p + "linear1.weight")
        c.copy(layer.mlp.up.bias, p + "linear1.bias")
        c.copy(layer.mlp.down.weight, p + "linear2.weight")
        c.copy(layer.mlp.down.bias, p + "linear2.bias")
        norm(layer.attention_norm, p + "norm1")
        norm(layer.mlp_norm, p + "norm2")
    d = s.d_model
    for i, layer in enumerate(model.decoder.layers):
        p = f"decoder.layers.{i}."
        c.copy(layer.attention.qkv.weight, p + "self_attn.in_proj_weight")
        c.copy(layer.attention.qkv.bias, p + "self_attn.in_proj_bias")
        c.copy(layer.attention.out.weight, p + "self_attn.out_proj.weight")
        c.copy(layer.attention.out.bias, p + "self_attn.out_proj.bias")
        w, b = c.get(p + "multihead_attn.in_proj_weight"), c.get(p + "multihead_attn.in_proj_bias")
        c.copy(layer.cross_attention.q.weight, w[:d])
        c.copy(layer.cross_attention.q.bias, b[:d])
        c.copy(layer.cross_attention.kv.weight, w[d:])
        c.copy(layer.cross_attention.kv.bias, b[d:])
        c.copy(layer.cross_attention.out.weight, p + "multihead_attn.out_proj.weight")
        c.copy(layer.cross_attention.out.bias, p + "multihead_attn.out_proj.bias")
        c.copy(layer.mlp.up.weight, p + "linear1.weight")
        c.copy(layer.mlp.up.bias, p + "linear1.bias")
        c.copy(layer.mlp.down.weight, p + "linear2.weight")
        c.copy(layer.mlp.down.bias, p + "linear2.bias")
        norm(layer.attention_norm, p + "norm1")
        norm(layer.cross_attention_norm, p + "norm2")
        norm(layer.mlp_norm, p + "norm3")
    norm(model.encoder.final_norm, "encoder.norm")
    norm(model.decoder.final_norm, "decoder.norm")
    c.finish()
    return model
