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

from archspec.reference.model import Transformer
from archspec.spec import ModelSpec

# What each transformers family can represent, as data: spec fields with the one value (or the
# values) the family's config can express. A spec that differs anywhere is refused by name, so a
# config never silently builds another model.
_ACT = {"relu": "relu", "gelu": "gelu", "silu": "silu"}  # transformers' ACT2FN names (exact GELU)
_GATED_ACT = {"swiglu": "silu", "geglu": "gelu"}  # LLaMA's act_fn(gate(x)) * up(x)
_PLAIN = {
    "type_vocab_size": (0,),
    "embedding_norm": (False,),
    "pooler": (False,),
    "embedding_scale": ("none",),
    "block": ("sequential",),
    "attention": ("standard",),
    "mlp": ("dense",),
    "share_layers": (False,),
}
FAMILIES: dict[str, dict[str, tuple]] = {
    "GPT-2": {"kind": ("decoder-only",), "position": ("learned",), "norm": ("layernorm",),
              "norm_position": ("pre",), "final_norm": (True,), "bias": (True,), "activation": tuple(_ACT),
              "head": ("lm",), **_PLAIN},
    "LLaMA": {"kind": ("decoder-only",), "position": ("rotary",), "norm": ("rmsnorm",), "norm_position": ("pre",),
              "final_norm": (True,), "activation": tuple(_GATED_ACT), "head": ("lm",), **_PLAIN},
    "BERT": {"kind": ("encoder-only",), "position": ("learned",), "norm": ("layernorm",), "norm_position": ("post",),
             "final_norm": (False,), "embedding_norm": (True,), "pooler": (True,), "bias": (True,),
             "activation": tuple(_ACT), "head": ("none",), "embedding_scale": ("none",), "block": ("sequential",),
             "attention": ("standard",), "mlp": ("dense",), "share_layers": (False,)},
}  # fmt: skip


def _value(spec: ModelSpec, field: str):
    """A field as the families compare it: a sub-table by its kind (position) or as written (the
    others: a member with any non-default field is a table, which no family's value equals)."""
    if field == "position":
        return spec.position.kind
    if field not in type(spec).model_fields:  # a derived view such as kind
        return getattr(spec, field)
    return spec.model_dump(include={field})[field]


def unsupported(spec: ModelSpec, family: str) -> list[str]:
    """Why `family` cannot represent `spec`: one phrase per field that differs (empty: it can)."""
    out = [f"{field}={_value(spec, field)!r} (needs {' or '.join(repr(v) for v in allowed)})"
           for field, allowed in FAMILIES[family].items() if _value(spec, field) not in allowed]  # fmt: skip
    if family in ("GPT-2", "BERT"):
        if spec.n_kv_heads != spec.n_heads:
            out.append(f"n_kv_heads={spec.n_kv_heads} (needs n_kv_heads = n_heads = {spec.n_heads})")
        if spec.d_head * spec.n_heads != spec.d_model:
            out.append(f"d_head={spec.d_head} (needs n_heads * d_head = d_model = {spec.d_model})")
    if family == "BERT" and spec.type_vocab_size < 1:
        out.append("type_vocab_size=0 (BertModel always has a token-type table)")
    if spec.d_value != spec.d_head:
        out.append(f"d_value={spec.d_value} (needs d_value = d_head = {spec.d_head})")
    if spec.head.kind == "lm" and spec.head.bias:
        out.append("head.bias=true (the family's output projection has no bias)")
    if spec.embedding.d_embed not in (None, spec.d_model):
        out.append(f"embedding.d_embed={spec.embedding.d_embed} (needs d_model)")
    if spec.norm_position == "post" and family == "LLaMA":
        out.append("norm_position='post' (needs 'pre')")
    p = spec.position
    if p.kind == "learned" and p.offset:
        out.append(f"position.offset={p.offset} (needs 0)")
    if p.kind == "rotary" and (p.fraction != 1 or p.interleaved):
        out.append("position: partial or interleaved rotary (needs fraction = 1, rotate-half)")
    b = spec.biases
    if family == "LLaMA" and b.qkv != b.out:
        out.append(f"bias qkv={b.qkv}, out={b.out} (LLaMA's attention_bias sets both)")
    if family in ("GPT-2", "BERT") and not (b.qkv and b.out and b.mlp):
        out.append("bias=false somewhere (needs biases on every projection)")
    return out


def _check(spec: ModelSpec, family: str) -> None:
    reasons = unsupported(spec, family)
    if reasons:
        raise ValueError(f"{spec.name}: the {family} family cannot represent this spec: {'; '.join(reasons)}")


def is_gpt2_shaped(s: ModelSpec) -> bool:
    return not unsupported(s, "GPT-2")


def is_llama_shaped(s: ModelSpec) -> bool:
    return not unsupported(s, "LLaMA")


def is_bert_shaped(s: ModelSpec) -> bool:
    return not unsupported(s, "BERT")


def transformers_config(spec: ModelSpec):
    """The equivalent transformers config for a GPT-2-, LLaMA- or BERT-shaped spec (no dropout, the
    spec's norm epsilon and activation), so both sides build the same model from random weights.
    A spec no family represents is refused, naming what differs from the closest family."""
    import transformers

    if is_gpt2_shaped(spec):
        return transformers.GPT2Config(
            vocab_size=spec.vocab_size, n_positions=spec.max_positions, n_embd=spec.d_model,
            n_layer=spec.decoder_layers, n_head=spec.n_heads, n_inner=spec.d_ff,
            activation_function=_ACT[spec.activation], layer_norm_epsilon=spec.norm_eps,
            tie_word_embeddings=spec.tie_embeddings, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        )  # fmt: skip
    if is_llama_shaped(spec):
        return transformers.LlamaConfig(
            vocab_size=spec.vocab_size, hidden_size=spec.d_model, intermediate_size=spec.d_ff,
            num_hidden_layers=spec.decoder_layers, num_attention_heads=spec.n_heads,
            num_key_value_heads=spec.n_kv_heads, head_dim=spec.d_head, max_position_embeddings=spec.max_positions,
            rms_norm_eps=spec.norm_eps, attention_bias=spec.biases.qkv, mlp_bias=spec.biases.mlp,
            rope_theta=spec.position.base,
            hidden_act=_GATED_ACT[spec.activation], tie_word_embeddings=spec.tie_embeddings,
        )  # fmt: skip
    if is_bert_shaped(spec):
        return transformers.BertConfig(
            vocab_size=spec.vocab_size, hidden_size=spec.d_model, num_hidden_layers=spec.encoder_layers,
            num_attention_heads=spec.n_heads, intermediate_size=spec.d_ff,
            max_position_embeddings=spec.max_positions, type_vocab_size=spec.type_vocab_size,
            layer_norm_eps=spec.norm_eps, hidden_act=_ACT[spec.activation], hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )  # fmt: skip
    closest = min(FAMILIES, key=lambda f: len(unsupported(spec, f)))
    raise ValueError(
        f"{spec.name}: no transformers equivalent (GPT-2, LLaMA or BERT shaped); closest is {closest}, "
        f"which differs in {'; '.join(unsupported(spec, closest))}"
    )


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
        self.written: set[int] = set()  # ids of the target tensors filled
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
        self.written.add(id(target))

    def module(self, target: torch.nn.Module, prefix: str, transpose: bool = False) -> None:
        """`prefix`.weight (and `prefix`.bias where the target has one) into a linear or norm layer."""
        self.copy(target.weight, prefix + ".weight", transpose)
        if getattr(target, "bias", None) is not None:
            self.copy(target.bias, prefix + ".bias")

    def cat(self, prefix: str, names: tuple[str, ...], suffix: str) -> torch.Tensor:
        """Separate projections (q, k, v) fused the way the reference model stores them."""
        return torch.cat([self.get(f"{prefix}{n}{suffix}") for n in names], dim=0)

    def finish(self, model: torch.nn.Module, optional: tuple[str, ...] = (), keep: tuple[str, ...] = ()) -> None:
        """Both directions: every source tensor was used (but `optional` keys), and every parameter of
        `model` was written (but those under the module paths in `keep`, which keep their own weights)."""
        left = sorted(k for k in set(self.source) - self.used if k not in optional)
        if left:
            raise ValueError(f"{self.what}: {len(left)} tensors were not loaded, e.g. {left[:3]}")
        unwritten = [name for name, p in model.named_parameters()
                     if id(p) not in self.written and not name.startswith(keep)]  # fmt: skip
        if unwritten:
            raise ValueError(f"{self.what}: {len(unwritten)} parameters were not written, e.g. {unwritten[:3]}")


def _is_buffer_key(key: str) -> bool:
    return key.endswith((".attn.bias", ".attn.masked_bias", "position_ids", "rotary_emb.inv_freq"))


def _strip(sd: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Drop a leading `prefix` (e.g. 'transformer.') where every key has it."""
    keys = [k for k in sd if not k.startswith("lm_head.")]
    if keys and all(k.startswith(prefix) for k in keys):
        return {k.removeprefix(prefix): v for k, v in sd.items()}
    return dict(sd)


def _head(model: Transformer, c: _Copier) -> None:
    """An untied head loads `lm_head.weight`; a tied one is the embedding (the key may be there too)."""
    if not model.spec.tie_embeddings:
        c.copy(model.head.weight, "lm_head.weight")
    c.finish(model, optional=("lm_head.weight",))


def load_gpt2(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers GPT-2 state dict (GPT2LMHeadModel or GPT2Model) into `model`.
    GPT-2's Conv1D layers store weights (in, out): they are transposed."""
    _check(model.spec, "GPT-2")
    c = _Copier(_strip(state_dict, "transformer."), "GPT-2")
    c.copy(model.embed.weight, "wte.weight")
    c.copy(model.decoder.position.weight, "wpe.weight")
    for i, layer in enumerate(model.decoder.layers):
        p = f"h.{i}."
        c.module(layer.attention_norm, p + "ln_1")
        c.module(layer.attention.qkv, p + "attn.c_attn", transpose=True)
        c.module(layer.attention.out, p + "attn.c_proj", transpose=True)
        c.module(layer.mlp_norm, p + "ln_2")
        c.module(layer.mlp.up, p + "mlp.c_fc", transpose=True)
        c.module(layer.mlp.down, p + "mlp.c_proj", transpose=True)
    c.module(model.decoder.final_norm, "ln_f")
    _head(model, c)
    return model


def load_llama(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers LlamaForCausalLM state dict into `model` (RMSNorm, SwiGLU, rotary, GQA)."""
    _check(model.spec, "LLaMA")
    c = _Copier(_strip(state_dict, "model."), "LLaMA")
    c.copy(model.embed.weight, "embed_tokens.weight")
    for i, layer in enumerate(model.decoder.layers):
        p = f"layers.{i}."
        c.module(layer.attention_norm, p + "input_layernorm")
        c.copy(layer.attention.qkv.weight, c.cat(p + "self_attn.", ("q", "k", "v"), "_proj.weight"))
        if model.spec.biases.qkv:
            c.copy(layer.attention.qkv.bias, c.cat(p + "self_attn.", ("q", "k", "v"), "_proj.bias"))
        c.module(layer.attention.out, p + "self_attn.o_proj")
        c.module(layer.mlp_norm, p + "post_attention_layernorm")
        c.module(layer.mlp.gate, p + "mlp.gate_proj")
        c.module(layer.mlp.up, p + "mlp.up_proj")
        c.module(layer.mlp.down, p + "mlp.down_proj")
    c.module(model.decoder.final_norm, "norm")
    _head(model, c)
    return model


def load_bert(model: Transformer, state_dict: Mapping[str, torch.Tensor]) -> Transformer:
    """Load a transformers BertModel state dict into `model` (encoder-only, post-norm, pooler)."""
    _check(model.spec, "BERT")
    c = _Copier(_strip(state_dict, "bert."), "BERT")
    enc = model.encoder
    c.copy(model.embed.weight, "embeddings.word_embeddings.weight")
    c.copy(enc.position.weight, "embeddings.position_embeddings.weight")
    c.copy(model.token_type.weight, "embeddings.token_type_embeddings.weight")
    c.module(enc.embedding_norm, "embeddings.LayerNorm")
    for i, layer in enumerate(enc.layers):
        p = f"encoder.layer.{i}."
        qkv = ("query", "key", "value")
        c.copy(layer.attention.qkv.weight, c.cat(p + "attention.self.", qkv, ".weight"))
        c.copy(layer.attention.qkv.bias, c.cat(p + "attention.self.", qkv, ".bias"))
        c.module(layer.attention.out, p + "attention.output.dense")
        c.module(layer.attention_norm, p + "attention.output.LayerNorm")
        c.module(layer.mlp.up, p + "intermediate.dense")
        c.module(layer.mlp.down, p + "output.dense")
        c.module(layer.mlp_norm, p + "output.LayerNorm")
    c.module(model.pooler.dense, "pooler.dense")
    c.finish(model)
    return model


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
    c = _Copier(state_dict, "torch.nn.Transformer")

    def self_attention_and_mlp(layer, p: str) -> None:
        c.copy(layer.attention.qkv.weight, p + "self_attn.in_proj_weight")
        c.copy(layer.attention.qkv.bias, p + "self_attn.in_proj_bias")
        c.module(layer.attention.out, p + "self_attn.out_proj")
        c.module(layer.mlp.up, p + "linear1")
        c.module(layer.mlp.down, p + "linear2")

    for i, layer in enumerate(model.encoder.layers):
        p = f"encoder.layers.{i}."
        self_attention_and_mlp(layer, p)
        c.module(layer.attention_norm, p + "norm1")
        c.module(layer.mlp_norm, p + "norm2")
    d = s.d_model
    for i, layer in enumerate(model.decoder.layers):
        p = f"decoder.layers.{i}."
        self_attention_and_mlp(layer, p)
        w, b = c.get(p + "multihead_attn.in_proj_weight"), c.get(p + "multihead_attn.in_proj_bias")
        c.copy(layer.cross_attention.q.weight, w[:d])  # in_proj stacks q, k, v: q first, then k and v
        c.copy(layer.cross_attention.q.bias, b[:d])
        c.copy(layer.cross_attention.kv.weight, w[d:])
        c.copy(layer.cross_attention.kv.bias, b[d:])
        c.module(layer.cross_attention.out, p + "multihead_attn.out_proj")
        c.module(layer.attention_norm, p + "norm1")
        c.module(layer.cross_attention_norm, p + "norm2")
        c.module(layer.mlp_norm, p + "norm3")
    c.module(model.encoder.final_norm, "encoder.norm")
    c.module(model.decoder.final_norm, "decoder.norm")
    # nn.Transformer has no embeddings, positions or output head: those keep their own weights
    c.finish(model, keep=("embed", "target_embed", "token_type", "encoder.position", "decoder.position", "head",
                          "pooler"))  # fmt: skip
    return model
