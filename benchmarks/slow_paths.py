"""Plans at the extremes (huge models, huge batches, deep stacks, outputs that take no file), each timed in
the Python API and on the command line, with fit's layout search beside the plain search it bounds
(archspec.plan.fit.unbounded: no refusal from the whole model or the largest layout, every degree searched
from one device up by halving).

    python benchmarks/slow_paths.py [--budget 1.0]     # writes its section of benchmarks/RESULTS.md

Figures are processor seconds (user + system) of one run each: the machine is shared, and its load is in
RESULTS.md. An API path runs in a fresh interpreter (archspec imported and its inputs made, untimed), as a
script meets it. A command's figure is the whole process; the start-up of `archspec params gpt2` (the
interpreter, archspec's imports, one small answer), run just before it, is printed beside it and taken off
before the command is judged. Exits 1 when a path takes more than `budget` seconds, in the API or
on the command line over the start-up. What each path answers is printed beside its time.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import run  # writes the figures into RESULTS.md (this folder is on sys.path)
from timing import byte_compile_archspec

import archspec
from archspec.core.errors import SpecError
from archspec.hf import from_mapping
from archspec.io.loading import build_spec
from archspec.memory import STORAGE
from archspec.plan.fit import DTYPES, fit, unbounded
from archspec.plan.hardware import ACCELERATORS, accelerator
from archspec.plan.inference import estimate_inference

ROOT = Path(__file__).resolve().parent.parent
ARCHSPEC = [sys.executable, "-m", "archspec"]
WIDE = ["--set", "d_model=65536", "--set", "n_heads=512", "--set", "d_ff=262144"]
GPU_FILE = 'name = "lab-gpu"\nmemory_gib = 96\nbandwidth_gbs = 4000\nbf16_tflops = 900\n'


def gpt3(layers: int) -> archspec.ModelSpec:
    """GPT-3 175B's block at d_model 65,536: 98,304 layers are 5 x 10^15 parameters, 24,576 are 1.3 x 10^15."""
    return archspec.preset("gpt3-175b").replace(decoder_layers=layers, d_model=2**16, n_heads=512, d_ff=2**18)


def qwen35_raw(layers: int) -> dict:
    """Qwen3.5-35B-A3B's released config.json (tests/data/hf) at `layers` layers, its interval kept."""
    raw = json.loads((ROOT / "tests" / "data" / "hf" / "qwen3.5-35b-a3b.json").read_text(encoding="utf-8"))
    raw["text_config"]["num_hidden_layers"] = layers
    del raw["text_config"]["layer_types"]
    return raw


def every(spec, task: str, accs=None, formats=None, batch: int = 1) -> str:
    """fit of every accelerator and format, as `archspec fit` runs it: the devices of the fewest that fit."""
    memo, found = {}, []
    for acc in accs or ACCELERATORS.values():
        for dtype in formats or (tuple(STORAGE) if task == "inference" else DTYPES[task]):
            found.append(fit(spec, acc, dtype, task, batch, 2048, memo))
    held = [f.devices for f in found if f.devices]
    return f"{len(held)} of {len(found)} fit" + (f", {min(held):,} to {max(held):,} devices" if held else "")


def refused(call) -> str:
    try:
        call()
    except SpecError as exc:
        return f"refused: {str(exc)[:60]}"
    return "answered"


def qwen35(layers: int) -> archspec.ModelSpec:
    return build_spec(from_mapping(qwen35_raw(layers), "qwen3.5-35b-a3b").data)


def api_paths(gpu_file: str) -> list[tuple[str, object, object]]:
    """(name, setup, run): run(*setup()) is timed, setup() is not."""
    mixtral, llama = (lambda: (archspec.preset("mixtral-8x7b"),)), (lambda: (archspec.preset("llama-3-8b"),))
    big, bigger, qwen = (lambda: (gpt3(24_576),)), (lambda: (gpt3(98_304),)), (lambda: (qwen35(10**6),))
    return [
        ("fit 1.3e15 params, inference, every GPU x format", big, lambda s: every(s, "inference")),
        ("fit 1.3e15 params, training, every GPU x format", big, lambda s: every(s, "training")),
        ("fit 1.3e15 params, lora, every GPU x format", big, lambda s: every(s, "lora")),
        ("fit 5e15 params, inference, every GPU x format", bigger, lambda s: every(s, "inference")),
        ("fit 5e15 params, training, every GPU x format", bigger, lambda s: every(s, "training")),
        ("fit 5e15 params, lora, every GPU x format", bigger, lambda s: every(s, "lora")),
        ("fit 1.3e15 params, inference, h100", big, lambda s: every(s, "inference", [ACCELERATORS["h100"]])),
        ("fit 1.3e15 params, inference, a GPU file", big, lambda s: every(s, "inference", [accelerator(gpu_file)])),
        ("inference mixtral-8x7b, batch 1e12", mixtral, lambda s: f"fits {estimate_inference(s, 'h100', 10**12).fits}"),
        ("inference llama-3-8b, batch and prompt 1e12", llama,
         lambda s: f"fits {estimate_inference(s, 'h100', 10**12, 10**12).fits}"),
        ("memory llama-3-8b, batch 1e12 x 1e9 tokens", llama,
         lambda s: f"{archspec.estimate_memory(s, 10**12, 10**9).inference_total_bytes:.3e} bytes"),
        ("fit llama-3-8b, batch 1e12, every GPU x format", llama, lambda s: every(s, "inference", batch=10**12)),
        ("Qwen3.5 config of 10^6 layers: read", lambda: (qwen35_raw(10**6),),
         lambda raw: f"{build_spec(from_mapping(raw, 'qwen3.5').data).n_layers:,} layers"),
        ("Qwen3.5 10^6 layers: params", qwen, lambda s: f"{archspec.count_params(s).total:.3e}"),
        ("Qwen3.5 10^6 layers: memory", qwen,
         lambda s: f"{archspec.estimate_memory(s).training_total_bytes:.3e} bytes"),
        ("Qwen3.5 10^6 layers: inference, h100", qwen, lambda s: f"fits {estimate_inference(s, 'h100').fits}"),
        ("Qwen3.5 10^6 layers: fit inference, every GPU x format", qwen, lambda s: every(s, "inference")),
        ("Qwen3.5 10^6 layers: fit training, every GPU x format", qwen, lambda s: every(s, "training")),
        ("sweep d_model=1:1e20", llama, lambda s: refused(lambda: archspec.sweep(s, ["d_model=1:1e20"]))),
    ]  # fmt: skip


def cli_paths(folder: Path, gpu_file: str, config: str) -> list[tuple[str, list[str]]]:
    layers = ["--set", "decoder_layers=24576", *WIDE]
    out = str(folder / "out")
    (folder / "out").mkdir()
    eight = ["gpt2", "llama-3-8b", "mixtral-8x7b", "gemma-3-1b", "qwen3-8b", "mistral-7b", "deepseek-v3",
             "nemotron-h-56b"]  # fmt: skip
    return [
        ("fit 1.3e15 params, inference, every GPU x format", ["fit", "gpt3-175b", *layers]),
        ("fit 1.3e15 params, training, every GPU x format", ["fit", "gpt3-175b", *layers, "--task", "training"]),
        ("fit 1.3e15 params, lora, every GPU x format", ["fit", "gpt3-175b", *layers, "--task", "lora"]),
        ("fit 5e15 params, inference, every GPU x format",
         ["fit", "gpt3-175b", "--set", "decoder_layers=98304", *WIDE]),
        ("fit 1.3e15 params, inference, h100", ["fit", "gpt3-175b", *layers, "--gpu", "h100"]),
        ("fit 1.3e15 params, inference, a GPU file", ["fit", "gpt3-175b", *layers, "--gpu", gpu_file]),
        ("inference mixtral-8x7b, batch 1e12", ["inference", "mixtral-8x7b", "--gpu", "h100", "--batch", "1e12"]),
        ("inference llama-3-8b, batch and prompt 1e12",
         ["inference", "llama-3-8b", "--gpu", "h100", "--batch", "1e12", "--prompt-len", "1e12"]),
        ("memory llama-3-8b, batch 1e12 x 1e9 tokens", ["memory", "llama-3-8b", "--batch", "1e12", "--seq-len", "1e9"]),
        ("Qwen3.5 10^6 layers: params", ["params", config]),
        ("Qwen3.5 10^6 layers: memory", ["memory", config]),
        ("Qwen3.5 10^6 layers: inference, h100", ["inference", config, "--gpu", "h100"]),
        ("Qwen3.5 10^6 layers: fit inference, every GPU x format", ["fit", config]),
        ("sweep d_model=1:1e20", ["sweep", "llama-3-8b", "--vary", "d_model=1:1e20"]),
        ("report of eight models -o DIR", ["report", *eight, "-o", out]),
        ("plot breakdown -o DIR", ["plot", "breakdown", "llama-3-8b", "-o", out]),
    ]  # fmt: skip


def processor_seconds(call) -> tuple[float, object]:
    t0 = time.process_time()
    out = call()
    return time.process_time() - t0, out


def command_seconds(argv: list[str]) -> tuple[float, str]:
    """Processor seconds of the command (the child's user + system time) and what it answered: its exit code,
    and on a refusal its message."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([*ARCHSPEC, *argv], capture_output=True, text=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    said = {0: "answered", 1: "answered: it does not fit"}.get(done.returncode)
    return cpu, said or f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1][:70]}"


def searches() -> list[tuple[str, object, object]]:
    """fit's layout search, to be timed beside the plain search: (name, setup, run) as api_paths."""
    return [
        ("5e15 params, inference, every GPU x format", lambda: (gpt3(98_304),), lambda s: every(s, "inference")),
        ("1.3e15 params, lora, every GPU x format", lambda: (gpt3(24_576),), lambda s: every(s, "lora")),
        ("Qwen3.5 10^6 layers, inference, every GPU x format", lambda: (qwen35(10**6),),
         lambda s: every(s, "inference")),
        ("llama-3-8b, inference, every GPU x format", lambda: (archspec.preset("llama-3-8b"),),
         lambda s: every(s, "inference")),
        ("mixtral-8x7b, training, every GPU x format", lambda: (archspec.preset("mixtral-8x7b"),),
         lambda s: every(s, "training")),
    ]  # fmt: skip


def one(which: str, index: int, gpu_file: str) -> None:
    """Run path `index` of api_paths or searches (`which`; "plain": a search without its bounds) in this fresh
    process: its setup, then the timed call; print the seconds and the answer."""
    _, setup, call = (api_paths(gpu_file) if which == "api" else searches())[index]
    args = setup()
    if which == "plain":
        with unbounded():
            took, said = processor_seconds(lambda: call(*args))
    else:
        took, said = processor_seconds(lambda: call(*args))
    print(json.dumps([took, str(said)]))


def cold(which: str, index: int, gpu_file: str = "") -> tuple[float, str]:
    """A path timed in a fresh interpreter (archspec imported, its inputs made), as a script meets it."""
    argv = [sys.executable, __file__, "--one", which, str(index), "--gpu-file", gpu_file]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    took, said = json.loads(done.stdout.strip().splitlines()[-1])
    return took, said


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds a path may take (default 1)")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # one path, in a process of its own
    ap.add_argument("--gpu-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        one(args.one[0], int(args.one[1]), args.gpu_file)
        return 0
    byte_compile_archspec()  # commands run from bytecode, as after a wheel install
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        gpu_file = str(folder / "lab-gpu.toml")
        Path(gpu_file).write_text(GPU_FILE, encoding="utf-8")
        config = folder / "config.json"
        config.write_text(json.dumps(qwen35_raw(10**6)), encoding="utf-8")
        print("| path | API s | answer |")
        print("|---|---:|---|")
        for i, (name, _, _) in enumerate(api_paths(gpu_file)):
            took, said = cold("api", i, gpu_file)
            worst = max(worst, took)
            print(f"| {name} | {took:.2f} | {said} |")
        print("\n| command | s | start-up s | s over start-up | answer |")
        print("|---|---:|---:|---:|---|")
        for name, argv in cli_paths(folder, gpu_file, str(config)):
            floor, _ = command_seconds(["params", "gpt2"])  # paired: a slow spell weighs on both
            took, said = command_seconds(argv)
            worst = max(worst, took - floor)
            print(f"| {name} | {took:.2f} | {floor:.2f} | {took - floor:.2f} | {said} |")
    print("\n| layout search | bounded s | plain s | same answers |")
    print("|---|---:|---:|---|")
    for i, (name, _, _) in enumerate(searches()):
        (bounded, a), (plain, b) = cold("bounded", i), cold("plain", i)
        print(f"| {name} | {bounded:.2f} | {plain:.2f} | {a == b} ({a}) |")
        worst = max(worst, bounded) if a == b else float("inf")
    print(f"\nslowest path: {worst:.2f} s (budget {args.budget:g} s)")
    return 0 if worst <= args.budget else 1


if __name__ == "__main__":
    if "--one" in sys.argv:  # one path timed in a process of its own: the parent writes the figures
        sys.exit(main())
    sys.exit(run("slow_paths.py", main))
