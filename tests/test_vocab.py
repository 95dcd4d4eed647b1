"""Each vocabulary written once: the command line's choices, the planner's validators, the spec and
the reference model read the same lists (archspec.core.vocab, the spec's Literals, archspec.memory.STORAGE);
a list typed a second time somewhere shows here as a difference."""

import argparse
from typing import get_args

import pytest

import archspec
from archspec.cli import build_parser
from archspec.core import vocab
from archspec.memory import DTYPE_BYTES, KV_DTYPES, OPTIMIZERS, STORAGE
from archspec.plan.fit import TASKS
from archspec.plan.hardware import MATH_DTYPES
from archspec.plan.sweep import KEEP
from archspec.spec.model import GATED_ACTIVATIONS, Activation


def choices(command: str, option: str) -> list:
    """The choices of `archspec COMMAND OPTION`, as the parser holds them."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    (action,) = [a for a in sub._actions if option in a.option_strings]
    return list(action.choices)


@pytest.mark.parametrize(
    "command, option, vocabulary",
    [
        ("memory", "--attention", vocab.ATTENTION),
        ("memory", "--recompute", vocab.RECOMPUTE),
        ("verify", "--recompute", vocab.RECOMPUTE),
        ("plot", "--recompute", vocab.RECOMPUTE),
        ("memory", "--zero", vocab.ZERO_STAGES),
        ("verify", "--zero", vocab.ZERO_STAGES),
        ("memory", "--optimizer", tuple(OPTIMIZERS)),
        ("memory", "--dtype", tuple(DTYPE_BYTES)),
        ("compare", "--dtype", tuple(DTYPE_BYTES)),
        ("sweep", "--dtype", tuple(DTYPE_BYTES)),
        ("memory", "--kv-dtype", KV_DTYPES),
        ("memory", "--experts", tuple(STORAGE)),
        ("flops", "--dtype", MATH_DTYPES),
        ("memory", "--offload", vocab.OFFLOAD),
        ("sweep", "--keep", KEEP),
        ("fit", "--task", TASKS),
        ("inference", "--kv-dtype", KV_DTYPES),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_the_command_lines_choices_are_the_vocabulary(command, option, vocabulary):
    assert choices(command, option) == list(vocabulary)


def test_no_choices_list_is_typed_in_the_command_line():
    """Every `choices=` of archspec/cli/ reads a vocabulary by name; a list typed there would drift."""
    import re
    from pathlib import Path

    import archspec.cli

    folder = Path(archspec.cli.__file__).parent
    typed = [f"{p.name}: {m.group()}" for p in sorted(folder.glob("*.py"))
             for m in re.finditer(r"choices=[\[(\"'][^,)]*", p.read_text())]  # fmt: skip
    assert not typed, typed


def test_the_planners_dtypes_are_storage_formats_and_every_alias_names_one():
    assert set(DTYPE_BYTES) <= set(STORAGE) and set(MATH_DTYPES) <= set(DTYPE_BYTES)
    assert set(vocab.DTYPE_ALIASES.values()) <= set(DTYPE_BYTES)
    assert set(vocab.FLOAT_DTYPES) <= set(DTYPE_BYTES)
    assert all(vocab.dtype_key(f" torch.{name.upper()} ") == short for short, name in vocab.FLOAT_DTYPES.items())


def test_the_reference_builds_in_every_float_dtype_with_the_planners_bytes():
    torch = pytest.importorskip("torch")
    from archspec.reference import resolve_dtype

    for alias, short in {**vocab.DTYPE_ALIASES, **{k: k for k in vocab.FLOAT_DTYPES}}.items():
        dt = resolve_dtype(alias)
        assert dt.is_floating_point and dt.itemsize == DTYPE_BYTES[short], alias
    assert resolve_dtype("float8_e5m2") is torch.float8_e5m2  # torch's own name wins over the alias
    assert resolve_dtype("fp8") is torch.float8_e4m3fn and resolve_dtype("float64") is torch.float64


def test_the_reference_model_knows_every_activation_and_recompute_mode():
    pytest.importorskip("torch")
    from archspec.reference.mlp import ACTIVATIONS
    from archspec.reference.model import ATTENTION, RECOMPUTE

    assert set(ACTIVATIONS) == set(get_args(Activation))
    assert (ATTENTION, RECOMPUTE) == (vocab.ATTENTION, vocab.RECOMPUTE)


def test_gated_activations_are_activations_and_adapters_map_into_them():
    from archspec.hf.engine import GATED_ACTIVATIONS as HF_GATED
    from archspec.hf.engine import PLAIN_ACTIVATIONS

    assert set(get_args(Activation)) >= GATED_ACTIVATIONS
    assert set(HF_GATED.values()) <= GATED_ACTIVATIONS
    assert not set(PLAIN_ACTIVATIONS.values()) & GATED_ACTIVATIONS
    assert set(PLAIN_ACTIVATIONS.values()) <= set(get_args(Activation))


def test_families_gated_lists_agree_with_the_spec():
    pytest.importorskip("torch")
    from archspec.reference.families import GATED, NON_GATED

    assert set(GATED) <= GATED_ACTIVATIONS and not set(NON_GATED) & GATED_ACTIVATIONS


@pytest.mark.parametrize(
    "asked, kwargs, runs",
    [
        ("flash", dict(d_qk=64, d_v=64), "flash"),
        ("eager", dict(d_qk=64, d_v=64), "eager"),
        ("flash", dict(softcap=50.0, d_qk=64, d_v=64), "eager"),
        ("flash", dict(sinks=True, d_qk=64, d_v=64), "eager"),
        ("flash", dict(d_qk=192, d_v=128), "eager"),
        ("flash", dict(d_qk=192, d_v=128, cpu_training=False), "flash"),
    ],
)
def test_when_attention_falls_back_to_eager(asked, kwargs, runs):
    assert vocab.attention_runs(asked, **kwargs) == runs


def test_the_planner_and_the_reference_fall_back_alike():
    """The planner's attention_mode and the reference model's core read one rule: a spec whose
    attention soft-caps runs eagerly on both sides (the reference's saved bytes are eager ones)."""
    from archspec import ModelSpec
    from archspec.memory import attention_mode

    toy = ModelSpec(name="t", vocab_size=50, d_model=32, n_heads=4, decoder_layers=1, max_positions=16)
    assert attention_mode(toy, "flash") == "flash"
    assert attention_mode(toy.replace(attention={"kind": "standard", "softcap": 30.0}), "flash") == "eager"
    assert attention_mode(toy.replace(d_value=4), "flash") == "eager"


def test_what_each_recompute_mode_keeps_is_named_from_the_vocabulary():
    """The rule sets' kept-sets (archspec.memory.saved) are subsets of the recompute modes, every mode
    keeps a layer's input (LAYER or CHECKPOINT), and the published approximation answers every mode."""
    from archspec.memory import korthikanti_bytes_per_layer
    from archspec.memory import saved as entries

    for kept in (entries.LAYER, entries.SCORES, entries.SELECTIVE, entries.CHECKPOINT):
        assert set(kept) <= set(vocab.RECOMPUTE), kept
    assert entries.ALWAYS == vocab.RECOMPUTE
    assert set(entries.LAYER) | set(entries.CHECKPOINT) == set(vocab.RECOMPUTE)
    gpt2 = archspec.preset("gpt2")
    assert [korthikanti_bytes_per_layer(gpt2, 1, 1024, r) > 0 for r in vocab.RECOMPUTE] == [True] * 3


def test_every_part_of_every_preset_has_a_component_and_role_of_the_vocabulary():
    from archspec.count.params import count_params
    from archspec.describe.blocks import describe
    from archspec.memory.saved import TORCH_CPU

    for name in archspec.presets():
        spec = archspec.preset(name)
        parts = describe(spec)
        assert {p.component for p in parts} <= set(vocab.COMPONENTS), name
        assert {p.role for p in parts} <= set(vocab.ROLES), name
        assert {p.form for p in parts} <= set(TORCH_CPU) | {""}, name  # every form has its rule
        assert tuple(count_params(spec).components) == vocab.COMPONENTS, name


def test_the_reference_modules_are_tagged_from_the_vocabulary():
    """Every component and role tag on the reference model's modules (and their own parameters filed
    elsewhere) is a name of archspec.core.vocab, for models with experts, shared experts and a router."""
    pytest.importorskip("torch")
    from archspec.reference import build

    moe = archspec.ModelSpec(name="toy-moe", vocab_size=64, d_model=32, n_heads=4, decoder_layers=2, max_positions=16,
                             mlp={"kind": "moe", "experts": 4, "top_k": 2, "d_expert": 8, "d_shared": 8,
                                  "correction_bias": True, "expert_scales": True, "router_norm": True,
                                  "dense_layers": 1},
                             )  # fmt: skip
    for name, spec in (("toy-moe", moe), ("gpt2", archspec.preset("gpt2")), ("bert", archspec.preset("bert-base"))):
        for _, module in build(spec, device="meta").named_modules():
            for tag, vocabulary in (("component", vocab.COMPONENTS), ("role", vocab.ROLES)):
                value = getattr(module, tag, None)
                assert value is None or value in vocabulary, (name, type(module).__name__, value)
                assert set(getattr(module, f"parameter_{tag}s", {}).values()) <= set(vocabulary)


# ---------------------------------------------------------------- one table of activations


def test_every_reader_of_the_activations_reads_the_one_table():
    """The spec's choices, which are gated, the hidden layer's element-wise work, the reference model's
    functions and the Hugging Face names all come from archspec.core.vocab.ACTIVATIONS."""
    from archspec.describe.entries import NON_MATMUL_COST
    from archspec.describe.mlp import MLPShape
    from archspec.hf.engine import GATED_ACTIVATIONS as HF_GATED
    from archspec.hf.engine import PLAIN_ACTIVATIONS as HF_PLAIN

    table = vocab.ACTIVATIONS
    assert get_args(Activation) == tuple(table)
    assert {name for name, a in table.items() if a.gated} == GATED_ACTIVATIONS
    for name, a in table.items():
        spec = archspec.preset("gpt2").replace(activation=name)
        assert spec.gated == a.gated
        assert MLPShape.of(spec).pointwise == a.op and NON_MATMUL_COST[a.op] == a.cost
        assert a.function in NON_MATMUL_COST  # a head that applies it alone has its cost too
    assert set(HF_PLAIN.items()) == {(hf, n) for n, a in table.items() if not a.gated for hf in a.hf}
    assert set(HF_GATED.items()) == {(hf, n) for n, a in table.items() if a.gated for hf in a.hf}


def test_the_reference_models_activation_functions_are_the_tables():
    torch = pytest.importorskip("torch")
    from archspec.reference.mlp import ACTIVATIONS, FUNCTIONS

    x = torch.linspace(-3, 3, 13)
    for name, a in vocab.ACTIVATIONS.items():
        assert torch.equal(ACTIVATIONS[name](x), FUNCTIONS[a.function](x)), name
    assert torch.equal(FUNCTIONS["relu2"](x), torch.relu(x) ** 2)
    assert torch.allclose(FUNCTIONS["silu"](x), x * torch.sigmoid(x))


def test_clamped_swiglu_alone_is_silu_for_the_count_and_the_reference_alike():
    """gpt-oss's activation applied to one input (an MLM or discriminator head) runs SiLU in the reference
    model; the description's head counts SiLU's work and keeps SiLU's tensors, not the clamped MLP's."""
    from archspec.describe.blocks import describe

    for head, tied in (("mlm", True), ("discriminator", False)):
        spec = archspec.preset("bert-base").replace(activation="clamped_swiglu", head=head, tie_embeddings=tied)
        _head_runs_silu(describe(spec))


def _head_runs_silu(parts):
    (head,) = [p for p in parts if p.component == "head"]
    (act,) = [e for e in head.entries if getattr(e, "name", "") == "act"]
    assert act.cost == "silu" == vocab.ACTIVATIONS["clamped_swiglu"].function
