"""The argument parser and the options several commands share: argparse with one-line errors, the
number types, MODEL/--format/--set, the workload, storage and accelerator options."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from archspec.cli.output import EXIT_BAD_INPUT, write_stdout
from archspec.core.errors import SpecError, clip, one_line, shown
from archspec.render.text import FORMATS


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2, which remembers the options given (`given`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given: set[str] = set()  # dests of the options on the command line
        self.command: str | None = None  # the subcommand this parser was built for, if only one

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # argparse calls this for each option it takes from the command line (never for a default)
        if action.option_strings:
            self.given.add(action.dest)
        return super()._get_values(action, arg_strings)

    def _print_message(self, message: str, file: Any = None) -> None:
        # argparse ignores a failed write; --help and --version on stdout go the one output path
        if not message:
            return
        if file is sys.stdout:
            write_stdout(message)
        else:
            (file or sys.stderr).write(message)

    def error(self, message: str) -> NoReturn:
        prog = self.prog
        if self.command and message.startswith("unrecognized arguments: "):
            prog = f"archspec {self.command}"
            extra = message.split(": ", 1)[1].split()
            option = next((a.split("=", 1)[0] for a in extra if a.startswith("-")), None)
            if option:  # an option another command has, or none has: named, not ignored
                message = f"`{prog}` has no option {option}"
        elif message.startswith("ambiguous option: "):  # --lora on fit: a prefix of two of its options
            option, _, matches = message.split(": ", 1)[1].partition(" could match ")
            message = f"`{prog}` has no option {option.split('=', 1)[0]} (a prefix of {matches})"
        sys.stderr.write(f"archspec: error: {one_line(message)} (see `{prog} --help`)\n")
        sys.exit(EXIT_BAD_INPUT)


def number_type(kind: str, *, minimum: float | None = None, strict_min: bool = True, integer: bool = True,
                length: bool = False):  # fmt: skip
    """The type of a numeric option: archspec.io.loading.parse_number (300e9, 50_257, 300B, 1.5T; a token
    `length` takes 8K as 8,192), then the bound."""

    def parse(text: str):
        from archspec.io.loading import parse_number

        try:
            value = parse_number(text, kind, integer=integer, length=length)
        except SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if minimum is not None and (value <= minimum if strict_min else value < minimum):
            bound = f"greater than {minimum:g}" if strict_min else f"at least {minimum:g}"
            raise argparse.ArgumentTypeError(f"{kind}: must be {bound}, got {clip(text.strip())}")
        return value

    parse.__name__ = kind
    return parse


positive_int = number_type("a positive whole number", minimum=0)


positive_length = number_type("a positive number of tokens", minimum=0, length=True)  # 8K = 8,192 tokens


positive_number = number_type("a positive number", minimum=0, integer=False)


def mfu(text: str) -> float:
    value = positive_number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return float(value)


# torch's dtype names (and torch.* spellings) for --dtype, beside the short names
DTYPE_HELP = "bytes per value (default bf16; torch names such as bfloat16 or float8_e4m3fn are accepted too)"


def dtype_name(text: str) -> str:
    """'bfloat16' or 'torch.bfloat16' -> 'bf16'; other names pass through to the option's choices."""
    from archspec.core.vocab import dtype_key

    return dtype_key(text)


def weights_name(text: str) -> str:
    """--weights: one storage format, a map by role or a layout name (archspec.memory.roles), canonical."""
    from archspec.memory.roles import canonical_weights

    try:
        return canonical_weights(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--weights: ")) from None


def common_args(p: argparse.ArgumentParser, models: str | None = "+", overrides: bool = True) -> None:
    """MODEL arguments (nargs `models`, None for none), --format, and --set where the command reads models."""
    if models:
        p.add_argument(
            "models",
            metavar="MODEL",
            nargs=models,
            help="a preset name (see `archspec list`) or a spec file (.toml, .json, .yaml)",
        )
    p.add_argument(
        "--format",
        "-f",
        choices=FORMATS,
        default="table",
        help="output format: table (default), markdown, json (exact numbers), csv",
    )
    p.set_defaults(overrides=[])
    if not overrides:  # a command that reads no spec: --set is refused by name, not ignored
        return
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="FIELD=VALUE",
        default=[],
        help="override a spec field for every MODEL (repeatable), e.g. --set d_model=1024",
    )


def workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", "-b", type=positive_int, default=1, help="sequences per step (default 1)")
    p.add_argument(
        "--seq-len",
        "-s",
        type=positive_length,
        help="tokens per sequence (target length for an encoder-decoder; default: max_positions; 8K = 8,192)",
    )
    p.add_argument("--src-len", type=positive_length, help="encoder-decoder source length (default: --seq-len)")


def storage_args(p: argparse.ArgumentParser, weights_help: str) -> None:
    """--weights, --experts, --kv-dtype: storage formats from the one table (archspec.memory.STORAGE)."""
    from archspec.memory import KV_DTYPES, STORAGE
    from archspec.memory.roles import LAYOUTS, ROLES

    p.add_argument(
        "--weights",
        type=weights_name,
        metavar="FORMAT|MAP|LAYOUT",
        help=f"weight storage: one format ({', '.join(STORAGE)}; bits per value: docs/inference.md), a map by "
        f"role (e.g. mlp=fp8_row,attention=bf16; roles {', '.join(ROLES)}; a role left out is bf16) or a "
        f"released checkpoint's layout ({', '.join(LAYOUTS)}; docs/deployment.md); {weights_help}",
    )
    p.add_argument(
        "--experts",
        type=dtype_name,
        choices=list(STORAGE),
        metavar="DTYPE",
        help="storage of the routed experts alone (e.g. mxfp4, as gpt-oss ships them)",
    )
    p.add_argument("--kv-dtype", type=dtype_name, choices=list(KV_DTYPES),
                   help="KV cache (default: the weights' dtype where it is fp32, bf16 or fp16, else bf16, as "
                   "the engines keep it unless told otherwise)")  # fmt: skip


def memory_fraction(text: str) -> float:
    value = number_type("a number", integer=False)(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text.strip()}")
    return float(value)


def engine_args(p: argparse.ArgumentParser) -> None:
    """--engine and its reserve on each device (archspec.memory.runtime): --gpu-memory-utilization,
    --max-batched-tokens, --context-reserve."""
    from archspec.memory.runtime import DEFAULT_ENGINE, ENGINES

    p.add_argument("--engine", choices=list(ENGINES),
                   help=f"the serving engine: its reserve on each device and how it pages the KV cache (default "
                   f"{DEFAULT_ENGINE}: gpu_memory_utilization 0.9, blocks of 16 tokens; sglang: its "
                   "mem_fraction_static formula, pages of 1 token; llama.cpp: no fraction, 256-cell contexts; "
                   "none: the whole device, unpaged)")  # fmt: skip
    p.add_argument("--gpu-memory-utilization", "--mem-fraction-static", type=memory_fraction, metavar="F",
                   help="the engine's memory fraction: the share of each device it uses, in (0, 1] (vLLM's "
                   "--gpu-memory-utilization, SGLang's --mem-fraction-static); default: the engine's")  # fmt: skip
    p.add_argument("--max-batched-tokens", type=positive_length, metavar="N",
                   help="the largest prefill chunk, whose activations the engine reserves (vLLM's "
                   "--max-num-batched-tokens, SGLang's --chunked-prefill-size, llama.cpp's --ubatch-size); "
                   "default: the engine's for the device")  # fmt: skip
    p.add_argument("--context-reserve", type=gib_size, metavar="GIB",
                   help="GiB of each device for the CUDA context, communication buffers and allocator slack "
                   "(default: 3.2 %% of the device, from vLLM's memory profiles; none: 0)")  # fmt: skip


def gib_size(text: str) -> int:
    """A non-negative number of GiB, in bytes."""
    value = number_type("a number of GiB", integer=False)(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0 GiB, got {text.strip()}")
    return int(value * 2**30)


def price_option(p: argparse.ArgumentParser, what: str) -> None:
    """--price-per-hour: what one device costs an hour, the user's own figure (archspec.plan.cost)."""
    p.add_argument("--price-per-hour", type=positive_number, metavar="PRICE",
                   help=f"what one device costs an hour, in your currency (archspec has no prices of its own; "
                   f"default: the price_per_hour of a --gpu FILE.toml): {what}")  # fmt: skip


def gpu_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--gpu",
        action="append",
        metavar="NAME|FILE",
        help=f"{what} (repeatable): a name from `archspec hardware`, or a .toml file describing your own "
        "(name, memory_gib, bandwidth_gbs, bf16_tflops, ...; see docs/planning.md)",
    )


ACCELERATOR_HELP = "a name from `archspec hardware` (any case), or a .toml file describing your own (see the README)"


class OneGpu(argparse.Action):
    """--gpu of a command that plans on one accelerator: a second --gpu is refused, never silently the one used."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest) is not None:
            first = shown(getattr(namespace, self.dest), 100)
            raise argparse.ArgumentError(self, f"given twice ({first}, then {shown(values, 100)}); this command plans "
                                         "on one accelerator (fit, hardware and report take several)")  # fmt: skip
        setattr(namespace, self.dest, values)


def one_gpu_option(p: argparse.ArgumentParser, what: str, required: bool = False) -> None:
    """--gpu NAME|FILE for a command that plans on one accelerator, as fit's and hardware's --gpu take it."""
    p.add_argument("--gpu", required=required, action=OneGpu, metavar="NAME|FILE", help=f"{what}: {ACCELERATOR_HELP}")


def accelerators(names: list[str] | None):
    """The accelerators named by --gpu (table names or .toml files), or the whole table. One named twice
    counts once; two of one name from different places (two files) are refused by name."""
    from archspec.plan.hardware import ACCELERATORS, accelerator

    if not names:
        return list(ACCELERATORS.values())
    out, where = [], {}
    for n in names:
        acc = accelerator(n)
        if acc.name not in where:
            where[acc.name] = n
            out.append(acc)
        elif acc != out[[a.name for a in out].index(acc.name)]:
            raise SpecError(f"--gpu {clip(n, 200)} and --gpu {clip(where[acc.name], 200)} both describe an accelerator "
                            f"named {acc.name!r}; give each its own name")  # fmt: skip
    return out
