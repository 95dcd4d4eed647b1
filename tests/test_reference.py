"""The reference model: analytic == instantiated, behaviour, and clear errors."""

import pytest
from matrix import fast_only

torch = pytest.importorskip("torch")

import archspec  # noqa: E402
from archspec import ModelSpec, count_params  # noqa: E402
from archspec.describe.blocks import AttentionShape  # noqa: E402
from archspec.reference import (  # noqa: E402
    InsufficientMemoryError,
    build,
    cache_bytes,
    count_by_component,
    count_total,
    materialize,
)

TOY = dict(name="toy", vocab_size=61, d_model=32, n_heads=4, max_positions=24)


def toy(**changes):
    return ModelSpec(**{**TOY, "decoder_layers": 2, **changes})


# ---------------------------------------------------------------- analytic == instantiated


def test_gpt3_13b_as_printed_in_table_2_1():
    """d_model 5140 beside 40 heads of 128 (= 5120): attention narrower than the residual stream."""
    spec = archspec.preset("gpt3-13b").replace(d_model=5140, d_head=128)
    model = build(spec, device="meta")
    assert AttentionShape.of(spec).q == 5120 != spec.d_model
    assert count_by_component(model) == count_params(spec).components
    d, a, f, L, V, T = 5140, 5120, 4 * 5140, 40, 50257, 2048
    layer = (d * 3 * a + 3 * a) + (a * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d
    assert count_total(model) == V * d + T * d + L * layer + 2 * d == 12_936_488_380


def test_meta_build_allocates_nothing():
    model = build(archspec.preset("gpt3-175b"), device="meta")
    assert all(p.is_meta for p in model.parameters())
    assert all(b.is_meta for b in model.buffers())


def test_buffers_are_not_parameters():
    for position in ("sinusoidal", "rotary"):
        model = build(toy(position=position), device="meta")
        assert count_by_component(model)["position"] == 0
        assert len(list(model.buffers())) > 0


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_tied_head_is_the_embedding(device):
    model = build(toy(), device=device)
    assert model.head.weight is model.embed.weight
    assert count_total(model) == count_params(toy()).total
    untied = build(toy(tie_embeddings=False), device=device)
    assert untied.head.weight is not untied.embed.weight


def test_a_materialised_model_stays_tied():
    model = materialize(build(toy(), device="meta"), "cpu")
    assert model.head.weight is model.embed.weight
    with torch.no_grad():
        model.embed.weight[3].fill_(1.0)
    assert torch.equal(model.head.weight[3], torch.ones(32))


# ---------------------------------------------------------------- behaviour


def test_small_model_materialises_from_meta():
    spec = toy()
    model = build(spec, device="meta")
    materialize(model, "cpu", seed=3)
    ref = build(spec, seed=3)
    x = torch.randint(0, 61, (2, 8))
    torch.testing.assert_close(model(x), ref(x), rtol=0, atol=0)


def test_initialisation_is_deterministic_under_a_seed():
    a, b, c = build(toy(), seed=1), build(toy(), seed=1), build(toy(), seed=2)
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), n
    assert not all(torch.equal(p, r) for p, r in zip(a.parameters(), c.parameters()))


def test_gpt2_initialisation_scales_residual_projections():
    spec = toy(d_model=256, n_heads=4, decoder_layers=8, max_positions=8)
    model = build(spec, seed=0)
    layer = model.decoder.layers[0]
    assert layer.attention.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert layer.attention.out.weight.std().item() == pytest.approx(0.02 / (2 * 8) ** 0.5, rel=0.05)
    assert torch.count_nonzero(layer.mlp.up.bias) == 0 and torch.all(layer.mlp_norm.weight == 1)


@pytest.mark.parametrize("position", fast_only(["learned", "sinusoidal", "rotary", "none"], {"rotary"}))
def test_decoder_is_causal(position):
    model = build(toy(position=position))
    x = torch.randint(0, 61, (1, 10))
    y = x.clone()
    y[0, 7] = (y[0, 7] + 1) % 61
    a, b = model(x), model(y)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_encoder_sees_the_whole_source_and_decoder_is_causal():
    model = build(ModelSpec(**TOY, encoder_layers=2, decoder_layers=2, position="sinusoidal", norm_position="post"))
    src, tgt = torch.randint(0, 61, (1, 9)), torch.randint(0, 61, (1, 6))
    src2 = src.clone()
    src2[0, -1] = (src2[0, -1] + 1) % 61
    assert not torch.allclose(model(src, tgt)[:, 0], model(src2, tgt)[:, 0])  # the first target sees the last source
    tgt2 = tgt.clone()
    tgt2[0, 4] = (tgt2[0, 4] + 1) % 61
    torch.testing.assert_close(model(src, tgt)[:, :4], model(src, tgt2)[:, :4])


def test_encoder_only_is_bidirectional():
    model = build(ModelSpec(**TOY, encoder_layers=2))
    x = torch.randint(0, 61, (1, 8))
    y = x.clone()
    y[0, -1] = (y[0, -1] + 1) % 61
    assert not torch.allclose(model(x)[:, 0], model(y)[:, 0])


@pytest.mark.parametrize(
    "changes",
    [{}, {"position": "rotary", "n_kv_heads": 2}, {"position": "sinusoidal", "d_value": 12}],
    ids=["learned", "rotary-gqa", "sinusoidal-dvalue"],
)
def test_incremental_decoding_with_a_cache_matches_the_full_pass(changes):
    model = build(toy(**changes)).eval()
    x = torch.randint(0, 61, (2, 12))
    full = model(x)
    cache = model.new_cache()
    steps = [model(x[:, :5], cache=cache)] + [model(x[:, t : t + 1], cache=cache) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_kv_cache_holds_the_tensors_the_formula_counts():
    spec = toy(n_kv_heads=2, d_value=12)
    model = build(spec)
    cache = model.new_cache()
    model(torch.randint(0, 61, (3, 10)), cache=cache)
    # layers x kv heads x (d_head + d_value) x T x B x 4 bytes, written out
    assert cache_bytes(cache) == 2 * 2 * (8 + 12) * 10 * 3 * 4


@pytest.mark.slow  # hundreds of optimizer steps on the CPU
@pytest.mark.parametrize(
    "spec, steps",
    [
        (toy(d_model=64, max_positions=16), "decoder"),
        (
            ModelSpec(
                **{**TOY, "d_model": 64, "max_positions": 16},
                encoder_layers=2,
                decoder_layers=2,
                norm_position="post",
                position="sinusoidal",
                activation="relu",
            ),
            "encoder-decoder",
        ),
    ],
    ids=["decoder-only", "encoder-decoder"],
)
def test_training_on_a_copy_task_lowers_the_loss(spec, steps):
    torch.manual_seed(0)
    model = build(spec, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)

    def batch():
        seq = torch.randint(1, 61, (32, 6), generator=gen)
        if spec.kind == "encoder-decoder":  # reverse the source
            tgt = torch.cat([torch.zeros(32, 1, dtype=torch.long), seq.flip(1)], dim=1)
            return (seq, tgt[:, :-1]), tgt[:, 1:]
        x = torch.cat([seq, seq], dim=1)  # copy: the second half repeats the first
        return (x[:, :-1],), x[:, 1:]

    def loss_of(inputs, target):
        logits = model(*inputs)
        if spec.kind == "decoder-only":  # score the copied half only
            logits, target = logits[:, 5:], target[:, 5:]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 61), target.reshape(-1))

    first = loss_of(*batch()).item()
    for _ in range(120):
        opt.zero_grad()
        loss = loss_of(*batch())
        loss.backward()
        opt.step()
    last = sum(loss_of(*batch()).item() for _ in range(3)) / 3
    assert last < first / 4, (first, last)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"device": "tpu9"}, ValueError, "unknown device 'tpu9'"),
        ({"dtype": "float7"}, ValueError, "unknown dtype 'float7'"),
        ({"dtype": torch.int64}, TypeError, "floating-point"),
    ],
)
def test_build_rejects_unknown_devices_and_dtypes(kwargs, error, message):
    with pytest.raises(error, match=message):
        build(toy(), **kwargs)


def test_build_rejects_cuda_when_absent():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(ValueError, match="CUDA is not available"):
        build(toy(), device="cuda")


def test_sequence_longer_than_the_learned_table():
    model = build(toy(max_positions=8))
    with pytest.raises(
        ValueError, match=r"sequence of 9 positions is longer than the learned position table \(max_positions=8\)"
    ):
        model(torch.randint(0, 61, (1, 9)))


def test_encoder_decoder_called_with_one_input():
    model = build(ModelSpec(**TOY, encoder_layers=1, decoder_layers=1))
    with pytest.raises(TypeError, match=r"model\(src, tgt\)"):
        model(torch.randint(0, 61, (1, 4)))


def test_tokens_must_be_integer_ids():
    with pytest.raises(TypeError, match="integer token ids"):
        build(toy())(torch.randn(1, 4))


def test_memory_guard_refuses_weights_that_do_not_fit():
    with pytest.raises(InsufficientMemoryError, match=r"need 650\.5 GiB in float32 .* use device='meta'"):
        build(archspec.preset("gpt3-175b"), device="cpu")
