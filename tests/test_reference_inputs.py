"""The reference model's entry points refuse bad input with archspec's own message — a ValueError or
TypeError naming the argument — never an IndexError or RuntimeError from inside torch."""

import pytest

torch = pytest.importorskip("torch")

import archspec  # noqa: E402
from archspec import ModelSpec  # noqa: E402
from archspec.reference import build  # noqa: E402
from archspec.reference.build import MAX_LAYERS, available_memory  # noqa: E402

TOY = dict(name="toy", vocab_size=11, d_model=16, n_heads=2, max_positions=12)
DEC = ModelSpec(**TOY, decoder_layers=1)
ENC_DEC = ModelSpec(**TOY, encoder_layers=1, decoder_layers=1)
BERT = ModelSpec(**TOY, encoder_layers=1, type_vocab_size=2, pooler=True, head="none", norm_position="post")


@pytest.fixture(scope="module")
def models():
    return {"dec": build(DEC).eval(), "encdec": build(ENC_DEC).eval(), "bert": build(BERT).eval()}


def ids(*shape, high=11):
    return torch.randint(0, high, shape)


@pytest.mark.parametrize(
    "which, call, error, message",
    [
        (
            "dec",
            lambda m: m(torch.tensor([[1, 11]])),
            ValueError,
            "ids from 1 to 11; this model's ids run from 0 to 10",
        ),
        ("dec", lambda m: m(torch.tensor([[-1, 2]])), ValueError, "ids from -1 to 2"),
        ("dec", lambda m: m(torch.zeros(1, 0, dtype=torch.long)), ValueError, "is empty"),
        ("dec", lambda m: m(ids(2)), ValueError, r"shape \(B, T\)"),
        ("dec", lambda m: m([[1, 2]]), TypeError, "must be a tensor"),
        ("dec", lambda m: m(torch.randn(1, 3)), TypeError, "integer token ids"),
        ("dec", lambda m: m(ids(1, 3), ids(1, 3)), TypeError, "one token tensor"),
        ("dec", lambda m: m(ids(1, 3), token_types=ids(1, 3, high=2)), ValueError, "no token-type table"),
        ("dec", lambda m: m(ids(1, 3), cache=[]), TypeError, "new_cache"),
        ("dec", lambda m: m(ids(1, 3), cache={"self": {}}), TypeError, "new_cache"),
        ("dec", lambda m: m(ids(1, 13)), ValueError, "longer than the learned position table"),
        ("encdec", lambda m: m(ids(2, 3), ids(3, 3)), ValueError, "src has a batch of 2 sequences, tgt 3"),
        ("encdec", lambda m: m(ids(2, 3)), TypeError, r"model\(src, tgt\)"),
        ("bert", lambda m: m(ids(1, 3), token_types=torch.full((1, 3), 5)), ValueError, "token_types holds ids from 5"),
        ("bert", lambda m: m(ids(1, 3), token_types=ids(1, 4, high=2)), ValueError, "token_types has shape"),
        ("bert", lambda m: m.pool(torch.zeros(1, 0, 16)), ValueError, "at least one position"),
        ("bert", lambda m: m.new_cache(), ValueError, "encoder-only model has no decoder"),
    ],
)
def test_bad_model_inputs_are_named(models, which, call, error, message):
    with pytest.raises(error, match=message):
        call(models[which])


def test_a_cache_from_another_batch_is_refused(models):
    m = models["dec"]
    cache = m.new_cache()
    m(ids(2, 3), cache=cache)
    with pytest.raises(ValueError, match="cache holds a batch of 2 sequences, the input 3"):
        m(ids(3, 1), cache=cache)


def test_a_cache_from_another_model_is_refused(models):
    other = build(DEC.replace(decoder_layers=2)).eval()
    with pytest.raises(TypeError, match="a list of 1"):
        models["dec"](ids(1, 2), cache=other.new_cache())


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"device": "xpu"}, ValueError, "not available on this machine"),
        ({"device": "hpu"}, ValueError, "not available on this machine"),
        ({"device": 3.5}, TypeError, "device must be"),
        ({"dtype": "fp8"}, ValueError, "build it on device='meta'"),
        ({"seed": 1.5}, TypeError, "seed must be a whole number"),
        ({"seed": 2**64}, ValueError, "seed must be between"),
        ({"seed": -1}, ValueError, "seed must be between"),
    ],
)
def test_build_refuses_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        build(DEC, **kwargs)


def test_fp8_weights_build_on_meta():
    model = build(DEC, device="meta", dtype="fp8")
    assert next(model.parameters()).dtype == torch.float8_e4m3fn


def test_huge_specs_are_refused_before_building():
    million = DEC.replace(decoder_layers=1_000_000)
    with pytest.raises(ValueError, match=f"1,000,000 layers, more than build\\(\\) makes \\({MAX_LAYERS:,}\\)"):
        build(million, device="meta")
    wide = DEC.replace(vocab_size=2**40, d_model=2**30, n_heads=1)
    with pytest.raises(ValueError, match=r"more bytes in float32 than torch can address \(2\^63 - 1\)"):
        build(wide, device="meta")


def test_memory_guard_honours_the_address_space_limit():
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 64 * 2**30 if hard == resource.RLIM_INFINITY else min(hard, 64 * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        assert available_memory(torch.device("cpu")) <= limit
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_gpt3_175b_on_the_cpu_is_refused_with_the_numbers():
    from archspec.reference import InsufficientMemoryError

    with pytest.raises(InsufficientMemoryError, match="use device='meta'"):
        build(archspec.preset("gpt3-175b"), device="cpu")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["verify", "gpt2", "--set", "vocab_size=1e19"], "vocab_size = 10,000,000,000,000,000,000 is more than torch"),
        (["verify", "gpt2", "--set", "d_model=12e30"], "d_model = about 10^31 is more than torch"),
        (["verify", "gpt2", "--set", "decoder_layers=1000000"], "1,000,000 layers, more than build() makes"),
        (["memory", "gpt2", "--gpus", "24", "--tp", "24"], "tensor_parallel=24 does not divide n_heads=12"),
        (["memory", "gpt2", "--gpus", "10", "--tp", "5"], "tensor_parallel=5 does not divide n_heads=12"),
        (["memory", "gpt2", "--gpus", "100", "--pp", "100"], "pipeline_parallel=100 is more stages than gpt2 has"),
        (["memory", "gpt2", "--gpus", "6", "--tp", "4"], "gpus=6 is not divisible by tensor_parallel=4"),
    ],
)
def test_verify_and_planning_refuse_what_cannot_be_in_one_line(run_cli, argv, message):
    code, out, err = run_cli(*argv)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tensor_parallel": 5}, "does not divide n_heads=12"),
        ({"pipeline_parallel": 13}, "more stages than gpt2 has layers"),
    ],
)
def test_the_planning_api_refuses_impossible_layouts(kwargs, message):
    from archspec.memory import estimate_memory

    with pytest.raises(archspec.SpecError, match=message):
        estimate_memory(archspec.preset("gpt2"), **kwargs)
