"""Memory measured on the reference model: saved-tensor bytes equal a written inventory, tensor by tensor.

`inventory(spec, ...)` below states, per module path, what autograd keeps for backward (torch's CPU
kernels); the measurement (saved_tensors_hooks, storages counted once) must equal it exactly, by
path, by component and in total. Notation: B batch, n a stack's length (T decoder, S encoder),
d d_model, nh/nkv heads, dk/dv per-head widths, f d_ff, V vocabulary, e bytes per value.
"""

import pytest

torch = pytest.importorskip("torch")

import archspec  # noqa: E402
from archspec import ModelSpec  # noqa: E402
from archspec.core.errors import SpecError  # noqa: E402
from archspec.core.vocab import ATTENTION  # noqa: E402
from archspec.reference import build, count_total  # noqa: E402
from archspec.reference.memory_measure import (  # noqa: E402
    SavedTensorTracker,
    measure_activations,
    measure_kv_cache,
    measure_weights,
    random_batch,
    training_loss,
)

INDEX = 8  # int64 token ids
FP32 = 4


def norm_bytes(spec: ModelSpec, B: int, n: int, e: int) -> int:
    """LayerNorm keeps its input and, per row, mean and 1/std (in the input's dtype on the CPU).
    RMSNorm (torch's composite, upcasting) keeps the fp32 input, the fp32 normalised x and fp32 1/rms."""
    if spec.norm == "layernorm":
        return e * B * n * spec.d_model + 2 * e * B * n
    return 2 * FP32 * B * n * spec.d_model + FP32 * B * n


def fused_kernel(spec: ModelSpec, attention: str) -> bool:
    """The CPU's fused (flash) kernel runs only with d_head == d_value; otherwise the reference model
    runs eager attention."""
    return attention == "flash" and spec.d_head == spec.d_value


def self_attention_bytes(spec, B, n, e, attention, recompute) -> tuple[int, int]:
    """(attention, position) bytes of one self-attention layer over n tokens."""
    d, nh, nkv, dk, dv = spec.d_model, spec.n_heads, spec.n_kv_heads, spec.d_head, spec.d_value
    qkv_out = e * B * n * (nh * dk + nkv * dk + nkv * dv)  # the fused projection's output, one storage
    rotary = spec.position.kind == "rotary"
    rotated = e * B * n * (nh + nkv) * dk if rotary else 0  # rotated q and k: storages of their own
    cos_sin = 4 * e * n * spec.rotary_dims if rotary else 0  # cos and sin, computed for q and again for k
    out_in = e * B * n * nh * dv  # heads' output, the output projection's input
    # a partial rotation ends in a concatenation: q is head-major, so is the fused kernel's output,
    # and the output projection's input becomes a copy of it rather than a view
    head_major = e * B * n * nh * dv if rotary and spec.rotary_dims < dk else 0
    total = e * B * n * d + out_in  # + the projection's input (a norm's output)
    if recompute == "selective":  # the core's inputs and output
        return total + qkv_out + rotated, cos_sin
    if fused_kernel(spec, attention):  # + the log-sum-exp per query and head, fp32
        return total + qkv_out + rotated + FP32 * B * nh * n + head_major, cos_sin
    # eager: matmul copies q and k (k, v expanded to nh heads), the probabilities, v
    return total + e * B * nh * (n * dk + n * dk + n * n + n * dv), cos_sin


def cross_attention_bytes(spec, B, T, S, e, attention, recompute, first: bool) -> int:
    d, nh, nkv, dk, dv = spec.d_model, spec.n_heads, spec.n_kv_heads, spec.d_head, spec.d_value
    total = e * B * T * d + e * B * T * nh * dv  # query projection's input, output projection's input
    if first:  # the encoder's output (the K/V projection's input) is one storage, kept by the first layer
        total += e * B * S * d
    if recompute == "selective" or fused_kernel(spec, attention):
        total += e * B * T * nh * dk + e * B * S * nkv * (dk + dv)  # q, and the fused K/V output
        return total + (FP32 * B * nh * T if recompute != "selective" else 0)
    return total + e * B * nh * (T * dk + S * dk + T * S + S * dv)


def mlp_bytes(spec, B, n, e) -> int:
    kept = {"relu": 1, "gelu": 2, "silu": 2, "swiglu": 4, "geglu": 4}[spec.activation]  # widths of f
    return e * B * n * spec.d_model + kept * e * B * n * spec.d_ff


def inventory(spec: ModelSpec, B, T, S, e, attention="flash", recompute="none") -> dict[str, int]:
    """Bytes autograd keeps, per module path ('' is the loss)."""
    out: dict[str, int] = {}

    def add(path, nbytes):
        if nbytes:
            out[path] = out.get(path, 0) + nbytes

    lengths = {"encoder": S if spec.kind == "encoder-decoder" else T, "decoder": T}
    stacks = [s for s in ("encoder", "decoder") if getattr(spec, f"{s}_layers")]
    for i, stack in enumerate(stacks):
        n = lengths[stack]
        untied_target = stack == "decoder" and spec.kind == "encoder-decoder" and not spec.share_embeddings
        add("target_embed" if untied_target else "embed", INDEX * B * n)
        if spec.type_vocab_size and i == 0:
            add("token_type", INDEX * B * n)
        if spec.embedding_norm:
            add(f"{stack}.embedding_norm", norm_bytes(spec, B, n, e))
        layers = spec.encoder_layers if stack == "encoder" else spec.decoder_layers
        cross = stack == "decoder" and spec.kind == "encoder-decoder"
        for j in range(layers):
            p = f"{stack}.layers.{j}"
            if recompute == "full":
                add(p, e * B * n * spec.d_model + (e * B * S * spec.d_model if cross and j == 0 else 0))
                continue
            attn, pos = self_attention_bytes(spec, B, n, e, attention, recompute)
            add(f"{p}.attention_norm", norm_bytes(spec, B, n, e))
            add(f"{p}.attention", attn)
            add(f"{p}.attention.rotary", pos)  # each attention rotates with its own (buffer-only) rotary
            if cross:
                add(f"{p}.cross_attention_norm", norm_bytes(spec, B, n, e))
                add(f"{p}.cross_attention", cross_attention_bytes(spec, B, T, S, e, attention, recompute, j == 0))
            add(f"{p}.mlp_norm", norm_bytes(spec, B, n, e))
            add(f"{p}.mlp", mlp_bytes(spec, B, n, e))
        if spec.final_norm:
            add(f"{stack}.final_norm", norm_bytes(spec, B, n, e))
    if spec.head.kind == "lm":  # without a head, the loss (a sum) keeps nothing
        add("head", e * B * T * spec.d_model)
        add("", FP32 * B * T * spec.vocab_size + INDEX * B * T + FP32)  # fp32 log-softmax, targets, weight sum
    return out


def by_component(paths: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for path, nbytes in paths.items():
        last = path.rpartition(".")[2]
        if path == "":
            comp = "loss"
        elif last.isdigit():
            comp = "layer"
        elif last.endswith("norm"):
            comp = "norm"
        else:
            comp = {"target_embed": "embed", "rotary": "position"}.get(last, last)
        out[comp] = out.get(comp, 0) + nbytes
    return out


# ---------------------------------------------------------------- specs

GPT2_WIDTH = archspec.preset("gpt2")
LLAMA_STYLE = ModelSpec(
    name="llama-style", vocab_size=512, d_model=256, decoder_layers=2, n_heads=8, n_kv_heads=2, d_ff=688,
    max_positions=256, position="rotary", norm="rmsnorm", activation="swiglu", bias=False, tie_embeddings=False,
)  # fmt: skip


def toy(**changes) -> ModelSpec:
    return ModelSpec(name="toy", vocab_size=97, d_model=48, n_heads=4, max_positions=64, **changes)


VARIANTS = {
    "gpt2-width": GPT2_WIDTH,
    "llama-style": LLAMA_STYLE,
    "post-norm-relu": toy(decoder_layers=2, norm_position="post", activation="relu"),
    "post-norm-rmsnorm-final": toy(decoder_layers=2, norm_position="post", norm="rmsnorm", final_norm=True),
    "encoder-decoder": toy(encoder_layers=2, decoder_layers=2, position="sinusoidal"),
    "encoder-decoder-untied-gqa": toy(encoder_layers=2, decoder_layers=2, n_kv_heads=2, tie_embeddings=False),
    "bert-like": toy(encoder_layers=2, norm_position="post", type_vocab_size=2, embedding_norm=True, pooler=True),
    "bert-no-head": toy(encoder_layers=2, norm_position="post", type_vocab_size=2, embedding_norm=True, head="none"),
    "head-bias-sqrt-scale": toy(decoder_layers=2, head={"kind": "lm", "bias": True}, embedding_scale="sqrt_d_model"),
    "geglu-silu-none": toy(decoder_layers=2, activation="geglu", position="none", d_ff=80),
    "silu-wide-heads": toy(decoder_layers=2, activation="silu", d_head=16, n_kv_heads=1),
    "d_value-differs": toy(decoder_layers=2, d_head=8, d_value=16),
    "partial-rotary-gqa": toy(decoder_layers=2, n_kv_heads=2, position={"kind": "rotary", "fraction": 0.5}),
    "interleaved-rotary": toy(decoder_layers=2, position={"kind": "rotary", "interleaved": True, "base": 5e5}),
}


def shapes(name: str, dtype=torch.float32):
    """(B, T, S): GPT-2 width at 2 x 128 tokens (2 x 32 in bf16, whose matmuls are slow on CPUs);
    toys with an encoder shorter than the decoder."""
    if name == "gpt2-width":
        return (2, 128, 128) if dtype == torch.float32 else (2, 32, 32)
    return (2, 24, 16)


@pytest.fixture(scope="module")
def built():
    cache = {}

    def get(name, layers, dtype):
        key = (name, layers, dtype)
        if key not in cache:
            spec = VARIANTS[name]
            changes = {k: layers for k in ("encoder_layers", "decoder_layers") if getattr(spec, k)}
            spec = spec.replace(**changes)
            cache[key] = (spec, build(spec, dtype=dtype))
        return cache[key]

    return get


def check(spec, model, name, dtype, attention, recompute):
    B, T, S = shapes(name, dtype)
    report = measure_activations(spec, B, T, dtype, attention=attention, recompute=recompute, src_len=S, model=model)
    e = torch.tensor([], dtype=dtype).element_size()
    expected = inventory(spec, B, T, S, e, attention, recompute)
    assert report.by_path == expected
    assert report.by_component == by_component(expected)
    assert report.total_bytes == sum(expected.values())
    return report


# ---------------------------------------------------------------- saved tensors == inventory


@pytest.mark.parametrize("layers", [2, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.parametrize("attention", [ATTENTION[0], *(pytest.param(a, marks=pytest.mark.slow) for a in ATTENTION[1:])])
@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.bfloat16, marks=pytest.mark.slow)],
                         ids=["fp32", "bf16"])  # fmt: skip
@pytest.mark.parametrize("name", ["gpt2-width", pytest.param("llama-style", marks=pytest.mark.slow)])
def test_saved_tensors_equal_the_inventory(built, name, dtype, attention, layers):
    spec, model = built(name, layers, dtype)
    check(spec, model, name, dtype, attention, "none")


@pytest.mark.parametrize("attention", ["flash", pytest.param("eager", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", [n for n in VARIANTS if n not in ("gpt2-width", "llama-style")])
def test_saved_tensors_equal_the_inventory_across_architectures(built, name, attention):
    spec, model = built(name, 2, torch.float32)
    check(spec, model, name, torch.float32, attention, "none")


@pytest.mark.parametrize("recompute", ["selective", "full"])
@pytest.mark.parametrize("attention", ["flash", pytest.param("eager", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ["gpt2-width", *(pytest.param(n, marks=pytest.mark.slow)
                                                  for n in ("llama-style", "encoder-decoder-untied-gqa"))])  # fmt: skip
def test_recomputation_keeps_what_the_inventory_says(built, name, attention, recompute):
    spec, model = built(name, 2, torch.float32)
    check(spec, model, name, torch.float32, attention, recompute)


def test_bf16_recomputation_keeps_what_the_inventory_says(built):
    spec, model = built("llama-style", 2, torch.bfloat16)
    for recompute in ("selective", "full"):
        check(spec, model, "llama-style", torch.bfloat16, "eager", recompute)


# ---------------------------------------------------------------- rules the inventory relies on


@pytest.mark.slow  # two models' saved tensors inventoried; test_eager_attention_stores_the_probabilities is fast
def test_flash_keeps_no_score_matrix_and_eager_keeps_one_per_head(built):
    """The difference between the modes is the probabilities, less what the fused kernel keeps instead."""
    spec, model = built("gpt2-width", 2, torch.float32)
    B, T = 2, 96  # T differs from d_head (64): only a score matrix has shape (.., T, T)
    flash = measure_activations(spec, B, T, attention="flash", model=model)
    eager = measure_activations(spec, B, T, attention="eager", model=model)
    probabilities = [s for s in eager.storages if s.shape == (B, spec.n_heads, T, T)]
    assert len(probabilities) == spec.decoder_layers
    assert not [s for s in flash.storages if s.shape[-2:] == (T, T)]


def test_flash_without_equal_head_widths_runs_eager_attention(built):
    """torch's CPU flash kernel needs d_head == d_value; otherwise the model runs eager attention."""
    spec, model = built("d_value-differs", 2, torch.float32)
    flash = measure_activations(spec, 2, 24, attention="flash", model=model)
    eager = measure_activations(spec, 2, 24, attention="eager", model=model)
    assert flash.by_path == eager.by_path


def test_weights_are_not_activations(built):
    """Without excluding parameter storages, the count would grow by exactly the parameters that
    operations keep: every weight matrix (a linear layer keeps its transposed weight, a view; the tied
    head keeps the embedding) and every norm parameter; not linear biases, not the position table."""
    spec, model = built("gpt2-width", 2, torch.float32)
    model.set_execution("flash", "none")  # the shared model may come from a test that recomputed
    inputs, targets = random_batch(spec, 2, 16, None, "cpu")

    def measured(exclude_weights: bool) -> int:
        with SavedTensorTracker(model) as tracker:
            if not exclude_weights:
                tracker.excluded = set()
            training_loss(model, inputs, targets)
        return sum(s.nbytes for s in tracker.storages())

    biases = sum(m.bias.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    kept = archspec.count_params(spec).total - biases - archspec.count_params(spec).components["position"]
    assert measured(False) - measured(True) == 4 * kept


def test_each_storage_counts_once(built):
    """A storage saved by two operations (an attention output that the output projection also keeps,
    the log-softmax that the NLL loss also keeps) is one entry."""
    spec, model = built("gpt2-width", 2, torch.float32)
    report = measure_activations(spec, 2, 16, model=model)
    shared = [s for s in report.storages if len(s.saved_by) > 1]
    names = {n for s in shared for n in s.saved_by}
    assert {"LogSoftmaxBackward0", "NllLossBackward0"} <= names
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in names
    assert len(shared) == spec.decoder_layers + 1


# ---------------------------------------------------------------- attention modes and recomputation


@pytest.mark.parametrize("name", ["gpt2-width", "llama-style", "encoder-decoder-untied-gqa", "d_value-differs"])
def test_eager_and_flash_attention_give_the_same_outputs(built, name):
    spec, model = built(name, 2, torch.float32)
    B, T, S = 2, 12, 9
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randint(0, spec.vocab_size, (B, T), generator=gen)]
    if spec.kind == "encoder-decoder":
        inputs.insert(0, torch.randint(0, spec.vocab_size, (B, S), generator=gen))
    with torch.no_grad():
        flash = model.set_execution(attention="flash")(*inputs)
        eager = model.set_execution(attention="eager")(*inputs)
    model.set_execution(attention="flash")
    torch.testing.assert_close(eager, flash, atol=1e-5, rtol=0)


def test_eager_attention_with_a_cache_matches_the_full_pass():
    spec = VARIANTS["llama-style"]
    model = build(spec, attention="eager")
    tokens = torch.randint(0, spec.vocab_size, (2, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache()
        steps = [model(tokens[:, :6], cache=cache)] + [model(tokens[:, t : t + 1], cache=cache) for t in range(6, 10)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("recompute", ["selective", pytest.param("full", marks=pytest.mark.slow)])
def test_recomputation_gives_the_same_gradients(recompute):
    spec = VARIANTS["encoder-decoder-untied-gqa"]
    grads = {}
    for mode in ("none", recompute):
        model = build(spec, recompute=mode, attention="eager")
        gen = torch.Generator().manual_seed(3)
        src, tgt = (torch.randint(0, spec.vocab_size, (2, n), generator=gen) for n in (7, 9))
        model(src, tgt).float().pow(2).mean().backward()
        grads[mode] = {k: p.grad.clone() for k, p in model.named_parameters()}
    assert grads["none"].keys() == grads[recompute].keys()
    for k in grads["none"]:
        torch.testing.assert_close(grads[recompute][k], grads["none"][k], atol=1e-6, rtol=1e-5)


def test_unknown_execution_modes_are_refused():
    model = build(VARIANTS["llama-style"], device="meta")
    with pytest.raises(SpecError, match="unknown attention 'sparse'; use one of flash, eager"):
        model.set_execution(attention="sparse")
    with pytest.raises(SpecError, match="unknown recompute 'some'"):
        model.set_execution(recompute="some")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(device="meta"), "measured on real tensors"),
        (dict(batch=0), "batch must be a positive integer, got 0"),
        (dict(seq_len=300), "a sequence of 300 tokens is longer than its learned position table"),
        (dict(dtype="bf16", model="fp32"), "the model given is in torch.float32, not the torch.bfloat16 asked for"),
    ],
)
def test_bad_workloads_are_refused_with_one_line(built, kwargs, message):
    spec, model = built("post-norm-relu", 2, torch.float32)
    if kwargs.get("model"):
        kwargs = {**kwargs, "model": model}
    with pytest.raises(SpecError, match=message):
        measure_activations(spec, **{"batch": 2, "seq_len": 8, **kwargs})


# ---------------------------------------------------------------- weights and the KV cache


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_weights_bytes_are_the_unique_parameters_in_their_dtype(built, dtype):
    spec, model = built("llama-style", 2, dtype)
    e = torch.tensor([], dtype=dtype).element_size()
    assert measure_weights(model) == {str(dtype).removeprefix("torch."): archspec.count_params(spec).total * e}
    assert count_total(model) == archspec.count_params(spec).total


@pytest.mark.parametrize("name", ["llama-style", "encoder-decoder-untied-gqa"])
def test_kv_cache_bytes_follow_the_formula(built, name):
    spec, model = built(name, 2, torch.bfloat16)
    B, T, S = 2, 10, 6
    src = S if spec.kind == "encoder-decoder" else 0
    expected = 2 * spec.decoder_layers * spec.n_kv_heads * (spec.d_head + spec.d_value) * (T + src) * B
    assert measure_kv_cache(spec, B, T, src_len=S, model=model) == expected


@pytest.mark.slow  # a large model's cache and weights, measured on meta: seconds
def test_kv_cache_and_weights_measure_on_the_meta_device():
    """Sizes only, no memory: GPT-3 175B's bf16 cache after 2048 tokens and its bf16 weights."""
    spec = archspec.preset("gpt3-175b")
    expected = 2 * spec.decoder_layers * spec.n_kv_heads * (spec.d_head + spec.d_value) * 2048
    assert measure_kv_cache(spec, 1, 2048, dtype="bf16", device="meta") == expected
    model = build(spec, device="meta", dtype="bf16")
    assert measure_weights(model) == {"bfloat16": 2 * archspec.count_params(spec).total}
