"""The planner's front door: accelerators, fit, compare at one length, sweeps, tables that fit the
terminal, colour, completion, honest options and importing from the clone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import archspec
from archspec.core.vocab import ZERO_STAGES
from archspec.memory import STORAGE, estimate_memory
from archspec.plan.fit import fit
from archspec.plan.hardware import ACCELERATORS, accelerator
from archspec.render.text import table

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- accelerators

REQUIRED = ["a100-40gb", "a100", "h100", "h100-pcie", "h200", "h20", "b200", "b300", "gb200", "l40s", "rtx4090",
            "rtx5090", "mi300x", "mi325x", "mi355x", "tpu-v5e", "tpu-v5p", "tpu-v6e", "gaudi3"]  # fmt: skip


def test_the_table_covers_the_accelerators_of_2026():
    assert set(REQUIRED) <= set(ACCELERATORS)
    assert accelerator("a100").memory_gib == 80 and accelerator("h100").title == "NVIDIA H100 SXM5"


@pytest.mark.parametrize("name", list(ACCELERATORS))
def test_each_row_has_its_sources(name):
    a = ACCELERATORS[name]
    assert a.source and a.bandwidth_source and a.interconnect_source
    # the interconnect printed per direction in its source is the number in the table
    if a.interconnect_gbs is not None:
        assert f"{a.interconnect_gbs:,g} GB/s per direction" in a.interconnect_source
    # a peak quoted with sparsity is halved: "X with sparsity = Y dense" holds Y = X / 2
    for sparse, dense in re.findall(r"([\d,.]+) with sparsity = ([\d,.]+) dense", a.source):
        assert float(dense.replace(",", "")) == pytest.approx(float(sparse.replace(",", "")) / 2, rel=1e-3)


def test_hopper_fp8_is_twice_bf16_and_blackwell_per_gpu_is_the_board_over_eight():
    assert ACCELERATORS["h100"].fp8_tflops == pytest.approx(2 * ACCELERATORS["h100"].bf16_tflops, rel=1e-3)
    assert ACCELERATORS["b200"].bf16_tflops == 36_000 / 8 / 2  # 36 PFLOPS sparse per HGX board of 8


def test_custom_accelerator_file(tmp_path, run_json):
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\nmemory_gib = 48\nbandwidth_gbs = 1000\nbf16_tflops = 200\n')
    acc = accelerator(str(f))
    assert acc.memory_bytes == 48 * 2**30 and acc.peak("bf16") == 200e12
    (row,) = run_json("hardware", "--gpu", str(f))
    assert row["name"] == "mine" and row["memory_gib"] == 48 and "mine.toml" in row["source"]
    rows = run_json("fit", "gpt2", "--gpu", str(f))
    assert {r["accelerator"] for r in rows} == {"mine"}


@pytest.mark.parametrize(
    "text, words",
    [
        ("memory_gib = 48\nbandwidth_gbs = 1000\nbf16_tflops = 1\n", "missing field 'name'"),
        ('name = "x"\nmemory_gib = -1\nbandwidth_gbs = 1000\nbf16_tflops = 1\n', "memory_gib must be a positive"),
        ('name = "x"\nmemory_gib = 1\nbandwidth_gbs = "fast"\nbf16_tflops = 1\n', "bandwidth_gbs must be a number"),
        ('name = "x"\nmemory_gib = 1\nbandwidth_gbs = 1\n', "give bf16_tflops or fp16_tflops"),
        ('name = "x"\nmemory_gib = 1\nbandwidth_gbs = 1\nbf16_tflops = 1\nmemory = 3\n', "unknown field 'memory'"),
        ('name = "x"\nmemory_gib = 1\nbandwidth_gbs = 1\nbf16_tflops = 1\nfp8_tflops = inf\n', "finite"),
        ("name = [\n", "malformed TOML"),
    ],
)
def test_bad_accelerator_file_is_one_line_exit_2(tmp_path, run_cli, text, words):
    f = tmp_path / "gpu.toml"
    f.write_text(text)
    for argv in (["hardware", "--gpu", str(f)], ["fit", "gpt2", "--gpu", str(f)]):
        code, out, err = run_cli(*argv)
        assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1, err


def test_hardware_lists_sources_in_every_format(run_cli, run_json):
    code, out, _ = run_cli("hardware")
    assert code == 0 and "sources:" in out and ACCELERATORS["gaudi3"].source in out
    rows = run_json("hardware")
    assert [r["name"] for r in rows] == list(ACCELERATORS)
    for fmt in ("markdown", "csv"):
        code, out, _ = run_cli("hardware", "--format", fmt)
        assert code == 0 and "mi355x" in out


# ---------------------------------------------------------------- fit


def test_fit_is_the_fewest_devices_memory_plans():
    spec, h100 = archspec.preset("llama-3-70b"), ACCELERATORS["h100"]
    f = fit(spec, h100, "bf16", "inference", 1, 4096, engine="none")  # the whole device (no engine's reserve)
    used = estimate_memory(spec, 1, 4096, "bf16", tensor_parallel=f.tensor_parallel,
                           pipeline_parallel=f.pipeline_parallel).inference_total_bytes  # fmt: skip
    assert used == f.per_device_bytes <= h100.memory_bytes
    # 70B in bf16 is 141 GB of weights: one 80 GiB device cannot hold it; the plan needs two or more
    assert f.devices >= 2
    smaller = [(tp, pp) for tp in (1, 2, 4, 8) for pp in range(1, 9) if tp * pp < f.devices]
    for tp, pp in smaller:  # no layout with fewer devices fits
        try:
            m = estimate_memory(spec, 1, 4096, "bf16", tensor_parallel=tp, pipeline_parallel=pp)
        except archspec.SpecError:
            continue
        assert m.inference_total_bytes > h100.memory_bytes


def test_fit_training_uses_zero():
    spec, h100 = archspec.preset("llama-3-8b"), ACCELERATORS["h100"]
    f = fit(spec, h100, "bf16", "training", 1, 4096)
    m = estimate_memory(spec, 1, 4096, "bf16", zero_stage=f.zero_stage, data_parallel=f.data_parallel,
                        tensor_parallel=f.tensor_parallel)  # fmt: skip
    assert m.training_total_bytes == f.per_device_bytes <= h100.memory_bytes
    # 8B x 16 bytes (AdamW, mixed precision) = 128 GB: one 80 GiB device cannot hold it
    assert f.devices > 1 and estimate_memory(spec, 1, 4096, "bf16").training_total_bytes > h100.memory_bytes
    big = fit(archspec.preset("gpt3-175b"), h100, "bf16", "training", 1, 2048)
    assert big.zero_stage == 3 and "ZeRO 3" in big.layout and big.devices == big.tensor_parallel * big.data_parallel


def test_fit_cli_rows_are_accelerator_by_dtype(run_json):
    rows = run_json("fit", "gpt2", "--gpu", "h100", "--gpu", "rtx4090")
    assert [(r["accelerator"], r["dtype"]) for r in rows] == [
        (g, d) for g in ("h100", "rtx4090") for d in STORAGE
    ]  # fmt: skip  every format `memory` knows
    assert all(r["devices"] == 1 and r["seq_len"] == 1024 and r["seq_len_clamped"] for r in rows)


def _lora_plan(spec, batch, seq_len, base, tp, dp, zero):
    # fit plans a LoRA fine-tune with gradient checkpointing (full recomputation), as peft's guides run it
    return estimate_memory(spec, batch, seq_len, "bf16", weights=base, lora_rank=16, lora_targets="all",
                           zero_stage=zero, data_parallel=dp, tensor_parallel=tp, recompute="full")  # fmt: skip


@pytest.mark.parametrize(
    "model, gpu, base",
    [
        pytest.param("llama-3-70b", "rtx4090", "bf16", marks=pytest.mark.slow),
        ("llama-3-70b", "rtx4090", "nf4"),  # the fast set's: a quantised base
        pytest.param("llama-2-7b", "rtx4090", "bf16", marks=pytest.mark.slow),
        pytest.param("llama-3-70b", "h100", "int8", marks=pytest.mark.slow),
    ],
)
def test_fit_lora_is_what_memory_says_fits_and_one_fewer_device_does_not(model, gpu, base):
    spec, acc = archspec.preset(model), ACCELERATORS[gpu]
    f = fit(spec, acc, base, "lora", 1, 2048)
    assert (f.task, f.dtype, f.lora_rank, f.lora_targets, f.pipeline_parallel) == ("lora", base, 16, "all", 1)
    m = _lora_plan(spec, 1, 2048, base, f.tensor_parallel, f.data_parallel, f.zero_stage)
    assert m.lora["base_bytes"] > 0 and m.weights_format == base  # the frozen base, stored as asked
    assert m.training_total_bytes == f.per_device_bytes <= acc.memory_bytes
    assert f.devices == f.tensor_parallel * f.data_parallel
    if f.devices == 1:  # with gradient checkpointing llama-2-7b fits one RTX 4090, llama-3-70b in int8 one H100
        assert _lora_plan(spec, 1, 2048, base, 1, 1, 0).training_total_bytes <= acc.memory_bytes
        return
    n = f.devices - 1  # every layout of one fewer device that memory accepts holds more than the device
    tried = 0
    for tp in (1, 2, 4, 8):
        if n % tp:
            continue
        for zero in ZERO_STAGES:
            try:
                less = _lora_plan(spec, 1, 2048, base, tp, n // tp, zero)
            except archspec.SpecError:
                continue
            tried += 1
            assert less.training_total_bytes > acc.memory_bytes, (tp, n // tp, zero)
    assert tried


@pytest.mark.slow  # every accelerator and rank planned: seconds; the other LoRA fit tests are fast
def test_fit_lora_qlora_base_and_rank_reach_the_plan(run_json):
    spec, a100 = archspec.preset("llama-2-7b"), ACCELERATORS["a100"]
    q = fit(spec, a100, "nf4", "lora", 4, 2048, lora_rank=64, lora_targets="attention")
    m = estimate_memory(spec, 4, 2048, "bf16", weights="nf4", lora_rank=64, lora_targets="attention", recompute="full")
    assert q.devices == 1 and q.layout == "one device" and q.per_device_bytes == m.training_total_bytes
    bf16, nf4 = (fit(spec, a100, d, "lora", 4, 2048).per_device_bytes for d in ("bf16", "nf4"))
    assert bf16 > nf4  # the frozen base in bf16 holds more than in nf4
    rows = run_json("fit", "llama-2-7b", "--task", "lora", "--gpu", "a100", "--batch", "4", "--seq-len", "2048",
                    "--lora-rank", "64", "--lora-targets", "attention")  # fmt: skip
    assert [r["dtype"] for r in rows] == ["bf16", "int8", "nf4"]
    assert rows[2]["per_device_bytes"] == m.training_total_bytes and rows[2]["lora_rank"] == 64
    assert rows[2]["lora_targets"] == "attention"
    with pytest.raises(archspec.SpecError, match="adapters of task lora, not training"):
        fit(spec, a100, "bf16", "training", lora_rank=8)
    with pytest.raises(archspec.SpecError, match="lora plans weights in bf16, int8, nf4, not fp8"):
        fit(spec, a100, "fp8", "lora")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--task", "pretrain"], "invalid choice: 'pretrain'"),
        (["--lora-rank", "8"], "--lora-rank changes nothing without --task lora"),
        (["--task", "training", "--lora-targets", "mlp"], "--lora-targets changes nothing without --task lora"),
        (["--task", "lora", "--lora-rank", "0"], "must be greater than 0"),
        (["--task", "lora", "--lora-rank", "x"], "--lora-rank"),
        (["--task", "lora", "--lora-targets", "bogus"], "unknown LoRA target 'bogus'"),
        (["--task", "lora", "--lora-targets", ""], "unknown LoRA target ''"),
        (["--gpu", "h900"], "unknown accelerator 'h900'"),
        (["--seq-len", "0"], "must be greater than 0"),
        (["--batch", "x"], "is not a number"),
    ],
)
def test_fit_bad_input_is_one_line_exit_2(run_cli, argv, words):
    code, out, err = run_cli("fit", "gpt2", *argv)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- compare and params


def test_compare_counts_every_row_at_one_length(run_json, run_cli):
    rows = run_json("compare", "gpt2", "mixtral-8x7b", "--seq-len", "2048")
    gpt2, mixtral = rows
    assert gpt2["seq_len"] == 1024 and gpt2["seq_len_clamped"]  # its context, said so
    assert mixtral["seq_len"] == 2048 and not mixtral["seq_len_clamped"]
    f = archspec.count_flops(archspec.preset("mixtral-8x7b"), 1, 2048)
    assert mixtral["forward_per_token"] == f.forward // 2048 or mixtral["forward_per_token"] == f.forward / 2048
    code, out, _ = run_cli("compare", "gpt2", "mixtral-8x7b")
    assert "FLOPs/token at 4,096" in out and "(at 1,024*)" in out and " active " in out.splitlines()[0] + " "


def test_params_table_shows_active_beside_total_for_moe(run_cli):
    c = archspec.count_params(archspec.preset("mixtral-8x7b"))
    _, out, _ = run_cli("params", "mixtral-8x7b")
    assert re.search(rf"active per token\s+\S+\s+{c.active:,}", out)
    _, out, _ = run_cli("params", "gpt2")
    assert "active per token" not in out


# ---------------------------------------------------------------- sweep


def test_sweep_dotted_field_is_the_set_override(run_json):
    rows = run_json("sweep", "mixtral-8x7b", "--vary", "mlp.top_k=1,2")
    for row in rows:
        spec = archspec.preset("mixtral-8x7b").replace(**{"mlp.top_k": row["mlp.top_k"]})
        assert row["active"] == archspec.count_params(spec).active
    assert rows[0]["active"] < rows[1]["active"]


def test_zip_varies_in_lock_step(run_json):
    rows = run_json("sweep", "gpt2", "--vary", "d_model=512,1024", "--vary", "n_heads=8,16", "--zip",
                    "d_model,n_heads")  # fmt: skip
    assert [(r["d_model"], r["n_heads"]) for r in rows] == [(512, 8), (1024, 16)]


def test_keep_d_head_lets_the_heads_follow(run_json):
    rows = run_json("sweep", "gpt2", "--vary", "d_model=512:1024:256", "--keep", "d_head")
    assert [(r["d_model"], r["n_heads"]) for r in rows] == [(512, 8), (768, 12), (1024, 16)]
    spec = archspec.preset("gpt2").replace(d_model=1024, n_heads=16)
    assert rows[-1]["total"] == archspec.count_params(spec).total


def test_refused_combinations_are_skipped_one_line_each_exit_1(run_cli):
    code, out, err = run_cli("sweep", "gpt2", "--vary", "d_model=760:792:8", "--format", "json")
    rows = json.loads(out)
    assert code == 1 and [r["d_model"] for r in rows] == [768, 792]
    lines = err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("archspec: skipped gpt2 with d_model=") for line in lines)
    assert "not divisible by n_heads=12" in lines[0]
    code, _, err = run_cli("sweep", "gpt2", "--vary", "d_model=768,1536")
    assert code == 0 and err == ""


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--vary", "mlp.top_kk=1,2"], "has no field 'top_kk'"),
        (["--vary", "mpl.top_k=1"], "is not a table of the spec"),
        (["--vary", "d_model=512,1024", "--vary", "n_heads=8", "--zip", "d_model,n_heads"], "as many values"),
        (["--vary", "d_model=512,1024", "--zip", "d_model,n_head"], "is not a --vary field"),
        (["--vary", "d_model=512,1024", "--zip", "d_model"], "two or more"),
        (["--vary", "n_heads=8,16", "--keep", "d_head"], "needs --vary d_model"),
        (["--vary", "d_model=512", "--vary", "n_heads=8", "--keep", "d_head"], "do not --vary n_heads"),
        (["--vary", "d_model=512", "--keep", "d_ff"], "invalid choice: 'd_ff'"),
        (["--vary", "d_model=1000,1001"], "no combination of the sweep is a valid spec"),
    ],
)
def test_sweep_bad_input_is_one_line_exit_2(run_cli, argv, words):
    code, out, err = run_cli("sweep", "gpt2", *argv)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------- honest options


def test_set_null_clears_an_optional_field(run_json):
    (shown,) = run_json("show", "mistral-7b", "--set", "attention.sliding_window=null")
    spec = archspec.preset("mistral-7b")
    assert spec.attention.sliding_window is not None
    cleared = spec.replace(**{"attention.sliding_window": None})
    (counted,) = run_json("params", "mistral-7b", "--set", "attention.sliding_window=null")
    assert counted["total"] == archspec.count_params(cleared).total
    assert shown["mixer"] == "standard" or shown["mixer"]["sliding_window"] is None


@pytest.mark.parametrize(
    "argv, words",
    [
        (["import", "tests/data/hf/mixtral-8x7b-instruct.json", "--format", "table"], "invalid choice: 'table'"),
        (
            ["import", "tests/data/hf/mixtral-8x7b-instruct.json", "--format", "json", "-o", "x.toml"],
            "with -o FILE the suffix of FILE chooses",
        ),
        (["list", "--set", "d_model=1"], "`archspec list` has no option --set"),
        (["schema", "--set", "d_model=1"], "`archspec schema` has no option --set"),
        (["hardware", "--set", "d_model=1"], "`archspec hardware` has no option --set"),
        (["--print-completion", "tcsh"], "invalid choice: 'tcsh'"),
    ],
)
def test_options_that_would_do_nothing_are_refused(run_cli, monkeypatch, argv, words):
    monkeypatch.chdir(ROOT)
    code, out, err = run_cli(*argv)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1, err


def test_schema_help_names_json_as_its_default(run_cli):
    _, out, _ = run_cli("schema", "--help")
    assert "json (default)" in out and "table (default)" not in out


@pytest.mark.parametrize("shell, words", [("bash", "complete"), ("zsh", "#compdef"), ("fish", "complete -c")])
def test_completion_script_names_every_command(run_cli, shell, words):
    from archspec.cli import COMMANDS

    code, out, _ = run_cli("--print-completion", shell)
    assert code == 0 and words in out
    assert all(name in out for name in COMMANDS)


# ---------------------------------------------------------------- tables on a terminal


def test_a_wide_table_wraps_to_the_width():
    rows = [["gpt3-175b", "96 layers", "12288", "a value with several words in it", "174.6B"]]
    headers = ["model name", "layers of the stack", "d_model", "what it says", "params total"]
    full = table(rows, headers, "table", width=1000)
    narrow = table(rows, headers, "table", width=60)
    assert max(map(len, full.splitlines())) > 60 >= max(map(len, narrow.splitlines()))
    assert all(w in narrow for w in ("gpt3-175b", "12288", "174.6B", "several"))
    records = table(rows, headers, "table", width=20)  # too narrow even wrapped: one line per field
    assert re.search(r"^params total +174.6B$", records, re.M) and "\n\n" not in records


def on_terminal(argv, columns: int, env: dict | None = None) -> str:
    """Run archspec with its stdout on a pseudo-terminal `columns` wide: what a person sees."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")} | (env or {})
    proc = subprocess.Popen([sys.executable, "-m", "archspec", *argv], stdout=follower, stderr=subprocess.PIPE,
                            env=env, cwd="/")  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode()


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_tables_fit_the_terminal_and_colour_only_there():
    seen = on_terminal(["compare", "gpt2", "mixtral-8x7b"], 80)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", seen)
    table_lines = plain.split("\r\n\r\n")[0].splitlines()
    assert max(len(line) for line in table_lines) <= 80 and "mixtral-8x7b" in plain
    assert "\x1b[1m" in seen  # bold headers on a terminal
    assert "\x1b[" not in on_terminal(["compare", "gpt2"], 80, {"NO_COLOR": "1"})
    piped = subprocess.run([sys.executable, "-m", "archspec", "compare", "gpt2", "mixtral-8x7b"],
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})  # fmt: skip
    assert "\x1b[" not in piped.stdout and max(len(x) for x in piped.stdout.splitlines()) > 80  # full width


# ---------------------------------------------------------------- the clone


@pytest.mark.slow  # a fresh interpreter imports torch: seconds
def test_import_archspec_from_the_repository_root():
    # the source folder archspec/ shadows any install here; hide the editable install's finder too, as
    # after the README's `pip install .`, so that only the clone's own folders can answer
    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in repr(f)]; "
        "import archspec, archspec.presets, archspec.reference; "
        "print(archspec.__file__); print(sys.modules['archspec.presets'].DIR); "
        "print(archspec.count_params(archspec.preset('gpt2')).total)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    where, presets, total = run.stdout.split()
    assert Path(where) == ROOT / "archspec" / "__init__.py" and Path(presets) == ROOT / "presets"
    assert int(total) == 124_439_808
