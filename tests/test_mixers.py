"""The recurrent mixers (Mamba, Mamba-2, Gated DeltaNet): the reference modules against
transformers' own mixers at toy size (same weights, outputs within 1e-5 in float32), against the
analytic parts (tensor by tensor, matmul FLOPs, the scan's operations) and the cache they hold.

transformers' modules run on their PyTorch paths (no mamba_ssm, causal_conv1d or fla kernels):
JambaMambaMixer's sequential selective scan, Mamba2Mixer's and NemotronHMamba2Mixer's chunked
scan, Qwen3-Next's and Qwen3.5's chunked gated delta rule.
"""

from __future__ import annotations

import warnings

import pytest
from matrix import fast_only

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from archspec.describe.entries import NON_MATMUL_COST, Lengths, StackShape, Work  # noqa: E402
from archspec.describe.mixers import PARTS  # noqa: E402
from archspec.memory import kv_cache_bytes  # noqa: E402
from archspec.reference import mixers as ref  # noqa: E402
from archspec.spec.model import ModelSpec  # noqa: E402

B, T, D = 2, 7, 16
STACK = StackShape("decoder", 1, causal=True, cross=False, reads="target", first=True)
LAYER = "decoder.layers.{i}"
HYBRID = ["linear_attention", "full_attention"]

# ---------------------------------------------------------------- the cases: a config, its spec, the weight map


def _jamba(bias: bool):
    from transformers import JambaConfig
    from transformers.models.jamba.modeling_jamba import JambaMambaMixer

    cfg = JambaConfig(hidden_size=D, num_hidden_layers=2, attn_layer_period=2, attn_layer_offset=1, mamba_d_state=4,
                      mamba_expand=2, mamba_dt_rank=3, mamba_d_conv=4, mamba_conv_bias=True, mamba_proj_bias=bias,
                      num_attention_heads=2, num_key_value_heads=1, intermediate_size=32, vocab_size=32,
                      num_experts=1, rms_norm_eps=1e-6)  # fmt: skip
    mixer = {"kind": "mamba", "d_inner": 32, "d_state": 4, "d_conv": 4, "dt_rank": 3, "conv_bias": True,
             "bias": bias, "dt_norms": True}  # fmt: skip
    return JambaMambaMixer(cfg, 0), cfg, mixer, 1e-6


def _mamba2():
    from transformers import Mamba2Config
    from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer

    cfg = Mamba2Config(hidden_size=D, num_hidden_layers=1, num_heads=4, head_dim=8, expand=2, state_size=4,
                       n_groups=2, conv_kernel=4, use_conv_bias=True, use_bias=False, vocab_size=32, chunk_size=4,
                       layer_norm_epsilon=1e-5)  # fmt: skip
    mixer = {"kind": "mamba2", "heads": 4, "head_dim": 8, "d_state": 4, "groups": 2, "d_conv": 4}
    return Mamba2Mixer(cfg, 0), cfg, mixer, 1e-5


def _nemotron_h():
    from transformers import NemotronHConfig
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    # time_step_min is the clamp of dt (the PyTorch path clamps at it); 0.7 makes it bite at these weights
    cfg = NemotronHConfig(hidden_size=D, num_hidden_layers=2, layers_block_type=["mamba", "mlp"], mamba_num_heads=4,
                          mamba_head_dim=6, ssm_state_size=4, n_groups=1, conv_kernel=3, use_conv_bias=False,
                          use_bias=True, vocab_size=32, chunk_size=4, num_attention_heads=2, num_key_value_heads=1,
                          intermediate_size=32, layer_norm_epsilon=1e-5, time_step_min=0.7)  # fmt: skip
    mixer = {"kind": "mamba2", "heads": 4, "head_dim": 6, "d_state": 4, "groups": 1, "d_conv": 3,
             "conv_bias": False, "bias": True, "dt_min": 0.7}  # fmt: skip
    return NemotronHMamba2Mixer(cfg, 0), cfg, mixer, 1e-5


def _falcon_h1(norm: str):
    """FalconH1Mixer: mamba_d_ssm wide, its norm optional (mamba_rms_norm) and before or after the gate
    (mamba_norm_before_gate), out_proj's bias projectors_bias apart from in_proj's mamba_proj_bias. Its muP
    vector (a buffer FalconH1Model registers) is ones here: the multipliers are not represented."""
    from transformers import FalconH1Config
    from transformers.models.falcon_h1.modeling_falcon_h1 import FalconH1Mixer

    proj_bias = norm == "gated"
    cfg = FalconH1Config(hidden_size=D, num_hidden_layers=1, mamba_d_ssm=24, mamba_n_heads=4, mamba_d_state=4,
                         mamba_n_groups=1 if norm == "none" else 2, mamba_d_conv=3, mamba_chunk_size=4,
                         mamba_rms_norm=norm != "none", mamba_norm_before_gate=norm == "before_gate",
                         mamba_proj_bias=proj_bias, projectors_bias=not proj_bias, vocab_size=32,
                         num_attention_heads=2, num_key_value_heads=1, intermediate_size=32, rms_norm_eps=1e-5,
                         time_step_limit=(0.7, 100.0))  # fmt: skip
    theirs = FalconH1Mixer(cfg, 0)
    theirs.register_buffer("mup_vector", torch.ones(1, 1, 2 * 24 + 2 * cfg.mamba_n_groups * 4 + 4))
    mixer = {"kind": "mamba2", "heads": 4, "head_dim": 6, "d_state": 4, "groups": cfg.mamba_n_groups, "d_conv": 3,
             "bias": proj_bias, "out_bias": not proj_bias, "norm": norm, "dt_min": 0.7, "dt_max": 100.0}  # fmt: skip
    return theirs, cfg, mixer, 1e-5


def _qwen3_next():
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    cfg = Qwen3NextConfig(hidden_size=D, num_hidden_layers=2, linear_num_key_heads=2, linear_num_value_heads=4,
                          linear_key_head_dim=4, linear_value_head_dim=6, linear_conv_kernel_dim=4,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=8, intermediate_size=32,
                          vocab_size=32, rms_norm_eps=1e-6, layer_types=HYBRID)  # fmt: skip
    mixer = {"kind": "gated_deltanet", "key_heads": 2, "value_heads": 4, "d_key": 4, "d_value_head": 6, "d_conv": 4}
    return Qwen3NextGatedDeltaNet(cfg, 0), cfg, mixer, 1e-6


def _qwen3_5():
    from transformers import Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    cfg = Qwen3_5TextConfig(hidden_size=D, num_hidden_layers=2, linear_num_key_heads=1, linear_num_value_heads=3,
                            linear_key_head_dim=8, linear_value_head_dim=4, linear_conv_kernel_dim=2,
                            num_attention_heads=2, num_key_value_heads=1, head_dim=8, intermediate_size=32,
                            vocab_size=32, rms_norm_eps=1e-6, layer_types=HYBRID)  # fmt: skip
    mixer = {"kind": "gated_deltanet", "key_heads": 1, "value_heads": 3, "d_key": 8, "d_value_head": 4, "d_conv": 2,
             "projections": "split"}  # fmt: skip
    return Qwen3_5GatedDeltaNet(cfg, 0), cfg, mixer, 1e-6


CASES = {"jamba": lambda: _jamba(False), "jamba-bias": lambda: _jamba(True), "mamba2": _mamba2,
         "nemotron_h": _nemotron_h, "qwen3_next": _qwen3_next, "qwen3_5": _qwen3_5,
         "falcon_h1": lambda: _falcon_h1("none"), "falcon_h1-norm-before-gate": lambda: _falcon_h1("before_gate"),
         "falcon_h1-norm-after-gate": lambda: _falcon_h1("gated")}  # fmt: skip

_MAMBA = ["in_proj.weight", "conv1d.weight", "conv1d.bias", "x_proj.weight", "dt_proj.weight", "dt_proj.bias", "A_log",
          "D", "out_proj.weight", "dt_layernorm.weight", "b_layernorm.weight", "c_layernorm.weight"]  # fmt: skip
_MAMBA2 = ["in_proj.weight", "conv1d.weight", "conv1d.bias", "dt_bias", "A_log", "D", "norm.weight", "out_proj.weight"]
_DELTANET = ["conv1d.weight", "dt_bias", "A_log", "norm.weight", "out_proj.weight"]
# transformers' name -> the reference module's name (the reference names its tensors as transformers does)
WEIGHT_MAPS = {
    "jamba": {n: n for n in _MAMBA},
    "jamba-bias": {n: n for n in _MAMBA + ["in_proj.bias", "out_proj.bias"]},
    "mamba2": {n: n for n in _MAMBA2},
    "nemotron_h": {n: n for n in _MAMBA2 + ["in_proj.bias", "out_proj.bias"] if n != "conv1d.bias"},
    "falcon_h1": {n: n for n in _MAMBA2 + ["out_proj.bias"] if n != "norm.weight"},
    "falcon_h1-norm-before-gate": {n: n for n in _MAMBA2 + ["out_proj.bias"]},
    "falcon_h1-norm-after-gate": {n: n for n in _MAMBA2 + ["in_proj.bias"]},
    "qwen3_next": {n: n for n in _DELTANET + ["in_proj_qkvz.weight", "in_proj_ba.weight"]},
    "qwen3_5": {n: n for n in _DELTANET + ["in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight",
                                           "in_proj_a.weight"]},
}  # fmt: skip


def toy_spec(mixer: dict, eps: float, layers: int = 1) -> ModelSpec:
    return ModelSpec(name="toy", vocab_size=32, d_model=D, decoder_layers=layers, n_heads=1, max_positions=16,
                     position="none", norm="rmsnorm", norm_eps=eps, mlp="none", attention=mixer)  # fmt: skip


def build(case: str):
    """transformers' mixer with random weights, its config, the spec, and the reference mixer holding
    the same weights (copied by the case's weight map, checked both ways)."""
    torch.manual_seed(0)
    theirs, cfg, mixer, eps = CASES[case]()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0, 0.5)
    spec = toy_spec(mixer, eps)
    ours = ref.MIXERS[spec.attention.kind](spec)
    source, target = dict(theirs.named_parameters()), dict(ours.named_parameters())
    table = WEIGHT_MAPS[case]
    assert set(table) == set(source), "every transformers tensor is mapped"
    assert set(table.values()) == set(target), "every reference parameter is written"
    with torch.no_grad():
        for src, dst in table.items():
            target[dst].copy_(source[src])
    return theirs.eval(), cfg, spec, ours.eval()


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' "falling back to the PyTorch implementation"
        yield


def _x(dtype=torch.float32):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(1)).to(dtype)


# ---------------------------------------------------------------- parity with transformers


@pytest.mark.parametrize("case", fast_only(CASES, set(list(CASES)[:1])))
def test_mixer_matches_transformers(case):
    theirs, _, _, ours = build(case)
    x = _x()
    with torch.no_grad():
        want, got = theirs(x), ours(x)
    assert want.shape == got.shape == (B, T, D)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", fast_only(CASES, set(list(CASES)[:1])))  # each case trains a model: seconds
def test_every_weight_matters(case):
    """The nudge-a-weight check, for every tensor: changing one element of it breaks equality."""
    theirs, _, _, ours = build(case)
    x = _x()
    with torch.no_grad():
        want = theirs(x)
        for name, p in ours.named_parameters():
            keep = p.detach().clone()
            p.view(-1)[-1] += 0.25
            assert (ours(x) - want).abs().max() > 1e-4, f"{case}: nudging {name} changed nothing"
            p.copy_(keep)
        torch.testing.assert_close(ours(x), want, rtol=1e-5, atol=1e-5)


def test_nemotron_h_dt_clamp_is_needed():
    """Remove the feature and parity breaks: without dt_min, Nemotron-H's clamped dt differs."""
    theirs, _, spec, ours = build("nemotron_h")
    x = _x()
    ours.dt_min = 0.0
    with torch.no_grad():
        assert (ours(x) - theirs(x)).abs().max() > 1e-3


@pytest.mark.parametrize("case", ["falcon_h1-norm-before-gate", "falcon_h1-norm-after-gate"])
def test_falcon_h1_norm_order_is_needed(case):
    """Remove the feature and parity breaks: the norm before or after the gate (mamba_norm_before_gate)."""
    theirs, _, _, ours = build(case)
    x = _x()
    ours.norm.gate_first = not ours.norm.gate_first
    with torch.no_grad():
        assert (ours(x) - theirs(x)).abs().max() > 1e-3


@pytest.mark.parametrize("case", fast_only(CASES, set(list(CASES)[:1])))
def test_incremental_decoding_equals_full_pass(case):
    """Prefill 3 tokens, then 1, 2 and 1 at a time: the same outputs as one pass over 7."""
    _, _, _, ours = build(case)
    x = _x()
    cache: dict = {}
    with torch.no_grad():
        full = ours(x)
        steps = [ours(x[:, a:b], cache=cache) for a, b in ((0, 3), (3, 4), (4, 6), (6, 7))]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- the analytic part


def _part(spec: ModelSpec):
    return PARTS[spec.attention.kind](spec, STACK, LAYER)


@pytest.mark.parametrize("case", list(CASES))
def test_part_tensors_equal_module_parameters(case):
    _, _, spec, ours = build(case)
    part = _part(spec)
    assert (part.path, part.component, part.role) == ("decoder.layers.{i}.mixer", "mixer", "dense")
    at = part.path.format(i=0)
    analytic = {
        ".".join(n for n in (at, e.name, leaf) if n): shape for e in part.entries for leaf, shape in e.tensors()
    }
    measured = {f"{at}.{n}": tuple(p.shape) for n, p in ours.named_parameters()}
    assert analytic == measured


@pytest.mark.parametrize("case", list(CASES))
def test_matmul_flops_equal_flop_counter(case):
    _, _, spec, ours = build(case)
    work = Work(Lengths(B, T), STACK)
    analytic = sum(v for e in _part(spec).entries for v in e.matmul(work).values())
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        ours(_x())
    assert counter.get_total_flops() == analytic > 0


class _StateOps(TorchDispatchMode):
    """Counts the elements of the element-wise operations on state-sized tensors (the largest
    operand of the op has `size` elements; a sum counts its input's elements)."""

    OPS = {"mul.Tensor", "add.Tensor", "sub.Tensor", "div.Tensor", "exp.default", "sum.dim_IntList"}

    def __init__(self, size: int):
        super().__init__()
        self.size, self.count, self.other = size, 0, set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._schema.name.split("::")[1] + "." + (func._overloadname or "default")
        tensors = [a for a in (*args, out) if isinstance(a, torch.Tensor)]
        largest = max(t.numel() for t in tensors)
        if name in self.OPS and largest == self.size:
            self.count += largest
        elif largest >= self.size and name not in ("stack.default", "select.int", "slice.Tensor", "unsqueeze.default",
                                                    "expand.default", "view.default", "clone.default"):  # fmt: skip
            self.other.add(name)
        return out


def _scan_inputs(kind: str, spec: ModelSpec):
    """Random inputs of the reference scan of `kind`, and the state elements per sequence."""
    a, g = spec.attention, torch.Generator().manual_seed(2)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    if kind == "mamba":
        I, N = a.d_inner, a.d_state
        return ref.mamba_scan, (r(B, T, I), r(B, T, I).exp(), -r(I, N).exp(), r(B, T, N), r(B, T, N),
                                torch.zeros(B, I, N)), I * N  # fmt: skip
    if kind == "mamba2":
        H, P, N = a.heads, a.head_dim, a.d_state
        return ref.mamba2_scan, (r(B, T, H, P), r(B, T, H).exp(), -r(H).exp(), r(B, T, H, N), r(B, T, H, N),
                                 torch.zeros(B, H, P, N)), H * P * N  # fmt: skip
    H, dk, dv = a.value_heads, a.d_key, a.d_value_head
    return ref.deltanet_scan, (r(B, T, H, dk), r(B, T, H, dk), r(B, T, H, dv), -r(B, T, H).exp(), r(B, T, H).sigmoid(),
                               torch.zeros(B, H, dk, dv)), H * dk * dv  # fmt: skip


@pytest.mark.parametrize("case", ["jamba", "mamba2", "qwen3_next"])
def test_scan_operations_follow_the_convention(case):
    """The reference scan applies NON_MATMUL_COST[<kind>_scan] element-wise operations per state
    element and token, and no other operation on state-sized tensors; the part's recurrence entry
    counts the same."""
    _, _, spec, _ = build(case)
    kind = spec.attention.kind
    scan, args, state = _scan_inputs(kind, spec)
    with _StateOps(B * state) as ops:
        scan(*args)
    assert ops.other == set()
    key = {"mamba": "mamba_scan", "mamba2": "mamba2_scan", "gated_deltanet": "deltanet_scan"}[kind]
    assert ops.count == B * T * state * NON_MATMUL_COST[key]
    analytic = sum(e.non_matmul(Work(Lengths(B, T), STACK)).get("recurrence", 0) for e in _part(spec).entries
                   if e.name == "scan")  # fmt: skip
    assert analytic == ops.count


# ---------------------------------------------------------------- the cache


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", fast_only(CASES, set(list(CASES)[:1])))
def test_cache_equals_transformers_cache(case, dtype):
    """After a forward over T tokens: the part's cached widths x batch x bytes (the conv state in
    the model's dtype, the recurrent state in fp32) = what the reference module keeps = what
    transformers' own cache holds for the layer; and archspec.memory plans the same bytes."""
    from transformers import DynamicCache

    theirs, cfg, spec, ours = build(case)
    theirs, ours = theirs.to(dtype), ours.to(dtype)
    x = _x(dtype)
    cache, kept = DynamicCache(config=cfg), {}
    with torch.no_grad():
        theirs(x, cache=cache)
        ours(x, cache=kept)
    layer = cache.layers[0]
    held = _nbytes([*layer.conv_states.values(), *layer.recurrent_states.values()])
    assert {t.dtype for t in layer.recurrent_states.values()} == {torch.float32}
    per = torch.tensor([], dtype=dtype).element_size()
    analytic = sum(B * c.values(Lengths(B, T), STACK) * (4 if c.dtype == "fp32" else per) for c in _part(spec).cached)
    assert analytic == _nbytes(kept.values()) == held
    assert kept["state"].dtype == torch.float32 and kept["conv"].dtype == dtype
    name = {torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype]
    assert kv_cache_bytes(toy_spec(spec.attention.model_dump(), spec.norm_eps, layers=3), B, T, name) == 3 * held


def test_state_is_constant_in_the_length():
    _, _, spec, _ = build("mamba2")
    full = toy_spec(spec.attention.model_dump(), spec.norm_eps)
    assert kv_cache_bytes(full, B, 5, "bf16") == kv_cache_bytes(full, B, 50_000, "bf16")


@pytest.mark.parametrize("case", ["jamba", "mamba2", "qwen3_next"])
def test_checkpointed_scan_keeps_only_its_inputs(case):
    """In training the reference runs its scan checkpointed: autograd keeps the scan's inputs, each
    storage once, and nothing of its steps (the part's 'mixer_scan' records describe those inputs,
    held equal to the measurement in tests/test_activations_kinds.py); the outputs are the
    sequential scan's, bit for bit."""
    _, _, spec, _ = build(case)
    scan, args, _ = _scan_inputs(spec.attention.kind, spec)
    args = [a.requires_grad_() if a.abs().sum() > 0 else a for a in args]
    kept: dict[int, int] = {}

    def pack(t):
        kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out, state = ref.run_scan(scan, None, *args)
    assert kept == {a.untyped_storage().data_ptr(): a.untyped_storage().nbytes() for a in args}
    plain, last = scan(*args)
    assert torch.equal(out, plain) and torch.equal(state, last)
    (out.sum() + state.sum()).backward()
    assert all(a.grad is not None for a in args if a.requires_grad)


# ---------------------------------------------------------------- bad input


MAMBA2 = 'attention = {kind = "mamba2", heads = 4, head_dim = 8, d_state = 4'
BAD_MIXERS = [
    (MAMBA2 + ", dt_min = 0.5, dt_max = 0.1}", "attention: dt_max=0.1 is below dt_min=0.5"),
    (MAMBA2 + ", dt_min = -1}", "dt_min"),
    (MAMBA2 + ", norm_groups = 2}", "norm_groups"),
    ('attention = {kind = "gated_deltanet", key_heads = 2, value_heads = 4, d_key = 4, d_value_head = 6, '
     'projections = "interleaved"}', "projections"),
    (MAMBA2 + ', norm = "after_gate"}', "norm"),
    ('attention = {kind = "standard", ssm = {kind = "mamba2", heads = 3, head_dim = 8, groups = 2}}',
     "attention.ssm: groups=2 does not divide heads=3"),
    ('attention = {kind = "standard", ssm = {kind = "mamba", d_inner = 8, dt_rank = 2}}', "ssm"),
    ('block = "parallel"\nattention = {kind = "standard", ssm = {kind = "mamba2", heads = 2, head_dim = 8}}',
     "mixer.ssm runs beside the attention in the mixer sub-layer; it needs block kind 'sequential'"),
    ('encoder_layers = 1\nattention = {kind = "standard", ssm = {kind = "mamba2", heads = 2, head_dim = 8}}',
     "mixer.ssm (a Mamba-2 mixer beside the attention) is for decoder layers"),
]  # fmt: skip


@pytest.mark.parametrize("table, message", BAD_MIXERS, ids=["dt_max", "dt_min", "norm_groups", "projections", "norm",
                                                            "ssm-groups", "ssm-not-mamba2", "ssm-parallel-block",
                                                            "ssm-encoder"])  # fmt: skip
def test_a_bad_mixer_field_is_one_line(run_cli, tmp_path, table, message):
    path = tmp_path / "toy.toml"
    path.write_text('name = "toy"\nvocab_size = 32\nd_model = 16\ndecoder_layers = 1\nn_heads = 1\n'
                    f'max_positions = 16\nposition = "none"\nnorm = "rmsnorm"\nmlp = "none"\n{table}\n')  # fmt: skip
    code, out, err = run_cli("params", str(path))
    assert code == 2 and out == "" and message in err and err.count("\n") == 1, err
