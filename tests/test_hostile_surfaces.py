"""Hostile and extreme input on the surfaces beside the counts: the report and the plots, frozen specs,
options checked against the model, accelerator files, closed streams, the Python API's own inputs,
sizes people type, and terminals.

The contract is tests/test_hostile.py's: a right answer, or exit 2 with one line on stderr naming the
problem (SpecError or TypeError from the API), never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile import cli, refused

import archspec
from archspec.core.vocab import COMPONENTS

# ---------------------------------------------------------------- every component has a colour, a label, a place


def test_every_component_has_its_own_colour():
    from archspec.render.plot import COMPONENT_COLOURS

    assert set(COMPONENT_COLOURS) == set(COMPONENTS)
    assert len(set(COMPONENT_COLOURS.values())) == len(COMPONENTS)


def test_the_breakdown_draws_every_component_with_its_label(tmp_path):
    pytest.importorskip("matplotlib")
    from archspec.render.plot import BreakdownData, draw_breakdown

    n = len(COMPONENTS)
    data = BreakdownData(models=["a", "b"], components=list(COMPONENTS), counts=[[1] * n, list(range(1, n + 1))],
                         totals=[n, n * (n + 1) // 2])  # fmt: skip
    out = tmp_path / "all.svg"
    draw_breakdown(data, out)
    text = out.read_text(encoding="utf-8")
    for component in COMPONENTS:
        assert f">{component}<" in text, component


def _covering_presets() -> list[str]:
    """Presets that between them have every component the presets hold (mtp aside: counted when asked)."""
    chosen, missing = [], set(COMPONENTS) - {"mtp"}
    for name in archspec.presets():
        have = {c for c, v in archspec.count_params(archspec.preset(name)).components.items() if v}
        if have & missing:
            chosen.append(name)
            missing -= have
    assert not missing, f"no preset has {sorted(missing)}"
    return chosen


def test_the_breakdown_of_presets_covering_every_component(tmp_path):
    pytest.importorskip("matplotlib")
    names = _covering_presets()
    code, out, err = cli("plot", "breakdown", *names, "-o", tmp_path / "b.svg")
    assert code == 0, err
    text = (tmp_path / "b.svg").read_text(encoding="utf-8")
    for component in set(COMPONENTS) - {"mtp"}:
        assert f">{component}<" in text, component


@pytest.mark.parametrize("model", ["nemotron-h-56b", "qwen3-next-80b-a3b"])
def test_report_of_a_hybrid_model(tmp_path, model):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.html"
    code, _, err = cli("report", model, "--gpu", "h100", "-o", out)
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    mixer = archspec.count_params(archspec.preset(model)).components["mixer"]
    assert '<td class="l">mixer</td>' in page and f">{mixer:,}</td>" in page  # its row of the breakdown
    assert ">mixer</text>" in page  # and its bar's legend in the picture


@pytest.mark.parametrize("config", ["nemotron-h-56b-base-8k", "qwen3.5-27b"])
def test_the_breakdown_of_a_hybrid_config_json(tmp_path, config):
    """A Mamba-2 or Gated DeltaNet config.json as released: its mixer drawn with its label and counted."""
    import json
    from pathlib import Path

    pytest.importorskip("matplotlib")
    path = Path(__file__).parent / "data" / "hf" / f"{config}.json"
    code, out, err = cli("plot", "breakdown", path, "-o", tmp_path / "b.svg", "--format", "json")
    assert code == 0, err
    (drawn,) = json.loads(out)
    mixer = archspec.count_params(archspec.load_spec(path)).components["mixer"]
    assert drawn["components"]["mixer"] == mixer > 0
    assert ">mixer<" in (tmp_path / "b.svg").read_text(encoding="utf-8")


# ---------------------------------------------------------------- frozen specs, all the way down


def _containers(value, path="spec"):
    """Every list, dict or set inside a spec's fields, by path (a frozen spec holds none it can lose)."""
    from pydantic import BaseModel

    from archspec.spec.subtables import FrozenDict

    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _containers(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, FrozenDict | tuple):
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            yield from _containers(v, f"{path}[{k!r}]")
    elif isinstance(value, list | dict | set | bytearray):
        yield path, type(value).__name__


@pytest.mark.parametrize("name", archspec.presets())
def test_a_preset_holds_no_container_a_caller_can_change(name):
    spec = archspec.preset(name)
    assert list(_containers(spec)) == []
    validated = archspec.ModelSpec.model_validate(spec.model_dump())  # the validated path freezes alike
    assert validated == spec and list(_containers(validated)) == []


def test_a_shared_preset_cannot_be_changed_in_place():
    spec = archspec.preset("gemma-3-1b")
    kv = archspec.estimate_memory(spec, 1, 1024).kv_cache_bytes
    with pytest.raises(AttributeError):
        spec.layers.pattern.append("global")
    with pytest.raises(TypeError):
        spec.layers.pattern[0] = "global"
    with pytest.raises(TypeError, match="frozen"):
        spec.kinds["global"] = spec.kinds["local"]
    with pytest.raises(TypeError, match="frozen"):
        spec.kinds["local"].attention.update(sliding_window=None)
    with pytest.raises(Exception, match="frozen"):
        spec.layers.pattern = ("global",)
    again = archspec.preset("gemma-3-1b")
    assert archspec.estimate_memory(again, 1, 1024).kv_cache_bytes == kv
    assert again.layers.pattern == ("local",) * 5 + ("global",)  # as presets/gemma3.toml writes it


def test_a_changed_pattern_through_replace_is_checked():
    spec = archspec.preset("gemma-3-1b")
    with pytest.raises(archspec.SpecError, match="'nope'.*local, global"):
        spec.replace(layers={"pattern": ["local", "nope"]})
    changed = spec.replace(layers={"pattern": ["global", "local"]})
    assert changed.layers.pattern == ("global", "local") and spec.layers.pattern != changed.layers.pattern


def test_frozen_specs_copy_pickle_and_hash():
    import copy
    import pickle

    spec = archspec.preset("gemma-3-1b")
    assert copy.deepcopy(spec) == spec == pickle.loads(pickle.dumps(spec)) == spec.model_copy(deep=True)
    assert hash(spec) == hash(archspec.ModelSpec.model_validate(spec.model_dump()))


# ---------------------------------------------------------------- options checked against the model


def _mamba_only() -> archspec.ModelSpec:
    """Nemotron-H with its attention layers left out: Mamba-2 mixers and MLPs only."""
    spec = archspec.preset("nemotron-h-56b")
    kinds = {k: v for k, v in spec.kinds.items() if k != "attention"}
    return spec.replace(name="mamba-only", kinds=kinds, layers={"pattern": ["mamba", "mlp"]})


@pytest.mark.parametrize(("spec", "targets", "lacking"), [
    (_mamba_only(), "q", "q"), (_mamba_only(), "attention", "'attention'"), (_mamba_only(), "q,v,up", "q, v"),
    (archspec.preset("gpt2"), "gate", "gate"), (archspec.preset("gpt2"), "q,gate", "gate"),
])  # fmt: skip
def test_lora_targets_the_model_lacks_are_refused_by_name(spec, targets, lacking):
    from archspec.memory import lora_params

    with pytest.raises(archspec.SpecError, match=f"has no {lacking} projection"):
        lora_params(spec, 8, targets)
    with pytest.raises(archspec.SpecError, match=f"has no {lacking} projection"):
        archspec.estimate_memory(spec, 1, 128, lora_rank=8, lora_targets=targets)


def test_lora_targets_by_group_adapt_what_the_model_has():
    """A group adapts the projections of it the model has: GPT-2's MLP is up and down, no gate."""
    from archspec.memory import lora_params

    gpt2 = archspec.preset("gpt2")
    assert lora_params(gpt2, 8, "mlp")[0] == lora_params(gpt2, 8, "up,down")[0] == 12 * 8 * 2 * (768 + 3072)
    assert lora_params(_mamba_only(), 8, "mlp")[0] == lora_params(_mamba_only(), 8, "all")[0] > 0


def test_lora_refusals_on_the_command_line():
    refused("memory", "gpt2", "--lora", "8", "--lora-targets", "gate", message="gpt2 has no gate projection")


@pytest.mark.parametrize("call", [
    lambda lp: lp(None, 8), lambda lp: lp("gpt2", 8), lambda lp: lp(archspec.preset("gpt2"), "8"),
    lambda lp: lp(archspec.preset("gpt2"), 8, ["q"]),
])  # fmt: skip
def test_lora_api_with_wrong_types_names_the_argument(call):
    from archspec.memory import lora_params

    with pytest.raises(TypeError, match=r"^lora_params: (spec|rank|lora_targets) must be"):
        call(lora_params)


@pytest.mark.parametrize(("optimizer", "dtype"), [("none", "bf16"), ("none", "fp32"), ("sgd", "fp32")])
def test_offloading_an_optimizer_that_keeps_nothing_is_refused(optimizer, dtype):
    with pytest.raises(archspec.SpecError, match=f"optimizer '{optimizer}' in {dtype} keeps no states"):
        archspec.estimate_memory(archspec.preset("gpt2"), 1, 128, dtype, optimizer, offload="optimizer")
    refused("memory", "gpt2", "--optimizer", optimizer, "--dtype", dtype, "--offload", "optimizer",
            message="nothing to offload")  # fmt: skip


def test_offloading_sgd_in_mixed_precision_moves_its_master_copy():
    m = archspec.estimate_memory(archspec.preset("gpt2"), 1, 128, "bf16", "sgd", offload="optimizer")
    assert m.host_bytes == 4 * archspec.count_params(archspec.preset("gpt2")).total  # the fp32 master copy


@pytest.mark.parametrize("kv_dtype", ["mxfp4", "nf4", "int4", "q4_k_m"])
def test_a_kv_dtype_no_cache_is_held_in_is_refused(kv_dtype):
    from archspec.plan.inference import estimate_inference

    gpt2 = archspec.preset("gpt2")
    with pytest.raises(archspec.SpecError, match=f"kv_dtype '{kv_dtype}'.*use one of fp32, bf16"):
        archspec.estimate_memory(gpt2, 1, 128, kv_dtype=kv_dtype)
    with pytest.raises(archspec.SpecError, match=f"kv_dtype '{kv_dtype}'"):
        estimate_inference(gpt2, "h100", kv_dtype=kv_dtype)
    refused("inference", "gpt2", "--gpu", "h100", "-p", "8", "-g", "8", "--kv-dtype", kv_dtype, message=kv_dtype)


def test_a_kv_dtype_a_cache_is_held_in_counts_its_bytes():
    from archspec.memory import kv_cache_bytes

    gpt2 = archspec.preset("gpt2")
    for kv_dtype, per in (("int8", 1), ("fp8", 1), ("fp16", 2), ("fp32", 4)):
        m = archspec.estimate_memory(gpt2, 1, 128, kv_dtype=kv_dtype)
        assert m.kv_cache_bytes == kv_cache_bytes(gpt2, 1, 128, "fp32") * per // 4 == 12 * 2 * 768 * 128 * per


@pytest.mark.parametrize("peak", [-1, -1e15, 0, 0.0, float("nan"), float("-inf")])
def test_resolve_peak_refuses_a_peak_that_is_not_positive(peak):
    from archspec.plan.hardware import resolve_peak

    with pytest.raises(archspec.SpecError, match="peak_tflops must be"):
        resolve_peak("h100", peak, "bf16")


@pytest.mark.parametrize("peak", ["989", [989], True])
def test_resolve_peak_refuses_a_peak_that_is_not_a_number(peak):
    from archspec.plan.hardware import resolve_peak

    with pytest.raises(TypeError, match="resolve_peak: peak_tflops must be a number"):
        resolve_peak(None, peak, "bf16")


def test_resolve_peak_takes_a_positive_peak_exactly():
    from archspec.plan.hardware import accelerator, resolve_peak

    assert resolve_peak(None, 989, "bf16") == (989 * 10**12, None)
    assert resolve_peak("h100", None, "bf16") == (accelerator("h100").peak("bf16"), accelerator("h100"))


# ---------------------------------------------------------------- closed streams


def _with_closed(stream: str, *argv) -> tuple[int, str]:
    """main() with sys.stdout or sys.stderr None, as Python sets a stream whose descriptor is closed;
    the other stream's text comes back."""
    import contextlib
    import io

    other = io.StringIO()
    closed = contextlib.redirect_stdout(None) if stream == "stdout" else contextlib.redirect_stderr(None)
    kept = contextlib.redirect_stderr(other) if stream == "stdout" else contextlib.redirect_stdout(other)
    with closed, kept:
        code = archspec.cli.main([str(a) for a in argv])
    return code, other.getvalue()


def test_a_closed_stdout_ends_quietly():
    import archspec.cli

    assert _with_closed("stdout", "params", "gpt2") == (0, "")
    assert _with_closed("stdout", "params", "gpt2", "--format", "json") == (0, "")
    code, err = _with_closed("stdout", "params", "nope")
    assert code == 2 and err.startswith("archspec: error: ") and err.count("\n") == 1
    assert archspec.cli.sys.stdout is not None  # the test's own stream is back


def test_a_closed_stderr_still_exits_2():
    assert _with_closed("stderr", "params", "nope") == (2, "")
    code, out = _with_closed("stderr", "params", "gpt2", "--format", "json")
    assert code == 0 and '"total": 124439808' in out


@pytest.mark.parametrize(("redirect", "argv", "code"), [
    (">&-", "params gpt2", 0), ("2>&-", "params nope", 2), (">&- 2>&-", "params nope", 2),
    (">&-", "compare gpt2 bert-base --format json", 0), (">&-", "list", 0),
    (">&-", "sweep gpt2 --vary d_model=768,1536 -o - --format csv", 0), ("2>&-", "sweep gpt2 --vary d_model=1:1e20", 2),
    ("2>&-", "memory gpt2 --gpu h100 --gpu a100", 2),
])  # fmt: skip
def test_closed_descriptors_in_a_shell(redirect, argv, code):
    import shutil
    import subprocess
    import sys

    if not shutil.which("sh"):
        pytest.skip("no POSIX shell")
    run = subprocess.run(["sh", "-c", f'"$0" -m archspec {argv} {redirect}', sys.executable], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == code, run.stderr
    assert "Traceback" not in run.stderr


# ---------------------------------------------------------------- API arguments of the wrong type; impossible plans


@pytest.mark.parametrize(("args", "message"), [
    (("gpt2", "h100", "bf16"), "fit: spec must be a ModelSpec"),
    ((archspec.preset("gpt2"), 80, "bf16"), "fit: acc must be an Accelerator or an accelerator's name"),
    ((archspec.preset("gpt2"), None, "bf16"), "fit: acc must be an Accelerator"),
    ((archspec.preset("gpt2"), "h100", "bf16", ["training"]), "fit: task must be a str"),
    ((archspec.preset("gpt2"), "h100", "bf16", "inference", 1.0), "fit: batch must be an int"),
])  # fmt: skip
def test_fit_with_wrong_types_names_the_argument(args, message):
    from archspec.plan.fit import fit

    with pytest.raises(TypeError, match=f"^{message}"):
        fit(*args)


def test_fit_takes_an_accelerator_by_name_as_by_object():
    from archspec.plan.fit import fit
    from archspec.plan.hardware import accelerator

    gpt2 = archspec.preset("llama-3-8b")
    assert fit(gpt2, "H100", "bf16", "training") == fit(gpt2, accelerator("h100"), "bf16", "training")


def test_fit_refuses_a_plan_no_number_of_devices_holds():
    """5 x 10^15 parameters: more than 65,536 H100s hold between them; refused from one whole-model estimate."""
    from archspec.plan.fit import MAX_DEVICES, fit
    from archspec.plan.hardware import accelerator

    big = archspec.preset("gpt3-175b").replace(decoder_layers=96 * 1024, d_model=2**16, n_heads=512, d_ff=2**18)
    assert archspec.count_params(big).total > 10**15
    f = fit(big, accelerator("h100"), "bf16", "training")
    assert f.devices is None and 16 * archspec.count_params(big).total > MAX_DEVICES * f.capacity_bytes


def test_inference_of_a_mixture_of_experts_at_a_huge_batch():
    """The share of experts a decode step touches, 1 - (1 - k/E)^B, at B = 10^12: all of them."""
    from archspec.plan.inference import estimate_inference

    e = estimate_inference(archspec.preset("mixtral-8x7b"), "h100", 10**12, 100, 10)
    assert e.expected_experts == 8 and not e.fits
    small = estimate_inference(archspec.preset("mixtral-8x7b"), "h100", 3, 100, 10)
    assert small.expected_experts == pytest.approx(8 * (1 - (6 / 8) ** 3), rel=1e-15)


# ---------------------------------------------------------------- the Python API in a script


def test_exact_figures_format_as_numbers():
    from fractions import Fraction

    from archspec.plan.inference import estimate_inference

    f = archspec.count_flops(archspec.preset("gpt2"), 1, 1000)
    assert f.forward_per_token == Fraction(f.forward, 1000)  # still exact
    assert (
        f"{f.forward_per_token:,}" == f"{f.forward // 1000:,}"
        and f"{f.training_per_token:,}" == f"{3 * f.forward // 1000:,}"
    )
    from archspec.core.records import Exact

    third = Exact(10**12 + 1, 3)  # a figure that is not whole formats as the float it rounds to
    assert f"{third:,.2f}" == "333,333,333,333.67" and f"{third:.3g}" == "3.33e+11" and f"{third}" == "1000000000001/3"
    m = archspec.estimate_memory(archspec.preset("gpt2"), 1, 1024)
    assert f"{m.kv_cache_bytes_per_token:,}" == f"{m.kv_cache_bytes // 1024:,}"
    e = estimate_inference(archspec.preset("mixtral-8x7b"), "h100", 3, 100, 10)
    for x in (e.decode_bytes_per_token, e.decode_weights_bytes, e.decode_kv_bytes_per_token):
        assert f"{x:,.0f}" == f"{float(x):,.0f}"


def test_every_module_the_readme_names_is_reachable_after_import_archspec():
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    # every dotted name the README writes in code, as a script reaches it: attribute by attribute
    named = sorted({m for m in re.findall(r"\b(archspec(?:\.[A-Za-z_]+)+)", readme)
                    if not m.startswith("archspec.reference")})  # fmt: skip
    assert "archspec.plan.hardware.resolve_peak" in named
    script = ("import sys, functools, archspec\n"
              f"for m in {named!r}:\n    functools.reduce(getattr, m.split('.')[1:], archspec)\n"
              "print('torch' in sys.modules)")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stderr[-500:]
    fresh = subprocess.run([sys.executable, "-c", "import sys, archspec; print(sorted(m for m in sys.modules if "
                            "m.startswith('archspec.plan.hardware') or m == 'torch'))"], capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert fresh.stdout.strip() == "[]", "import archspec stays cheap: modules load on first use"
    assert archspec.plan.hardware.resolve_peak is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        archspec.nope  # noqa: B018


# ---------------------------------------------------------------- accelerator files on every command


def _accelerator_file(tmp_path, file: str, name: str, memory_gib: float = 10) -> str:
    path = tmp_path / file
    path.write_text(f"name = {name!r}\nmemory_gib = {memory_gib}\nbandwidth_gbs = 100\nbf16_tflops = 10\n".replace(
        "'", '"'), encoding="utf-8")  # fmt: skip
    return str(path)


def test_inference_memory_and_flops_take_an_accelerator_file(tmp_path):
    import json

    mine = _accelerator_file(tmp_path, "mine.toml", "mine", 10)
    (out,) = json.loads(cli("inference", "gpt2", "--gpu", mine, "-p", "10", "-g", "10", "--format", "json")[1])
    assert out["accelerator"] == "mine" and 0 < out["capacity_bytes"] <= 10 * 2**30  # (the engine's share of it)
    assert __import__("archspec.plan.hardware").hardware.accelerator(mine).memory_bytes == 10 * 2**30
    code, out, err = cli("memory", "gpt2", "--gpu", mine)
    assert code == 0 and "mine" in out, err
    (f,) = json.loads(cli("flops", "gpt2", "--gpu", mine, "--tokens", "1000000", "--format", "json")[1])
    assert f["accelerator"] == "mine" and f["time_seconds"] == pytest.approx(f["training_total"] / (10e12 * 0.4))


@pytest.mark.parametrize("command", [["inference", "gpt2", "-p", "1", "-g", "1"], ["memory", "gpt2"],
                                     ["flops", "gpt2", "--tokens", "1000"], ["fit", "gpt2"]])  # fmt: skip
def test_accelerator_names_in_any_case(command):
    code, out, err = cli(*command, "--gpu", "H100")
    assert code == 0, err
    assert cli(*command, "--gpu", "H100")[1] == cli(*command, "--gpu", "h100")[1]


def test_a_file_never_replaces_a_built_in_accelerator(tmp_path):
    fake = _accelerator_file(tmp_path, "fake.toml", "h100")
    refused("fit", "gpt2", "--gpu", "h100", "--gpu", fake, message="name 'h100' is the built-in accelerator 'h100'")
    alias = _accelerator_file(tmp_path, "alias.toml", "A100-80GB")
    refused("hardware", "--gpu", alias, message="is the built-in accelerator 'a100'")


def test_two_files_of_one_name_are_refused(tmp_path):
    a = _accelerator_file(tmp_path, "a.toml", "mine", 10)
    b = _accelerator_file(tmp_path, "b.toml", "mine", 20)
    refused("fit", "gpt2", "--gpu", a, "--gpu", b, message="both describe an accelerator named 'mine'")
    code, out, err = cli("hardware", "--gpu", a, "--gpu", a, "--format", "json")  # one file twice: one row
    assert code == 0 and len(__import__("json").loads(out)) == 1, err


@pytest.mark.parametrize("name", ["mi\\nne", "tab\\there", "x" * 61])
def test_an_accelerator_name_is_one_printable_line(tmp_path, name):
    path = tmp_path / "odd.toml"
    path.write_text(f'name = "{name}"\nmemory_gib = 10\nbandwidth_gbs = 100\nbf16_tflops = 10\n', encoding="utf-8")
    refused("hardware", "--gpu", path, message="name must be one line of printable text")


# ---------------------------------------------------------------- inputs people type


@pytest.mark.parametrize(("text", "count", "length"), [
    ("300B", 300 * 10**9, 300 * 10**9), ("1.5T", 15 * 10**11, 15 * 10**11), ("8k", 8000, 8192), ("8K", 8000, 8192),
    ("2M", 2 * 10**6, 2 * 2**20), ("0.5k", 500, 512), ("70b", 70 * 10**9, 70 * 10**9), ("1_000k", 10**6, 1000 * 1024),
    ("1e3k", 10**6, 1000 * 1024), ("12", 12, 12),
])  # fmt: skip
def test_sizes_with_suffixes(text, count, length):
    from archspec.io.loading import parse_number

    assert parse_number(text, integer=True) == count and type(parse_number(text)) is int
    assert parse_number(text, integer=True, length=True) == length


@pytest.mark.parametrize("text", ["k", "B", "1.5x", "1kk", "k1", "1 k", "1.2.3k", "0.0001k"])
def test_sizes_that_are_not_sizes(text):
    from archspec.io.loading import parse_number

    with pytest.raises(archspec.SpecError, match="is not a (whole )?number"):
        parse_number(text, integer=True)


def test_every_numeric_option_takes_a_suffix():
    import json

    (f,) = json.loads(cli("flops", "gpt2", "--tokens", "300B", "--seq-len", "1k", "--format", "json")[1])
    assert (f["tokens"], f["seq_len"]) == (300 * 10**9, 1024)
    (e,) = json.loads(cli("inference", "llama-3-8b", "--gpu", "h100", "-p", "8k", "-g", "1k", "--batch", "1k",
                          "--format", "json")[1])  # fmt: skip
    assert (e["prompt_len"], e["gen_len"], e["batch"]) == (8192, 1024, 1000)
    (m,) = json.loads(cli("memory", "llama-3-8b", "--seq-len", "8K", "--format", "json")[1])
    assert m["seq_len"] == 8192


def test_inference_defaults_as_the_function_does():
    import json

    from archspec.plan.inference import estimate_inference

    (e,) = json.loads(cli("inference", "gpt2", "--gpu", "h100", "--format", "json")[1])
    assert e == estimate_inference(archspec.preset("gpt2"), "h100").to_dict()


@pytest.mark.parametrize("name", ["GPT2", "Llama-3-8B", "LLAMA-3-8B", "Mixtral-8x7B"])
def test_preset_names_in_any_case(name):
    assert archspec.preset(name) == archspec.preset(name.lower())
    code, out, err = cli("params", name, "--format", "json")
    assert code == 0 and f'"name": "{name.lower()}"' in out, err


# ---------------------------------------------------------------- outputs checked before any work; silently wrong


def test_report_refuses_a_folder_before_any_work(tmp_path, monkeypatch):
    import archspec.cli.report as report_cli

    folder = tmp_path / "out.html"
    folder.mkdir()

    def no_work(args):
        raise AssertionError("models were read before the output was checked")

    monkeypatch.setattr(report_cli, "read_specs", no_work)
    refused("report", "gpt2", "llama-3-8b", "-o", folder, message="is a folder; name the page inside it")


def test_plot_refuses_a_folder(tmp_path):
    folder = tmp_path / "pic.svg"
    folder.mkdir()
    refused("plot", "breakdown", "gpt2", "-o", folder, message="is a folder; name the picture inside it")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, a folder that takes no new file")
@pytest.mark.parametrize("argv", [["report", "gpt2", "llama-3-8b", "-o", "/proc/report.html"],
                                  ["plot", "breakdown", "gpt2", "llama-3-8b", "-o", "/proc/pic.png"]])  # fmt: skip
def test_an_output_folder_that_takes_no_file_is_refused_before_any_work(monkeypatch, argv):
    """/proc passes a check of the mode bits for root, yet takes no new file: found by making one there."""
    import archspec.cli.plot as plot_cli
    import archspec.cli.report as report_cli

    def no_work(args):
        raise AssertionError("models were read before the output was checked")

    for module in (report_cli, plot_cli):
        monkeypatch.setattr(module, "read_specs", no_work)
    refused(*argv, message="cannot write in '/proc'")


def test_a_gemma3_window_of_zero_is_refused(tmp_path):
    """transformers masks keys outside (i - w, i]: w = 0 leaves a sliding layer no key; null is full attention."""
    import json
    from pathlib import Path

    released = json.loads((Path(__file__).parent / "data" / "hf" / "gemma-3-1b-it.json").read_text())
    zero = tmp_path / "config.json"
    zero.write_text(json.dumps({**released, "sliding_window": 0}))
    refused("memory", zero, message="sliding_window=0 is no window")
    with pytest.raises(archspec.SpecError, match="sliding_window=0"):
        archspec.load_spec(zero)
    full = tmp_path / "full" / "config.json"
    full.parent.mkdir()
    full.write_text(json.dumps({**released, "sliding_window": None}))
    spec = archspec.load_spec(full)  # every layer attends to all: the cache of a model without windows
    no_window = spec.replace(kinds={k: {} for k in spec.kinds}) if spec.kinds else spec
    assert (
        archspec.estimate_memory(spec, 1, 4096).kv_cache_bytes
        == archspec.estimate_memory(no_window, 1, 4096).kv_cache_bytes
    )


# ---------------------------------------------------------------- the planners fuzzed with arguments of any type

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ANYTHING = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["bf16", "fp32", "int8", "h100", "training", "lora", "adamw", "none"]),
    st.lists(st.integers(0, 9), max_size=3), st.fractions(), st.just(archspec.preset("gpt2")),
)  # fmt: skip


def _one_line_refusal(call, names=()) -> None:
    """`call` answers, or refuses in one line; a TypeError names one of `names` (the arguments given)."""
    try:
        call()
    except (archspec.SpecError, TypeError) as exc:
        text = str(exc)
        assert text and "\n" not in text and len(text) < 1100, text[:300]
        assert not names or not isinstance(exc, TypeError) or any(n in text for n in names), text[:300]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(ANYTHING, min_size=0, max_size=5))
def test_estimate_memory_with_arguments_of_any_type(args):
    _one_line_refusal(lambda: archspec.estimate_memory(archspec.preset("gpt2"), *args))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ANYTHING, st.lists(ANYTHING, min_size=0, max_size=5))
def test_estimate_inference_with_arguments_of_any_type(gpu, args):
    from archspec.plan.inference import estimate_inference

    _one_line_refusal(lambda: estimate_inference(archspec.preset("gpt2"), gpu, *args))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ANYTHING, ANYTHING, st.lists(ANYTHING, min_size=0, max_size=3))
def test_fit_with_arguments_of_any_type(acc, dtype, args):
    from archspec.plan.fit import fit

    _one_line_refusal(lambda: fit(archspec.preset("gpt2"), acc, dtype, *args))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(ANYTHING)
def test_the_planners_with_a_spec_of_any_type(spec):
    from archspec.plan.fit import fit
    from archspec.plan.inference import estimate_inference

    for call in (lambda: archspec.estimate_memory(spec), lambda: estimate_inference(spec, "h100"),
                 lambda: fit(spec, "h100", "bf16"), lambda: archspec.sweep(spec, {"d_model": [768]})):  # fmt: skip
        if isinstance(spec, archspec.ModelSpec):
            continue
        with pytest.raises(TypeError, match="spec must be a ModelSpec"):
            call()


# ---------------------------------------------------------------- what the report draws


def test_the_report_draws_each_model_over_its_own_context_and_says_repeats_in_one_line(tmp_path):
    import re

    pytest.importorskip("matplotlib")
    from archspec.plan.fit import DTYPES, fit
    from archspec.plan.hardware import accelerator
    from archspec.render.plot import memory_data

    out = tmp_path / "r.html"
    code, _, err = cli("report", "gpt2", "llama-3-8b", "--gpu", "h100", "--gpu", "rtx4090", "-o", out)
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    data = memory_data([archspec.preset("gpt2"), archspec.preset("llama-3-8b")])
    assert [c.seq_lens[-1] for c in data.curves] == [1024, 8192]  # each to its own max_positions
    memory_svg = page[page.index('<figure id="plot-memory">') :].split("</figure>")[0]
    assert ">8K<" in memory_svg  # the axis reaches Llama-3-8B's context, not GPT-2's 1K
    # GPT-2 fits on one device of either for every task and dtype: one line, no table of "1 (TP 1)"
    columns = [(task, d) for task in ("inference", "training") for d in DTYPES[task]]
    for name in ("h100", "rtx4090"):
        plans = [fit(archspec.preset("gpt2"), accelerator(name), d, task, 1, 1024) for task, d in columns]
        assert all(f.devices == 1 for f in plans)
    gpt2 = page[page.index("<h3>gpt2: batch") :].split("<h3>")[1]
    assert "One device of each of these holds it for every task and dtype below: h100, rtx4090." in gpt2
    assert "<table" not in gpt2 and len(re.findall(r"1 \(TP 1\)", gpt2)) == 0
    llama = page[page.index("<h3>llama-3-8b: batch") :].split("</table>")[0]
    assert "<table" in llama  # it does not fit one device for every task: its table stays


# ---------------------------------------------------------------- terminals


class _Tty:
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("env", "colour"), [
    ({}, True), ({"NO_COLOR": "1"}, False), ({"NO_COLOR": ""}, True), ({"TERM": "dumb"}, False),
    ({"TERM": "xterm-256color"}, True),
])  # fmt: skip
def test_colour_follows_no_color_term_and_a_tty(monkeypatch, env, colour):
    from archspec.core.progress import on_terminal
    from archspec.render.text import colour_enabled

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert colour_enabled(_Tty()) is colour
    assert colour_enabled(__import__("io").StringIO()) is False  # never off a terminal
    monkeypatch.setattr("sys.stderr", _Tty())
    assert on_terminal() is (env.get("TERM") != "dumb")  # the progress line redraws only where it can


# ---------------------------------------------------------------- the planners' keyword arguments fuzzed, and sweep

_KEYWORD_VALUES = st.one_of(
    ANYTHING, st.integers(-3, 70), st.dictionaries(st.text(max_size=4), st.integers(0, 3), max_size=2),
    st.sampled_from(["nf4", "mxfp4", "fp8", "sgd", "all", "q", "gate", "optimizer", "vllm", "llama.cpp", "flash",
                     "full", "selective", "attention", "mlp", "8k", "mlp=fp8", {"optimizer": "sgd"}]),
)  # fmt: skip


def _keywords(function, *positional: str):
    """The names of `function`'s keyword arguments, less the spec and those given by position."""
    import inspect

    return [p for p in inspect.signature(function).parameters if p not in ("spec", *positional)]


def _memory_keywords():
    return _keywords(archspec.estimate_memory)


def _inference_keywords():
    from archspec.plan.inference import estimate_inference

    return _keywords(estimate_inference, "gpu")


def _fit_keywords():
    from archspec.plan.fit import fit

    return _keywords(fit, "acc", "dtype")


@pytest.mark.parametrize("model", ["gpt2", "mixtral-8x7b", "nemotron-h-56b"])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_estimate_memory_with_keywords_of_any_value(model, data):
    kw = data.draw(st.dictionaries(st.sampled_from(_memory_keywords()), _KEYWORD_VALUES, min_size=1, max_size=3))
    _one_line_refusal(lambda: archspec.estimate_memory(archspec.preset(model), **kw), names=kw)


@pytest.mark.parametrize("model", ["gpt2", "mixtral-8x7b", "nemotron-h-56b"])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_estimate_inference_with_keywords_of_any_value(model, data):
    from archspec.plan.inference import estimate_inference

    kw = data.draw(st.dictionaries(st.sampled_from(_inference_keywords()), _KEYWORD_VALUES, min_size=1, max_size=3))
    _one_line_refusal(lambda: estimate_inference(archspec.preset(model), "h100", **kw), names=kw)


@pytest.mark.parametrize("model", ["gpt2", "mixtral-8x7b"])
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fit_with_keywords_of_any_value(model, data):
    from archspec.plan.fit import fit

    kw = data.draw(st.dictionaries(st.sampled_from(_fit_keywords()), _KEYWORD_VALUES, min_size=1, max_size=3))
    _one_line_refusal(lambda: fit(archspec.preset(model), "h100", "bf16", **kw), names=kw)


_FIELDS = st.sampled_from(["d_model", "n_heads", "decoder_layers", "d_ff", "vocab_size", "activation", "nope", ""])
_VALUES = st.one_of(ANYTHING, st.lists(ANYTHING, max_size=3), st.sampled_from(["768,1536", "512:2048:512", "1:1e20",
                    "gelu,swiglu", "a:b", "1:", range(768, 1537, 768), range(1, 10**20)]))  # fmt: skip


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(base=st.one_of(st.just(archspec.preset("gpt2")), ANYTHING),
       vary=st.one_of(st.dictionaries(_FIELDS, _VALUES, max_size=2), ANYTHING,
                      st.lists(st.sampled_from(["d_model=768,1536", "d_model=1:1e20", "n_heads", "=", "x=1"]),
                               max_size=2)),
       kw=st.dictionaries(st.sampled_from(["seq_len", "dtype", "where", "zipped", "keep", "limit", "progress",
                                           "strict"]), _KEYWORD_VALUES, max_size=3))  # fmt: skip
def test_sweep_with_arguments_of_any_type(base, vary, kw):
    """A sweep of any base, ranges and options: a one-line SpecError or TypeError, or rows (of the first
    few combinations: the limit holds the size, not this test)."""
    import itertools

    def rows():
        s = archspec.sweep(base, vary, **kw)
        for row in itertools.islice(s, 3):
            assert row["name"] == base.name and isinstance(row["total"], int)

    _one_line_refusal(rows, names=["spec", "vary", *kw])


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda e, g: e(g, "h100", mfu="0.4"), TypeError, "estimate_inference: mfu must be a number, got str"),
    (lambda e, g: e(g, "h100", mbu=[1]), TypeError, "estimate_inference: mbu must be a number, got list"),
    (lambda e, g: e(g, "h100", mbu=None), TypeError, "estimate_inference: mbu must be a number"),
    (lambda e, g: e(g, "h100", mfu=1.5), archspec.SpecError, r"mfu must be in \(0, 1\], got 1.5"),
    (lambda e, g: e(g, "h100", engine={"vllm": 1}), TypeError, "engine must be an engine's name"),
    (lambda e, g: e(g, "h100", dtype=g), archspec.SpecError, "dtype must be a storage format.*got ModelSpec"),
])  # fmt: skip
def test_inference_keywords_of_the_wrong_type_are_named(call, error, message):
    from archspec.plan.inference import estimate_inference

    with pytest.raises(error, match=message) as caught:
        call(estimate_inference, archspec.preset("gpt2"))
    assert len(str(caught.value)) < 300


def test_an_exact_utilisation_is_the_float_it_equals():
    from fractions import Fraction

    from archspec.plan.inference import estimate_inference

    gpt2 = archspec.preset("gpt2")
    exact = estimate_inference(gpt2, "h100", mfu=Fraction(1, 2), mbu=Fraction(3, 4))
    assert exact == estimate_inference(gpt2, "h100", mfu=0.5, mbu=0.75)


@pytest.mark.parametrize(("training", "message"), [
    ("adamw", "fit: training must be a dict of training options"), (["sgd"], "training must be a dict"),
    ({"optimiser": "sgd"}, "fit: training has no option 'optimiser'; its options: recompute"),
    ({"optimizer": ["sgd"]}, r"fit: training\['optimizer'\] must be a str"),
    ({"dropout": "yes"}, r"fit: training\['dropout'\] must be True or False"),
])  # fmt: skip
def test_fit_training_options_of_the_wrong_type_are_named(training, message):
    from archspec.plan.fit import fit

    with pytest.raises(TypeError, match=message):
        fit(archspec.preset("gpt2"), "h100", "bf16", "training", training=training)
    with pytest.raises(TypeError, match="engine must be an engine.s name"):
        fit(archspec.preset("gpt2"), "h100", "bf16", engine=["vllm"])


def test_fit_offloads_only_an_optimizer_that_keeps_something():
    from archspec.plan.fit import fit

    gpt2 = archspec.preset("gpt2")
    with pytest.raises(archspec.SpecError, match="optimizer 'none' in bf16 keeps no states"):
        fit(gpt2, "h100", "bf16", "training", training={"optimizer": "none", "offload": "optimizer"})
    refused("fit", "gpt2", "--gpu", "h100", "--task", "training", "--optimizer", "none", "--offload", "optimizer",
            message="nothing to offload")  # fmt: skip
    moved = fit(gpt2, "h100", "bf16", "training", training={"offload": "optimizer"})
    kept = fit(gpt2, "h100", "bf16", "training")
    assert moved.devices == kept.devices == 1 and moved.per_device_bytes < kept.per_device_bytes


# ---------------------------------------------------------------- the walk of every case, CLI and API side by side


@pytest.mark.parametrize("command", [["inference", "gpt2"], ["memory", "gpt2"], ["flops", "gpt2", "--tokens", "1k"],
                                     ["plot", "memory", "gpt2", "-o", "m.svg"]])  # fmt: skip
def test_a_second_gpu_on_a_command_of_one_accelerator_is_refused(tmp_path, command):
    """The second --gpu never silently replaces the first (fit, hardware and report take several)."""
    mine = _accelerator_file(tmp_path, "mine.toml", "mine")
    refused(*command, "--gpu", "h100", "--gpu", mine, message="argument --gpu: given twice ('h100', then")
    refused(*command, "--gpu", mine, "--gpu", mine, message="given twice")


def test_sweep_output_dash_is_standard_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["sweep", "gpt2", "--vary", "d_model=768,1536", "--format", "csv"]
    code, out, err = cli(*argv, "-o", "-")
    assert code == 0 and out == cli(*argv)[1] and not (tmp_path / "-").exists(), err
    assert out.splitlines()[1].startswith(f"gpt2,768,{archspec.count_params(archspec.preset('gpt2')).total},")
    assert _with_closed("stdout", *argv, "-o", "-") == (0, "")


@pytest.mark.parametrize("argv", [
    ["list"], ["hardware"], ["compare", "gpt2", "bert-base"], ["fit", "gpt2", "--gpu", "h100"],
    ["sweep", "gpt2", "--vary", "d_model=768,1536", "--format", "jsonl"], ["show", "gpt2"],
])  # fmt: skip
def test_a_closed_stdout_ends_quietly_on_every_command(argv):
    assert _with_closed("stdout", *argv) == (0, "")
    try:  # a bad option is refused by argparse, which exits 2 itself
        code, out = _with_closed("stderr", *argv, "--nope")
    except SystemExit as exc:
        code, out = exc.code, ""
    assert code == 2 and out == ""


@pytest.mark.parametrize("length", ["8k", "8K", "8192"])
def test_every_length_option_of_every_command_reads_8k_as_8192(length):
    from archspec.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    seen = set()
    for name, sub in commands.items():
        for action in sub._actions:
            if action.dest in ("seq_len", "prompt_len", "gen_len", "src_len"):
                assert action.type(length) == 8 * 1024, (name, action.dest)
                seen.add(name)
    assert {"flops", "memory", "inference", "fit", "sweep", "compare", "report", "plot"} <= seen
    (row,) = json_rows("sweep", "llama-3-8b", "--vary", "d_model=4096", "--seq-len", length)
    assert row["seq_len"] == 8192


def json_rows(*argv):
    import json

    code, out, err = cli(*argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_a_table_of_numbers_with_thousands_separators_wraps_on_a_narrow_terminal():
    from archspec.render.text import table

    rows = [["a100-40gb", "NVIDIA A100 40GB SXM4, the long title of it", "1,555", "300"],
            ["h100", "NVIDIA H100 SXM", "3,350", "450"]]  # fmt: skip
    headers = ["name", "accelerator", "bandwidth", "link"]
    text = table(rows, headers, "table", width=56)
    assert max(map(len, text.splitlines())) <= 56 and "1,555" in text and "3,350" in text
    assert "NVIDIA A100 40GB SXM4, the" in text and "title of it" in text  # wrapped, not dropped


@pytest.mark.skipif(__import__("sys").platform == "win32", reason="pseudo-terminals are POSIX")
@pytest.mark.parametrize(("env", "coloured"), [({"TERM": "xterm"}, True), ({"TERM": "dumb"}, False),
                                               ({"TERM": "xterm", "NO_COLOR": "1"}, False)])  # fmt: skip
def test_hardware_on_a_terminal_of_100_columns(env, coloured):
    import re

    from test_frontdoor import on_terminal

    seen = on_terminal(["hardware"], 100, env)
    assert ("\x1b[" in seen) is coloured
    plain = re.sub(r"\x1b\[[0-9;]*m", "", seen).replace("\r", "")
    assert "Traceback" not in plain and "1,555" in plain  # the A100 40GB's bandwidth, as the table prints it


@pytest.mark.parametrize(("name", "supported"), [
    ("gemma-3-1b-it", "full_attention, sliding_attention"), ("gpt-oss-20b", "full_attention, sliding_attention"),
    ("qwen3.5-27b", "linear_attention / full_attention"), ("smollm3-3b", "sliding_attention and full_attention"),
    ("granite-4.0-350m", "mamba / attention"),
])  # fmt: skip
def test_an_unknown_layer_type_is_refused_naming_the_types_there_are(tmp_path, name, supported):
    import json
    from pathlib import Path

    raw = json.loads((Path(__file__).parent / "data" / "hf" / f"{name}.json").read_text(encoding="utf-8"))
    text = raw.get("text_config", raw)
    text["layer_types"] = ["bogus_attention"] * text["num_hidden_layers"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    refused("params", path, message=supported)
    with pytest.raises(archspec.SpecError, match=f"bogus_attention.*{supported}"):
        archspec.load_spec(path)


def test_a_pattern_naming_a_kind_that_is_not_there_names_the_kinds(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('name = "m"\nvocab_size = 100\nd_model = 64\ndecoder_layers = 2\nn_heads = 4\nmax_positions = 16\n'
                    '[kinds.local.attention]\nsliding_window = 4\n[layers]\npattern = ["local", "nope"]\n')  # fmt: skip
    refused("params", path, message="layers names kind 'nope', which is not one of the kinds (local)")
    with pytest.raises(archspec.SpecError, match=r"kind 'nope', which is not one of the kinds \(local\)"):
        archspec.load_spec(path)


@pytest.mark.parametrize("text", ["d_model=1:1e20", "d_model=1:1e20:1", "d_model=-1e20:1e20", "d_model=0:2**70"])
def test_a_range_past_what_python_indexes_is_one_line(text):
    from archspec.plan.sweep import parse_vary

    for limit in (10**6, None):
        with pytest.raises(archspec.SpecError, match=r"--vary|d_model"):
            parse_vary(text, limit)
    with pytest.raises(archspec.SpecError, match="d_model"):
        archspec.sweep(archspec.preset("gpt2"), [text], limit=None)
    refused("sweep", "gpt2", "--vary", text, message="--vary")
    refused("sweep", "gpt2", "--vary", text, "--force", message="--vary")


def test_a_wide_step_over_a_huge_range_is_its_few_values():
    from archspec.plan.sweep import parse_vary

    assert list(parse_vary("d_model=1:1e20:1e19", None).values) == list(range(1, 10**20 + 1, 10**19))
    huge = archspec.sweep(archspec.preset("gpt2"), {"d_model": range(1, 10**20)}, limit=None)
    assert huge.n_combinations == 10**20 - 1
    with pytest.raises(archspec.SpecError, match="over the limit"):
        archspec.sweep(archspec.preset("gpt2"), {"d_model": range(1, 10**20)})


@pytest.mark.parametrize(("name", "config"), [("Llama-3.1-8B", "llama-3.1-8b"),
                                              ("LLAMA-3.3-70B", "llama-3.3-70b-instruct")])  # fmt: skip
def test_the_names_people_type_are_presets_that_match_their_released_configs(name, config):
    from pathlib import Path

    released = archspec.load_spec(Path(__file__).parent / "data" / "hf" / f"{config}.json")
    assert archspec.count_params(archspec.preset(name)).total == archspec.count_params(released).total
    (row,) = json_rows("params", name)
    assert row["name"] == name.lower() and row["total"] == archspec.count_params(released).total


@pytest.mark.parametrize("kv_dtype", ["mxfp4", "nf4"])
def test_a_kv_dtype_no_cache_is_held_in_on_every_command(kv_dtype):
    from archspec.plan.fit import fit

    refused("memory", "gpt2", "--kv-dtype", kv_dtype, message=f"--kv-dtype: invalid choice: '{kv_dtype}'")
    refused("inference", "gpt2", "--gpu", "h100", "--kv-dtype", kv_dtype, message=f"invalid choice: '{kv_dtype}'")
    refused("fit", "gpt2", "--kv-dtype", kv_dtype, message="`archspec fit` has no option --kv-dtype")
    with pytest.raises(TypeError, match="kv_dtype"):  # fit plans the cache beside its weights' format
        fit(archspec.preset("gpt2"), "h100", "bf16", kv_dtype=kv_dtype)


def test_lora_on_a_mamba_only_spec_file_through_the_command_line(tmp_path):
    import json

    path = tmp_path / "mamba-only.json"
    path.write_text(json.dumps(_mamba_only().model_dump(mode="json")), encoding="utf-8")
    refused("memory", path, "--lora", "8", "--lora-targets", "q,v", message="mamba-only has no q, v projection")
    refused("fit", path, "--gpu", "h100", "--task", "lora", "--lora-targets", "attention",
            message="mamba-only has no 'attention' projection")  # fmt: skip
    refused("fit", "gpt2", "--gpu", "h100", "--task", "lora", "--lora-targets", "gate", message="gpt2 has no gate")
    (m,) = json_rows("memory", path, "--lora", "8", "--lora-targets", "mlp")
    from archspec.memory import lora_params

    assert m["lora"]["adapter_bytes"] == 2 * lora_params(_mamba_only(), 8, "up,down")[0] > 0  # bf16 adapters


def test_every_number_of_a_planners_result_formats_as_a_number():
    """Every number in the results of the planners, walked field by field, takes `,`, `,.2f` and `.3g`."""
    import dataclasses
    import numbers

    from archspec.count.flops import training_cost
    from archspec.plan.fit import fit
    from archspec.plan.inference import estimate_inference

    mixtral, gpt2 = archspec.preset("mixtral-8x7b"), archspec.preset("gpt2")
    results = [archspec.count_flops(mixtral, 1, 1000), archspec.estimate_memory(mixtral, 3, 1000),
               estimate_inference(mixtral, "h100", 3, 100, 10, price_per_hour=2.49),
               fit(archspec.preset("llama-3-8b"), "h100", "bf16", price_per_hour=2),
               training_cost(archspec.count_flops(gpt2), 10**9, 8, 989 * 10**12, 0.4, price_per_hour=2.49),
               archspec.count_params(mixtral),
               archspec.sweep(gpt2, {"d_model": [768]}, seq_len=1000).rows()[0]]  # fmt: skip

    def numbers_in(value, path):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from numbers_in(v, f"{path}[{k!r}]")
        elif dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                yield from numbers_in(getattr(value, f.name), f"{path}.{f.name}")
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                yield from numbers_in(v, f"{path}[{i}]")
        elif isinstance(value, numbers.Number) and not isinstance(value, bool):
            yield path, value

    seen = 0
    for result in results:
        for path, x in numbers_in(result, type(result).__name__):
            for spec in ("," if not isinstance(x, float) else ",.0f", ",.2f", ".3g"):
                assert format(x, spec) == format(float(x), spec) or format(x, spec) == format(int(x), spec), path
            seen += 1
    assert seen > 100
    e = results[2]
    assert e.price_per_hour == __import__("fractions").Fraction(249, 100) and f"{e.price_per_hour:,.2f}" == "2.49"


def _documented_functions() -> dict[str, object]:
    """Every function docs/api.md documents (its `::: module` blocks' members, or the module's __all__)."""
    import importlib
    import importlib.util
    import inspect
    import re
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "api.md").read_text(encoding="utf-8")
    found = {}
    for block in re.split(r"^::: ", page, flags=re.M)[1:]:
        name = block.split()[0]
        if name.startswith("archspec.reference") or importlib.util.find_spec(name) is None:
            continue  # needs torch (it builds models), or a class (archspec.ModelSpec) rather than a module
        module = importlib.import_module(name)
        members = re.findall(r"^ {8}- (\w+)", block, flags=re.M) or getattr(module, "__all__", None) or [
            n for n, f in vars(module).items() if inspect.isfunction(f) and f.__module__ == name and n[0] != "_"]
        for member in members:
            f = getattr(module, member)
            if inspect.isfunction(f):
                found[f"{name}.{member}"] = f
    return found


DOCUMENTED = _documented_functions()


def test_the_documented_functions_are_found():
    assert {"archspec.memory.fits", "archspec.plan.compare.compare", "archspec.plan.hardware.load_accelerator",
            "archspec.validate.claims.assess", "archspec.plan.sweep.parse_vary",
            "archspec.core.sizing.swiglu_hidden"} <= set(DOCUMENTED)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(DOCUMENTED)), spec_first=st.booleans(), args=st.lists(ANYTHING, max_size=4),
       data=st.data())  # fmt: skip
def test_every_documented_function_with_arguments_of_any_type(name, spec_first, args, data):
    """Positional arguments of any type, or the spec and keywords of any value: an answer, or one line
    (SpecError, TypeError, or the ValueError of a value out of range), never AttributeError from inside."""
    import inspect

    f = DOCUMENTED[name]
    named = [p.name for p in inspect.signature(f).parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD,
             p.KEYWORD_ONLY)]  # fmt: skip
    kw = {}
    if spec_first and named and named[0] == "spec":
        args = [archspec.preset("gpt2")]
        kw = data.draw(st.dictionaries(st.sampled_from(named[1:] or ["spec"]), _KEYWORD_VALUES, max_size=3))
        kw.pop("spec", None)
    try:
        f(*args, **kw)
    except (archspec.SpecError, TypeError, ValueError) as exc:
        text = str(exc)
        assert text and "\n" not in text and len(text) < 1100, (name, text[:300])


@pytest.mark.parametrize(("model", "weights", "lacking"), [
    ("gpt2", "experts=fp8", "experts"), ("gpt2", "attention=bf16,experts=fp8", "experts"),
    ("llama-3-8b", "mtp=fp8", "mtp"), ("mixtral-8x7b", "shared_experts=fp8", "shared_experts"),
])  # fmt: skip
def test_a_role_the_model_lacks_is_refused_by_every_planner(model, weights, lacking):
    from archspec.plan.fit import fit
    from archspec.plan.inference import estimate_inference

    spec, message = archspec.preset(model), f"{model} has no {lacking} \\(its roles: embedding, attention"
    for call in (lambda: archspec.estimate_memory(spec, weights=weights),
                 lambda: estimate_inference(spec, "h100", dtype=weights),
                 lambda: fit(spec, "h100", weights)):  # fmt: skip
        with pytest.raises(archspec.SpecError, match=message):
            call()
    for argv in (["memory", model], ["inference", model, "--gpu", "h100"], ["fit", model, "--gpu", "h100"]):
        refused(*argv, "--weights", weights, message=f"{model} has no {lacking} (its roles:")


@pytest.mark.parametrize("seq_len", ["1e20", "1e140"])
def test_a_memory_picture_past_2_to_the_63_tokens_draws(tmp_path, seq_len):
    """numpy takes no logarithm of a Python int past 2^63: the lengths are drawn as floats."""
    import json

    pytest.importorskip("matplotlib")
    code, out, err = cli("plot", "memory", "llama-3-8b", "--seq-len", seq_len, "-o", tmp_path / "m.svg", "--format",
                         "json")  # fmt: skip
    assert code == 0, err
    (curve,) = json.loads(out)
    assert curve["seq_lens"][-1] == 10 ** int(seq_len[2:]) and (tmp_path / "m.svg").stat().st_size > 0
    from archspec.render.plot import tokens_label

    assert tokens_label(2**60) == "2^60" and tokens_label(10**20) == "1e+20" and tokens_label(8192) == "8K"


@pytest.mark.parametrize("argv", [
    ["plot", "memory", "llama-3-8b", "--seq-len", "1e300"], ["plot", "memory", "llama-3-8b", "--batch", "1e300"],
    ["plot", "scaling", "llama-3-8b", "--vary", "decoder_layers=16,1e300"],
])  # fmt: skip
def test_a_picture_of_figures_past_what_an_axis_draws_is_one_line(tmp_path, argv):
    pytest.importorskip("matplotlib")
    refused(*argv, "-o", tmp_path / "p.svg", message="is past what a picture's axis draws (10^150)")
    assert not (tmp_path / "p.svg").exists()


def test_the_report_leaves_out_a_picture_it_cannot_draw_and_keeps_its_tables(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.html"
    code, _, err = cli("report", "llama-3-8b", "--batch", "1e300", "--gpu", "h100", "-o", out)
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    assert '<p class="note" id="plot-memory">memory not drawn: memory (GiB) of ' in page
    assert '<figure id="plot-breakdown">' in page and "<table" in page


def test_mtp_on_a_model_without_prediction_modules_is_refused():
    glm, gpt2 = archspec.preset("glm-4.5-air"), archspec.preset("gpt2")
    with pytest.raises(archspec.SpecError, match="count_params: mtp=True: gpt2 has no multi-token-prediction"):
        archspec.count_params(gpt2, mtp=True)
    refused("params", "gpt2", "--mtp", message="--mtp changes nothing: gpt2 has no multi-token-prediction modules")
    refused("params", "gpt2", "bert-base", "--mtp", message="gpt2, bert-base have no multi-token-prediction")
    rows = json_rows("params", "glm-4.5-air", "gpt2", "--mtp")  # counted where there are modules
    assert rows[0]["total"] == archspec.count_params(glm, mtp=True).total > archspec.count_params(glm).total
    assert rows[1]["total"] == archspec.count_params(gpt2).total


_GPU_COMMANDS = {"fit": ["fit", "gpt2"], "hardware": ["hardware"], "inference": ["inference", "gpt2"],
                 "memory": ["memory", "gpt2"], "flops": ["flops", "gpt2", "--tokens", "1k"],
                 "plot": ["plot", "memory", "gpt2", "-o", "{tmp}/m.svg"],
                 "report": ["report", "gpt2", "-o", "{tmp}/r.html"]}  # fmt: skip


def test_every_command_with_gpu_is_walked():
    from archspec.cli import build_parser

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert {name for name, sub in commands.items() if any(a.dest == "gpu" for a in sub._actions)} == set(_GPU_COMMANDS)


@pytest.mark.parametrize("command", sorted(_GPU_COMMANDS))
def test_every_command_with_gpu_takes_a_file_and_refuses_a_clash_by_name(tmp_path, command):
    if command in ("plot", "report"):
        pytest.importorskip("matplotlib")
    argv = [a.format(tmp=tmp_path) for a in _GPU_COMMANDS[command]]
    mine = _accelerator_file(tmp_path, "mine.toml", "mine")
    code, out, err = cli(*argv, "--gpu", mine)
    assert code == 0, err
    written = {"plot": tmp_path / "m.svg", "report": tmp_path / "r.html"}.get(command)
    assert "mine" in (written.read_text(encoding="utf-8") if written else out)  # drawn, planned or listed
    fake = _accelerator_file(tmp_path, "fake.toml", "H100")
    refused(*argv, "--gpu", fake, message="is the built-in accelerator 'h100'")
    odd = tmp_path / "odd.toml"
    odd.write_text('name = "mi\\nne"\nmemory_gib = 10\nbandwidth_gbs = 100\nbf16_tflops = 10\n', encoding="utf-8")
    refused(*argv, "--gpu", odd, message="name must be one line of printable text")
    refused(*argv, "--gpu", tmp_path / "nope.toml", message="nope.toml")
