"""What the parts around the blocks keep for backward on torch's CPU kernels (the rule set
'torch-cpu'), measured on the reference model: a stack's input (``stack_input``), its position scheme
(``position``), the factorised embeddings' projections (``projection``), the output head and the loss
(``head``), and what full recomputation keeps of each layer (``layer_input``)."""

from archspec.core.vocab import ACTIVATIONS
from archspec.describe.parts import Part
from archspec.memory.saved.attention import disentangled_stack_saved, relative_xl_stack_saved
from archspec.memory.saved.mlp import HIDDEN_KEPT
from archspec.memory.saved.record import ALWAYS, CHECKPOINT, SELECTIVE, Saved
from archspec.spec.model import ModelSpec


def stack_input(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The stack's input: the token ids the lookup keeps (int64), the token types of the first stack,
    and the dropout mask on the summed embeddings (with dropout only)."""
    saved = (Saved("ids", 1, dtype="int64", kept=ALWAYS), Saved("dropout_mask", spec.d_model, dtype="mask",
                                                                 kept=ALWAYS))  # fmt: skip
    if spec.type_vocab_size and part.stack.first:
        saved += (Saved("ids", 1, dtype="int64", kept=ALWAYS),)
    return saved


def position(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """A bias on the scores is an input of every recomputed region (selective: the core; full: the block),
    which keeps it, once per stack: ALiBi's (heads, keys) before its expansion over the queries, T5's
    (heads, T, T) from its table. T5's lookup keeps its (T, T) bucket index (int64), once per stack; umT5's
    table in every layer (a layered part) gives a bias that selective recomputation keeps (full
    recomputation runs the lookup again). DeBERTa's and Transformer-XL's tables keep their own
    (archspec.memory.saved.attention). Learned and sinusoidal positions keep nothing."""
    p, recomputed = spec.position, SELECTIVE + CHECKPOINT
    if p.kind == "alibi":
        return (Saved("positions", spec.n_heads, kept=recomputed, per_batch=False),)
    if p.kind == "disentangled":
        return disentangled_stack_saved(spec)
    if p.kind == "transformer_xl":
        return relative_xl_stack_saved(spec)
    if p.kind != "relative":
        return ()
    if part.layered:  # umT5: the layer's own table
        return (Saved("positions", spec.n_heads, rows="pairs", per_batch=False, kept=SELECTIVE),)
    index = (Saved("positions", 1, rows="pairs", dtype="int64", per_batch=False, kept=ALWAYS),)
    if not p.per_layer:
        index += (Saved("positions", spec.n_heads, rows="pairs", per_batch=False, kept=recomputed),)
    return index


def projection(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The factorised embeddings' projections (d_embed -> d_model; OPT's project_out) keep their input."""
    (linear,) = part.entries
    return (Saved("embed_proj", linear.n_in, kept=ALWAYS),)


def head(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The head's input; the loss (cross-entropy in fp32, as trainers compute it): the log-softmax of the
    logits (one storage for both of its users), the int64 targets and a 0-d fp32 weight. ELECTRA's
    discriminator: the dense layer keeps its input, the activation its input and output (ReLU its
    output), the binary cross-entropy the fp32 logits and the fp32 labels, one value each per token.
    BERT's masked-LM head: the activation (the element-wise function of a gated one) keeps its input and
    output (ReLU its output only, which the LayerNorm keeps too); the LayerNorm its mean and 1/std per
    row (in the input's dtype, CPU) and the tied map its input."""
    d, V, e = spec.d_model, spec.vocab_size, spec.d_embed
    act = ACTIVATIONS[spec.activation].function  # applied alone (of a gated one, its gate's function)
    if spec.head.kind == "discriminator":
        return (Saved("head_input", d, kept=ALWAYS), Saved("head", HIDDEN_KEPT[act] * d, kept=ALWAYS),
                Saved("loss", 2, dtype="fp32", kept=ALWAYS))  # fmt: skip
    saved = (Saved("head_input", spec.d_head_input, kept=ALWAYS), Saved("loss", V, dtype="fp32", kept=ALWAYS),
             Saved("loss", 1, dtype="int64", kept=ALWAYS),
             Saved("loss", 1, rows="first", dtype="fp32", kept=ALWAYS, per_batch=False))  # fmt: skip
    if spec.head.kind == "mlm":
        saved += (Saved("head", HIDDEN_KEPT[act] * e, kept=ALWAYS), Saved("head", 2, kept=ALWAYS),
                  Saved("head", e, kept=ALWAYS))  # fmt: skip
    return saved


def layer_input(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """What full recomputation keeps of each layer, with the layer's first part: its input (and the
    encoder output it reads)."""
    keep = (Saved("layer_input", spec.d_model, kept=CHECKPOINT),)
    if part.stack.cross:
        keep += (Saved("memory", spec.d_model, rows="source", kept=CHECKPOINT, shared=True),)
    return keep
