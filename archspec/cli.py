"""The `archspec` command line: a thin renderer over the pure functions of the package.

Every command takes MODEL arguments (a preset name or a spec file), ``--format`` and ``--set``.
Exit codes: 0 done, 1 a check found a mismatch, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from archspec.errors import NoAdapter, SpecError, clip, one_line
from archspec.render import FORMATS

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2

ROUNDING_NOTE = (
    "Counts rounded for reading (K = 10^3, M = 10^6, B = 10^9, T = 10^12); --format json gives exact integers."
)


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
            _write_stdout(message)
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


# ---------------------------------------------------------------- option types


def _number_type(kind: str, *, minimum: float | None = None, strict_min: bool = True, integer: bool = True):
    def parse(text: str):
        from archspec.loading import parse_number

        try:
            value = parse_number(text, kind, integer=integer)
        except SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if minimum is not None and (value <= minimum if strict_min else value < minimum):
            bound = f"greater than {minimum:g}" if strict_min else f"at least {minimum:g}"
            raise argparse.ArgumentTypeError(f"{kind}: must be {bound}, got {clip(text.strip())}")
        return value

    parse.__name__ = kind
    return parse


positive_int = _number_type("a positive whole number", minimum=0)
positive_number = _number_type("a positive number", minimum=0, integer=False)


# ---------------------------------------------------------------- shared plumbing


def _common(p: argparse.ArgumentParser, models: str | None = "+", overrides: bool = True) -> None:
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


def _specs(args: argparse.Namespace, default_all: bool = False):
    from archspec.catalog import preset_names, resolve_model
    from archspec.loading import parse_assignments

    overrides = parse_assignments(args.overrides)
    refs = list(args.models or [])
    if not refs and default_all:
        refs = preset_names()
    return [resolve_model(ref, overrides) for ref in refs]


# the commands that count a config.json of a model_type without an adapter by building transformers' model
MEASURED_COMMANDS = ("params", "compare", "flops")


def _models(args: argparse.Namespace, batch: int = 1, seq_len: int | None = None) -> list:
    """Specs, and for a config.json whose model_type has no adapter, what building transformers' model on
    the meta device measures (archspec.reference.hf_fallback.Measured: labelled measured, never analytic)."""
    from archspec.catalog import resolve_model
    from archspec.loading import parse_assignments

    overrides = parse_assignments(args.overrides)
    out = []
    for ref in list(args.models or []):
        try:
            out.append(resolve_model(ref, overrides))
        except NoAdapter as exc:
            out.append(_measure(exc, args.command, bool(overrides), batch, seq_len))
    return out


def _install_hint(exc: NoAdapter, missing: str) -> str:
    from archspec import hf

    near = hf.nearest_types(exc.raw.get("model_type"))
    return (
        f"{exc.where}: model_type {exc.raw.get('model_type')!r} has no adapter"
        + (f" (nearest supported: {', '.join(near)})" if near else "")
        + f"; without an adapter archspec counts a model by building transformers' model, which needs {missing}: "
        "pip install 'archspec-transformers[hf]'"
    )


def _measure(exc: NoAdapter, command: str, overrides: bool, batch: int, seq_len: int | None):
    if overrides:
        raise SpecError(
            f"{exc.where}: --set changes spec fields, and model_type {exc.raw.get('model_type')!r} has no adapter, "
            "so there is no spec (it is measured by building transformers' model)"
        )
    try:
        from archspec.reference import hf_fallback

        hf_fallback._import()
    except ImportError as err:
        name = (getattr(err, "name", None) or "torch").split(".")[0]
        raise SpecError(
            _install_hint(exc, "torch and transformers" if name not in ("transformers",) else name)
        ) from None
    try:
        return hf_fallback.measure(exc.raw, exc.name, exc.where, batch, seq_len)
    except SpecError as err:
        raise SpecError(f"model_type {exc.raw.get('model_type')!r} has no adapter, and {err}") from None


def _no_spec(exc: NoAdapter, command: str) -> str:
    """The refusal of a command that needs a spec, for a model_type without an adapter."""
    from archspec import hf

    near = hf.nearest_types(exc.raw.get("model_type"))
    return (
        f"{exc.where}: model_type {exc.raw.get('model_type')!r} has no adapter, so there is no spec for "
        f"`archspec {command}`"
        + (f" (nearest supported: {', '.join(near)})" if near else "")
        + "; `archspec params`, `compare` and `flops` count it by building transformers' model"
    )


def _is_measured(m) -> bool:
    return type(m).__name__ == "Measured"


MEASURED_LINE = (
    "not analytic: this model_type has no adapter, so there is no spec; the counts are measured on transformers' model"
)


class OutputError(Exception):
    """Standard output cannot be written (a full disk, a closed file): not the input's fault, one line."""


def _config_notes(ref: str) -> tuple[str, ...]:
    """What reading a Hugging Face config.json told the user (a multimodal wrapper's uncounted towers, an
    alias, a tying that transformers overrides); nothing for a preset or a spec file."""
    from pathlib import Path

    from archspec import loading

    path = Path(ref)
    try:
        if not (loading._is_dir(path) or (path.suffix.lower() == ".json" and loading._is_file(path))):
            return ()
        return tuple(loading.import_config(path).notes)
    except SpecError:  # a spec file, not a config
        return ()


def _emit(text: str) -> None:
    """The one way results reach standard output: written and flushed here, so that a write error is
    raised where main() can say it in one line (a closed pipe is left to main(), which ends quietly)."""
    _write_stdout(text.rstrip("\n") + "\n")


def _write_stdout(text: str | None) -> None:
    try:
        if text is not None:
            sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: stdout already closed
        raise OutputError(str(exc)) from None


def _render(args, objects: list[dict[str, Any]], people: Callable[[], str]) -> None:
    from archspec.render import to_csv, to_json

    if args.format == "json":
        try:
            text = to_json(objects)
        except ValueError as exc:  # a value that is not a finite number, which JSON cannot hold
            raise SpecError(f"a result cannot be written as JSON: {exc}") from None
        _emit(text)
    elif args.format == "csv":
        _emit(to_csv(objects))
    else:
        _emit(people())


# ---------------------------------------------------------------- list


def cmd_list(args) -> int:
    from archspec.catalog import get_preset, preset_names
    from archspec.params import count_params
    from archspec.render import human, table

    objects, rows = [], []
    for name in preset_names():
        p = get_preset(name)
        spec = p.spec
        total = count_params(spec).total
        objects.append(
            {
                "name": name,
                "family": p.family,
                "kind": spec.kind,
                "total": total,
                "summary": p.summary,
                "source": p.source,
            }
        )
        rows.append([name, spec.kind, _layers(spec), spec.d_model, human(total), p.summary])
    _render(
        args,
        objects,
        lambda: (
            table(rows, ["preset", "kind", "layers", "d_model", "params", "summary"], args.format)
            + "\n\n"
            + ROUNDING_NOTE
        ),
    )
    return EXIT_OK


# ---------------------------------------------------------------- show


def cmd_show(args) -> int:
    from archspec.render import table

    specs = _specs(args)
    objects = [
        {"name": s.name, **{k: v for k, v in s.resolved().items() if k != "name"}, "kind": s.kind} for s in specs
    ]

    def people() -> str:
        blocks = []
        for s in specs:
            given = s.model_fields_set
            rows = [[k, _fmt_value(v), "" if k in given else "default"] for k, v in s.resolved().items()]
            rows.append(["(kind)", s.kind, "derived"])
            rows += [[f"({stack} layers)", kinds, "derived"] for stack, kinds in _kind_counts(s).items()]
            blocks.append(table(rows, ["field", "value", ""], args.format))
        return "\n\n".join(blocks)

    _render(args, objects, people)
    return EXIT_OK


def _fmt_value(v: Any) -> str:
    """A value as a spec file writes it: true/false, null, inline tables {key = value} without the
    fields left unset, lists in brackets."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_fmt_value(x)}" for k, x in v.items() if x is not None) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    if isinstance(v, str) and v not in ("none",) and " " in v:
        return repr(v)
    return str(v)


def _kind_counts(spec) -> dict[str, str]:
    """Each stack's layer kinds with their counts, from the per-layer view: {'decoder': '6 x local, 2 x global'}."""
    from archspec.layers import layer_groups

    stacks = {"encoder": spec.encoder_layers, "decoder": spec.decoder_layers}
    return {
        stack: ", ".join(f"{g.count:,} x {g.kind}" for g in layer_groups(spec, depth))
        for stack, depth in stacks.items()
        if depth
    }


def _layers(spec) -> str:
    if spec.kind == "encoder-decoder":
        return f"{spec.encoder_layers} enc + {spec.decoder_layers} dec"
    return str(spec.encoder_layers or spec.decoder_layers)


def _heads(spec) -> str:
    return str(spec.n_heads) if spec.n_kv_heads == spec.n_heads else f"{spec.n_heads} (kv {spec.n_kv_heads})"


# ---------------------------------------------------------------- params


def cmd_params(args) -> int:
    from archspec.params import COMPONENTS, count_params
    from archspec.render import exact, human, pct, signed_pct, table

    specs = _models(args)
    counts = [s if _is_measured(s) else count_params(s, mtp=getattr(args, "mtp", False)) for s in specs]
    objects = [c.params_dict() if _is_measured(c) else c.to_dict() for c in counts]
    notes = [_config_notes(ref) for ref in args.models or []]
    for obj, said in zip(objects, notes):
        if said:
            obj["notes"] = list(said)

    def people() -> str:
        blocks = []
        for spec, c, said in zip(specs, counts, notes):
            if _is_measured(c):
                blocks.append(_measured_params_block(c, args.format))
                continue
            rows = [[name, human(n), exact(n), pct(c.share(name))] for name in COMPONENTS if (n := c.components[name])]
            rows.append(["total", human(c.total), exact(c.total), pct(1.0)])
            if c.active != c.total:  # a mixture of experts: what one token uses, beside the total
                rows.append(["active per token", human(c.active), exact(c.active), pct(c.active / c.total)])
            head = f"{spec.name}: {spec.kind}, {_layers(spec)} layers, d_model {spec.d_model}"
            per = "; ".join(
                f"{stack} layer {human(v['total'])} ({exact(v['total'])})" for stack, v in c.per_layer.items()
            )
            kinds = "; ".join(
                f"{stack}: " + ", ".join(f"{k['layers']:,} x {name} {human(k['total'])} ({exact(k['total'])})"
                                         for name, k in ks.items())
                for stack, ks in c.kinds.items() if len(ks) > 1
            )  # fmt: skip
            dev = (c.estimate - c.total) / c.total
            lines = [
                head,
                table(
                    rows,
                    ["component", "params", "exact", "share"],
                    args.format,
                    colalign=("left", "right", "right", "right"),
                ),
                f"per layer: {per}" + (" (the kind most layers have)" if kinds else ""),
                *([f"layers by kind: {kinds}"] if kinds else []),
                f"non-embedding (Kaplan's N): {human(c.non_embedding)} ({exact(c.non_embedding)})",
                f"seed estimate 12*L*d^2 + V*d: {human(c.estimate)} ({exact(c.estimate)}), {signed_pct(dev)} vs exact; "
                "leaves out biases, norms, position tables, cross-attention and any other departure "
                "from the GPT-2 block",
                *(f"note: {n}" for n in said),
            ]
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks) + "\n\n" + ROUNDING_NOTE

    _render(args, objects, people)
    return EXIT_OK


def _measured_params_block(m, fmt: str) -> str:
    from archspec.render import exact, human, pct, table

    rows = [[group, human(n), exact(n), pct(n / m.total)] for group, n in m.components.items()]
    rows.append(["total", human(m.total), exact(m.total), pct(1.0)])
    if m.active is not None and m.active != m.total:
        rows.append(["active per token", human(m.active), exact(m.active), pct(m.active / m.total)])
    lines = [
        f"{m.name}: {m.source} ({m.architecture}, model_type {m.model_type})",
        MEASURED_LINE,
        table(rows, ["module", "params", "exact", "share"], fmt, colalign=("left", "right", "right", "right")),
        f"non-embedding (total less nn.Embedding tables): {human(m.non_embedding)} ({exact(m.non_embedding)})",
    ]
    if m.active is not None and m.active != m.total:
        lines.append(f"active: {m.active_note}")
    elif m.active is None:
        lines.append(f"active: not known ({m.active_note})")
    if m.estimate is not None:
        lines.append(f"seed estimate 12*L*d^2 + V*d: {human(m.estimate)} ({exact(m.estimate)})")
    return "\n".join(lines)


def _measured_compare_dict(m) -> dict[str, Any]:
    from archspec.flops import exact_number

    out = m.params_dict()
    per_token = None if m.forward is None else exact_number(_fraction_of(m.forward, m.batch * m.seq_len))
    out.update(seq_len=m.seq_len, forward_per_token=per_token)
    return out


def _fraction_of(num: int, den: int):
    from fractions import Fraction

    return Fraction(num, den)


def _measured_compare_table(measured: list, fmt: str) -> str:
    from archspec.render import human, table

    body = [[m.name, m.model_type, m.layers or "-", m.d_model or "-", f"{m.vocab_size:,}" if m.vocab_size else "-",
             human(m.total), human(m.active) if m.active is not None else "not known", human(m.non_embedding),
             human(_fraction_of(m.forward, m.batch * m.seq_len)) if m.forward is not None else "not measured"]
            for m in measured]  # fmt: skip
    headers = ["model", "model_type", "layers", "d_model", "vocab", "params", "active", "non-emb",
               f"FLOPs/token at {measured[0].seq_len:,}"]  # fmt: skip
    sources = sorted({m.source for m in measured})
    return (
        "measured, not analytic (model_types without an adapter; FlopCounterMode over one forward pass):\n"
        + table(body, headers, fmt)
        + "\n"
        + "; ".join(sources)
    )


def _measured_flops_block(m, fmt: str) -> str:
    from archspec.render import human, sci, table

    if m.forward is None:
        rows = [["forward (FlopCounterMode)", "not measured", ""]]
    else:
        per_token = human(_fraction_of(m.forward, m.batch * m.seq_len))
        rows = [["forward (FlopCounterMode, matmul)", sci(m.forward), per_token],
                ["training (3 x forward)", sci(3 * m.forward), ""]]  # fmt: skip
    lines = [
        f"{m.name}: batch {m.batch} x {m.seq_len} tokens; {m.source} ({m.architecture}, model_type {m.model_type})",
        MEASURED_LINE,
        table(rows, ["", "FLOPs", "per token"], fmt, colalign=("left", "right", "right")),
    ]
    if m.flops_note:
        lines.append(f"FLOPs: {m.flops_note}")
    return "\n".join(lines)


# ---------------------------------------------------------------- compare


def cmd_compare(args) -> int:
    from archspec.compare import compare
    from archspec.memory import kv_cache_dtype
    from archspec.render import human, human_bytes, table

    models = _models(args, 1, args.seq_len)
    measured = [m for m in models if _is_measured(m)]
    rows = [compare(s, args.seq_len, args.dtype) for s in models if not _is_measured(s)]
    by_name = iter(r.to_dict() for r in rows)
    objects = [_measured_compare_dict(m) if _is_measured(m) else next(by_name) for m in models]

    def people() -> str:
        text = analytic() if rows else ""
        if measured:
            text = (text + "\n\n" if text else "") + _measured_compare_table(measured, args.format)
        return text

    def analytic() -> str:
        kv = kv_cache_dtype(args.dtype)
        moe = any(r.count.active != r.count.total for r in rows)
        headers = ["model", "layers", "d_model", "heads", "d_head", "d_ff", "vocab", "ctx", "params",
                   *(["active"] if moe else []), "non-emb", f"FLOPs/token at {args.seq_len:,}",
                   f"weights {args.dtype}", "KV/token"]  # fmt: skip
        body = [[r.spec.name, _layers(r.spec), r.spec.d_model, _heads(r.spec), r.spec.d_head, r.spec.d_ff,
                 f"{r.spec.vocab_size:,}", r.spec.max_positions, human(r.count.total),
                 *([human(r.count.active)] if moe else []), human(r.count.non_embedding),
                 human(r.forward_per_token) + (f" (at {r.seq_len:,}*)" if r.seq_len_clamped else ""),
                 human_bytes(r.weights_bytes), human_bytes(r.kv_cache_bytes_per_token)] for r in rows]  # fmt: skip
        clamped = [r.spec.name for r in rows if r.seq_len_clamped]
        note = (
            f"FLOPs/token: exact forward matmul FLOPs per token over one {args.seq_len:,}-token sequence "
            "(2 per multiply-accumulate)"
            + (
                f"; * beyond the context of {', '.join(clamped)}: at its context length (ctx) instead"
                if clamped
                else ""
            )
            + (".\nactive: parameters one token uses (the routed experts it is sent to)" if moe else "")
            + ".\n"
            + (
                f"Weights in {args.dtype}, KV cache in {kv} (int4 is weight-only)"
                if kv != args.dtype
                else f"Weights and KV cache in {kv}"
            )  # fmt: skip
            + "; "
            "`archspec flops` and `archspec memory` give the breakdowns."
        )
        return table(body, headers, args.format) + "\n\n" + ROUNDING_NOTE + "\n" + note

    _render(args, objects, people)
    return EXIT_OK


def _compare_args(p: argparse.ArgumentParser) -> None:
    from archspec.compare import DEFAULT_SEQ_LEN
    from archspec.memory import DTYPE_BYTES

    p.add_argument(
        "--seq-len",
        type=positive_int,
        default=DEFAULT_SEQ_LEN,
        help=f"one sequence length for every model's FLOPs per token (default {DEFAULT_SEQ_LEN:,}; a model whose "
        "context is shorter is counted at its context, and marked)",
    )
    p.add_argument(
        "--dtype",
        default="bf16",
        type=_dtype_name,
        choices=list(DTYPE_BYTES),
        help="bytes per value for weights and KV cache (default bf16; torch names such as bfloat16 accepted too)",
    )


# ---------------------------------------------------------------- schema


def cmd_schema(args) -> int:
    import json

    from archspec.render import table
    from archspec.spec import SUBTABLES, TABLES, ModelSpec

    schema = ModelSpec.model_json_schema()
    if args.format in ("json", None):
        _emit(json.dumps(schema, indent=2))
        return EXIT_OK
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    rows = []
    for name, info in props.items():
        kind = info.get("type") or " | ".join(str(x.get("const", x.get("type"))) for x in info.get("anyOf", []))
        if "enum" in info:
            kind = " | ".join(info["enum"])
        default = "required" if name in required else _fmt_value(info.get("default", "derived"))
        if name in SUBTABLES:  # a kind, or a table with one: its kinds and the default one
            kind = "table: kind " + " | ".join(SUBTABLES[name])
            default = ModelSpec.model_fields[name].default_factory().kind
        elif name in TABLES:
            fields = ", ".join(TABLES[name].model_fields)
            kind = f"boolean | table {{{fields}}}" if name == "bias" else f"table {{{fields}}}"
            default = "true" if name == "bias" else "-"
        rows.append([name, kind, default, info.get("description", "")])
    if args.format == "csv":
        from archspec.render import to_csv

        _emit(to_csv([dict(zip(["field", "type", "default", "meaning"], r)) for r in rows]))
    else:
        _emit(table(rows, ["field", "type", "default", "meaning"], args.format))
    return EXIT_OK


# ---------------------------------------------------------------- import


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", metavar="CONFIG", help="a Hugging Face config.json, or a folder holding one")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the spec here (.toml, .json or .yaml, by the suffix) instead of printing TOML",
    )


def cmd_import(args) -> int:
    from pathlib import Path

    from archspec import loading, specfile
    from archspec.catalog import with_overrides
    from archspec.loading import build_spec, parse_assignments

    overrides = parse_assignments(args.overrides)
    imported = loading.import_config(args.config)
    spec = with_overrides(build_spec(imported.data, args.config), overrides, args.config)
    suffix = Path(args.output).suffix if args.output else (".json" if args.format == "json" else ".toml")
    comments = [
        f"{spec.name}: the archspec spec of {args.config} (model_type {imported.model_type}, "
        f"{imported.architecture}), written by `archspec import`",
        *(f"note: {n}" for n in imported.notes),
    ]
    text = specfile.dump(specfile.essential(spec), suffix, comments)
    for note in imported.notes:
        sys.stderr.write(f"archspec: note: {note}\n")
    if not args.output:
        _emit(text)
        return EXIT_OK
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{args.output}: cannot write: {exc}") from None
    return EXIT_OK


# ---------------------------------------------------------------- flops


def _workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", "-b", type=positive_int, default=1, help="sequences per step (default 1)")
    p.add_argument(
        "--seq-len",
        "-s",
        type=positive_int,
        help="tokens per sequence (target length for an encoder-decoder; default: max_positions)",
    )
    p.add_argument("--src-len", type=positive_int, help="encoder-decoder source length (default: --seq-len)")


def _flops_args(p: argparse.ArgumentParser) -> None:
    from archspec.hardware import ACCELERATORS, MATH_DTYPES

    _workload_args(p)
    p.add_argument("--tokens", "-D", type=positive_int, help="training tokens D, e.g. 300e9: total compute and PF-days")
    p.add_argument(
        "--causal-half",
        action="store_true",
        help="count only the causal half of the decoder's self-attention score matrix (default: full matrix)",
    )
    p.add_argument(
        "--gpu", choices=list(ACCELERATORS), help="accelerator for a training-time estimate (needs --tokens)"
    )
    p.add_argument(
        "--gpus", type=positive_int, help="number of accelerators (default 1 when --gpu or --peak-tflops is given)"
    )
    p.add_argument(
        "--peak-tflops", type=positive_number, help="peak TFLOP/s per accelerator, overriding --gpu's table value"
    )
    p.add_argument("--mfu", type=_mfu, default=0.4, help="model-FLOPs utilisation in (0, 1] (default 0.4)")
    p.add_argument(
        "--dtype",
        default="bf16",
        type=_dtype_name,
        choices=list(MATH_DTYPES),
        help="math precision for the peak (default bf16; torch names such as bfloat16 accepted too)",
    )


def _fraction(x):
    """An exact rational from an int, a Fraction or a float (by its shortest decimal form)."""
    from fractions import Fraction

    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


def _mfu(text: str) -> float:
    value = positive_number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return float(value)


def cmd_flops(args) -> int:

    from archspec.flops import count_flops, training_cost
    from archspec.hardware import resolve_peak
    from archspec.limits import float_or_int
    from archspec.render import fixed, human, pct, sci, signed_pct, table

    if (args.gpu or args.peak_tflops or args.gpus) and not args.tokens:
        raise SpecError("a training-time estimate needs --tokens D (e.g. --tokens 300e9)")
    peak, acc = resolve_peak(args.gpu, args.peak_tflops, args.dtype)
    if args.gpus and not peak:
        raise SpecError("--gpus needs --gpu NAME or --peak-tflops N")
    objects, blocks = [], []
    for spec in _models(args, args.batch, args.seq_len):
        if _is_measured(spec):
            objects.append(spec.flops_dict())
            blocks.append(_measured_flops_block(spec, args.format))
            continue
        f = count_flops(spec, args.batch, args.seq_len, args.src_len, args.causal_half)
        obj = f.to_dict()
        cost = None
        if args.tokens:
            cost = training_cost(f, args.tokens, (args.gpus or 1) if peak else None, peak, args.mfu if peak else None,
                                 acc.name if acc else None)  # fmt: skip
            pf_days, pf_days_exact = cost.pf_days, cost.pf_days_exact
            obj.update(
                tokens=cost.tokens,
                training_total=cost.training_total,
                training_total_6nd=cost.training_total_6nd,
                pf_days=pf_days,
                pf_days_exact=pf_days_exact,
                chinchilla_tokens=cost.chinchilla_tokens,
            )
            if cost.seconds is not None:
                days = float_or_int(_fraction(cost.seconds) / 86400)
                obj.update(gpus=cost.gpus, accelerator=cost.accelerator, peak_flops=cost.peak_flops, mfu=cost.mfu,
                           time_seconds=cost.seconds, time_days=days)  # fmt: skip
        objects.append(obj)

        shape = f"batch {f.batch} x {f.seq_len} tokens" + (f" (source {f.src_len})" if f.src_len else "")
        rows = [[c, sci(v), pct(v / f.forward)] for c, v in f.components.items() if v]
        rows += [["forward (exact, matmul)", sci(f.forward), pct(1.0)],
                 ["backward (2 x forward)", sci(f.backward), ""],
                 ["training (3 x forward)", sci(f.training), ""],
                 ["non-matmul (estimate)", sci(f.non_matmul_total), pct(f.non_matmul_total / f.forward)]]  # fmt: skip
        scores = "full matrix"
        if f.causal_half:
            scores = "causal half" if spec.kind == "decoder-only" else "causal half in the decoder's self-attention"
        lines = [
            f"{spec.name}: {shape}; FLOPs = 2 per multiply-accumulate; attention scores: {scores}",
            table(rows, ["", "FLOPs", "share"], args.format, colalign=("left", "right", "right")),
            f"per token: forward {human(f.forward_per_token)} "
            f"({fixed(f.forward_per_token, 0 if f.forward_per_token.denominator == 1 else 2)}), "
            f"training {human(f.training_per_token)}; "
            f"MACs (fvcore's 'flops') {sci(f.macs)}",
            *_by_kind(f.kinds, "forward_per_layer", sci, "forward FLOPs per layer by kind"),
            "not modelled: lookups, the loss, the optimizer step, the pooler's tanh, dropout",
            "",
            "published approximations for this batch (training FLOPs):",
            table(
                [
                    [k, sci(a["value"]), sci(a["exact"]), signed_pct(a["deviation"])]
                    for k, a in f.approximations.items()
                ],
                ["formula", "value", "exact", "deviation"],
                args.format,
                colalign=("left", "right", "right", "right"),
            ),
        ]
        if cost is not None:
            lines += [
                "",
                f"training on {human(cost.tokens)} tokens: 6ND {sci(cost.training_total_6nd)} FLOPs "
                f"({fixed(pf_days)} PF-days, as GPT-3's Table D.1 counts); exact {sci(cost.training_total)} "
                f"({fixed(pf_days_exact)} PF-days)",
                f"Chinchilla-optimal data, ~20 tokens per parameter: {human(cost.chinchilla_tokens)} tokens",
            ]
            if cost.seconds is not None:
                what = acc.title if acc else "accelerators"
                tflops = _fraction(cost.peak_flops) / 10**12
                lines.append(
                    f"time on {cost.gpus:,} x {what} at {fixed(tflops, 0 if tflops >= 1 else 6)} TFLOP/s peak, "
                    f"{cost.mfu:.0%} MFU: {fixed(days)} days ({fixed(_fraction(cost.seconds) / 3600, 0)} hours)"
                )
        blocks.append("\n".join(lines))
    _render(args, objects, lambda: "\n\n".join(blocks))
    return EXIT_OK


def _by_kind(kinds: dict[str, dict[str, int]], key: str, fmt: Callable[[Any], str], label: str) -> list[str]:
    """One line for a heterogeneous stack: each kind's layers and its figure for one layer (nothing when
    every layer of each stack is alike)."""
    stacks: dict[str, list[str]] = {}
    for name, row in kinds.items():
        stack, _, kind = name.partition(".")
        stacks.setdefault(stack, []).append(f"{row['layers']:,} x {kind} {fmt(row[key])}")
    shown_ = [f"{stack}: {', '.join(rows)}" for stack, rows in stacks.items() if len(rows) > 1]
    return [f"{label}: {'; '.join(shown_)}"] if shown_ else []


# ---------------------------------------------------------------- memory


def _memory_args(p: argparse.ArgumentParser) -> None:
    from archspec.hardware import ACCELERATORS
    from archspec.memory import DTYPE_BYTES, OPTIMIZERS, RECOMPUTE
    from archspec.vocab import ATTENTION, ZERO_STAGES

    _workload_args(p)
    p.add_argument(
        "--dtype",
        default="bf16",
        type=_dtype_name,
        choices=list(DTYPE_BYTES),
        help="weights and activations (default bf16; torch names such as bfloat16 accepted too)",
    )
    p.add_argument("--optimizer", default="adamw", choices=list(OPTIMIZERS), help="optimizer states (default adamw)")
    p.add_argument(
        "--recompute",
        default="none",
        choices=list(RECOMPUTE),
        help="activation recomputation (Korthikanti et al. 2022): none, selective, full",
    )
    p.add_argument("--fp32-grads", action="store_true", help="keep gradients in fp32 (the 18 bytes/param convention)")
    p.add_argument(
        "--attention",
        default="flash",
        choices=list(ATTENTION),
        help="flash: a fused kernel, the score matrix never stored (default, as modern trainers run); "
        "eager: the attention probabilities stored",
    )
    p.add_argument(
        "--dropout",
        action="store_true",
        help="add dropout masks to the activations (Korthikanti et al.; the reference model runs no dropout)",
    )
    p.add_argument("--zero", type=int, default=0, choices=ZERO_STAGES, help="ZeRO stage over the data-parallel GPUs")
    p.add_argument("--gpus", type=positive_int, default=1, help="GPUs in all (data parallel = gpus / (tp * pp))")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree (with sequence parallelism)")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel degree")
    p.add_argument("--gpu", choices=list(ACCELERATORS), help="say whether the per-GPU total fits this accelerator")
    _storage_args(p, "the inference figures' weights and a LoRA's frozen base (default: --dtype)")
    p.add_argument(
        "--lora",
        type=positive_int,
        metavar="RANK",
        help="fine-tune rank-RANK LoRA adapters over a frozen base (QLoRA: with --weights nf4)",
    )
    p.add_argument(
        "--lora-targets",
        metavar="LIST",
        default=None,
        help="with --lora: attention, mlp, all (default) or projections q,k,v,o,gate,up,down, comma-separated",
    )
    p.add_argument("--micro-batch", type=positive_int, metavar="B", help="sequences per device per step (as --batch)")
    p.add_argument(
        "--global-batch",
        type=positive_int,
        metavar="G",
        help="sequences per optimizer step: G / (B x data parallel) gradient accumulation steps",
    )
    p.add_argument(
        "--max-micro-batch",
        action="store_true",
        help="with --gpu: the largest micro-batch whose training memory fits on it in this layout",
    )
    p.add_argument("--offload", choices=["optimizer"], help="optimizer: the optimizer states in host memory")


def _storage_args(p: argparse.ArgumentParser, weights_help: str) -> None:
    """--weights, --experts, --kv-dtype: storage formats from the one table (archspec.memory.STORAGE)."""
    from archspec.memory import DTYPE_BYTES, STORAGE

    p.add_argument(
        "--weights",
        type=_dtype_name,
        choices=list(STORAGE),
        metavar="DTYPE",
        help=f"weight storage: {', '.join(STORAGE)} (bits per value with block scales: README); {weights_help}",
    )
    p.add_argument(
        "--experts",
        type=_dtype_name,
        choices=list(STORAGE),
        metavar="DTYPE",
        help="storage of the routed experts alone (e.g. mxfp4, as gpt-oss ships them)",
    )
    p.add_argument("--kv-dtype", type=_dtype_name, choices=list(DTYPE_BYTES),
                   help="KV cache (default: the weights' dtype, bf16 for a weight-only format)")  # fmt: skip


def _memory_batch(args) -> int:
    if args.micro_batch is not None and args.batch not in (1, args.micro_batch):
        raise SpecError(f"--micro-batch {args.micro_batch} and --batch {args.batch}: give one of them")
    if args.lora_targets is not None and args.lora is None:
        raise SpecError("--lora-targets needs --lora RANK")
    if args.max_micro_batch and not args.gpu:
        raise SpecError("--max-micro-batch needs --gpu (the accelerator whose memory the micro-batch must fit)")
    return args.micro_batch or args.batch


def cmd_memory(args) -> int:
    from archspec.hardware import accelerator
    from archspec.memory import estimate_memory, fits, max_micro_batch, parallel_layout
    from archspec.render import exact, fixed, human_bytes, pct, table

    acc = accelerator(args.gpu) if args.gpu else None
    batch = _memory_batch(args)
    objects, blocks = [], []
    for spec in _specs(args):
        lay = parallel_layout(spec, args.gpus, args.tp, args.pp, args.zero)
        options = dict(seq_len=args.seq_len, dtype=args.dtype, optimizer=args.optimizer, recompute=args.recompute,
                       src_len=args.src_len, fp32_grads=args.fp32_grads, dropout=args.dropout,
                       zero_stage=lay.zero_stage, data_parallel=lay.data_parallel,
                       tensor_parallel=lay.tensor_parallel, pipeline_parallel=lay.pipeline_parallel,
                       attention=args.attention, weights=args.weights, experts=args.experts, kv_dtype=args.kv_dtype,
                       lora_rank=args.lora, lora_targets=args.lora_targets or "all", offload=args.offload)  # fmt: skip
        m = estimate_memory(spec, batch, global_batch=args.global_batch, **options)
        obj = m.to_dict()
        if acc:
            verdict = fits(m, acc.memory_bytes)
            obj.update(accelerator=acc.name, accelerator_memory_bytes=acc.memory_bytes,
                       fits_training=verdict["training"], fits_inference=verdict["inference"])  # fmt: skip
            if args.max_micro_batch:
                obj["max_micro_batch"] = max_micro_batch(spec, acc.memory_bytes, **options)
        objects.append(obj)
        per_token = m.kv_cache_bytes_per_token
        weights_label = f"frozen base ({m.weights_format}) + adapters" if m.lora else "weights"
        optim_label = "optimizer states (offloaded to host)" if m.offload else "optimizer states"
        rows = [
            [weights_label, human_bytes(m.weights_bytes), exact(m.weights_bytes)],
            ["gradients", human_bytes(m.gradients_bytes), exact(m.gradients_bytes)],
            [optim_label, human_bytes(m.optimizer_bytes), exact(m.optimizer_bytes)],
            [
                f"activations ({m.attention} attention, recompute {m.recompute})",
                human_bytes(m.activations_bytes),
                exact(m.activations_bytes),
            ],
            [
                "training total" + (" on the device" if m.offload else ""),
                human_bytes(m.training_total_bytes),
                exact(m.training_total_bytes),
            ],
            *(
                [["host memory (optimizer states)", human_bytes(m.host_bytes), exact(m.host_bytes)]]
                if m.offload
                else []
            ),
            [
                f"inference weights ({m.weights_format}"
                + (f", experts {m.experts_format}" if m.experts_format else "")
                + ")",
                human_bytes(m.inference_weights_bytes),
                exact(m.inference_weights_bytes),
            ],
            [f"KV cache ({m.kv_cache_dtype})", human_bytes(m.kv_cache_bytes), exact(m.kv_cache_bytes)],
            [
                "KV cache per token",
                human_bytes(per_token),
                exact(int(per_token)) if per_token.denominator == 1 else fixed(per_token, 2),
            ],  # fmt: skip
            [
                "inference total (weights + KV cache)",
                human_bytes(m.inference_total_bytes),
                exact(m.inference_total_bytes),
            ],
        ]
        shape = f"batch {m.batch} x {m.seq_len} tokens" + (f" (source {m.src_len})" if m.src_len else "")
        par = m.parallel
        scope = (
            "whole model"
            if args.gpus == 1
            else f"per GPU: {args.gpus} GPUs = dp {par['data_parallel']} x tp {par['tensor_parallel']} x pp "
            f"{par['pipeline_parallel']}, ZeRO stage {par['zero_stage']}"
        )
        lines = [
            f"{spec.name}: {shape}, {m.dtype}, {m.optimizer}; {scope}",
            table(rows, ["", "memory", "bytes"], args.format, colalign=("left", "right", "right")),
            f"training bytes per parameter: {m.per_param_note}",
            *_by_kind(m.kinds, "activations_bytes_per_layer", human_bytes, "activations per layer by kind"),
            *_by_kind(m.kinds, "kv_cache_bytes_per_layer", human_bytes, "KV cache or state per layer by kind"),
        ]
        if m.lora:
            lines.append(f"LoRA rank {m.lora['rank']} on {m.lora['targets']}: {m.trainable_params:,} trainable "
                         f"parameters ({m.trainable_params / m.params:.3%} of {m.params:,})")  # fmt: skip
        if m.global_batch:
            lines.append(f"global batch {m.global_batch:,} = micro-batch {m.batch:,} x data parallel "
                         f"{par['data_parallel']} x {m.accumulation_steps:,} accumulation steps")  # fmt: skip
        if acc and args.max_micro_batch:
            lines.append(f"largest micro-batch that fits on {acc.title} ({acc.memory_gib:g} GiB): "
                         f"{obj['max_micro_batch']:,}")  # fmt: skip
        if acc:
            cap = acc.memory_gib * 2**30
            verdict = {True: "fits", False: "does not fit"}
            lines.append(
                f"{acc.title} ({acc.memory_gib:g} GiB): training {verdict[obj['fits_training']]} "
                f"({pct(_fraction(m.training_total_bytes) / _fraction(cap), 0)}), inference "
                f"{verdict[obj['fits_inference']]} ({pct(_fraction(m.inference_total_bytes) / _fraction(cap), 0)})"
            )
        blocks.append("\n".join(lines))
    _render(args, objects, lambda: "\n\n".join(blocks) + "\nGiB = 2^30 bytes; --format json gives exact bytes.")
    return EXIT_OK


# ---------------------------------------------------------------- validate


def _fmt_quantity(quantity: str, value) -> str:
    from archspec.render import human_sig, sci

    if quantity in ("params", "active_params", "non_embedding_params"):
        return f"{human_sig(value)} ({value:,})"
    if quantity == "pf_days":
        return f"{value:,.4g}" if abs(value) < 10**15 else sci(value, 4)
    return sci(value, 4)


def cmd_validate(args) -> int:
    import textwrap

    from archspec.claims import assess
    from archspec.render import signed_pct

    objects, rows, notes = [], [], []
    unexplained = []
    from archspec.catalog import claim_sets
    from archspec.loading import parse_assignments

    for spec, claims in claim_sets(args.models, parse_assignments(args.overrides)):
        assessed = [assess(spec, c) for c in claims]
        objects.append({"name": spec.name, "claims": [a.to_dict() for a in assessed]})
        for a in assessed:
            c = a.claim
            lines = []
            if c.explanation:
                lines.append(c.explanation)
            if a.what_if:
                w = a.what_if
                changes = ", ".join(f"{k}={v}" for k, v in w["changes"].items())
                lines.append(
                    f"what if {changes}: {_fmt_quantity(c.quantity, w['computed'])}, {w['status']} "
                    f"({signed_pct(w['deviation'])}) [{w['label']}]"
                )
            if a.implied:
                i = a.implied
                if i["low"] is None:
                    lines.append(f"implied: {i['note']} (the spec has {i['field']} = {i['current']:,})")
                else:
                    lines.append(
                        f"implied: {c.printed} needs {i['field']} between {i['low']:,} and {i['high']:,} "
                        f"(the spec has {i['current']:,})"
                    )
            if a.using_params:
                u = a.using_params
                lines.append(
                    f"with N = {u['params']} as the source prints it: {_fmt_quantity(c.quantity, u['computed'])}, "
                    f"{u['status']} ({signed_pct(u['deviation'])})"
                )
            ref = ""
            if lines:
                notes.append((len(notes) + 1, spec.name, c.printed, lines))
                ref = f"[{len(notes)}]"
            if a.unexplained_off:
                unexplained.append(f"{spec.name} {c.quantity} {c.printed} ({c.source})")
            rows.append([spec.name, c.quantity, c.printed, _fmt_quantity(c.quantity, a.computed),
                         signed_pct(a.deviation), a.status, c.source, ref])  # fmt: skip

    def people() -> str:
        headers = ["model", "quantity", "claimed", "computed", "deviation", "status", "source", "note"]
        widths = [None, None, None, None, None, None, 48, None] if args.format == "table" else None
        from tabulate import tabulate

        out = tabulate(rows, headers=headers, tablefmt="github" if args.format == "markdown" else "simple",
                       disable_numparse=True, maxcolwidths=widths)  # fmt: skip
        blocks = [out, ""]
        for n, name, printed, lines in notes:
            body = [f"[{n}] {name} {printed}: {lines[0]}"] + [f"    {x}" for x in lines[1:]]
            blocks.append("\n".join(textwrap.fill(b, 110, subsequent_indent="    ") for b in body))
        counts = {k: sum(r[5] == k for r in rows) for k in ("match", "near", "off")}
        blocks.append(
            f"\n{len(rows)} claims: {counts['match']} match, {counts['near']} near (within 1%), {counts['off']} off; "
            "match = the exact value rounds to the printed figure at its printed precision"
        )
        if unexplained:
            blocks.append("off with no recorded explanation: " + "; ".join(unexplained))
        return "\n".join(blocks)

    _render(args, objects, people)
    return EXIT_MISMATCH if unexplained else EXIT_OK


# ---------------------------------------------------------------- verify


def _reference():
    """archspec.reference, or a clear message naming the extra to install."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SpecError(
            "this command builds the PyTorch reference model and needs torch: "
            "pip install 'archspec-transformers[reference]'"
        ) from None
    import archspec.reference as reference

    return reference


def cmd_verify(args) -> int:
    from archspec.render import exact, table

    reference = _reference()
    if args.memory or args.ranks:
        return _verify_memory(args, reference)
    reports = _verify_all(reference, _specs(args, default_all=True))
    objects = [r.to_dict() for r in reports]
    rows = [[r.name, exact(r.params.analytic), exact(r.params.measured), exact(r.flops.analytic),
             exact(r.flops.measured), "; ".join(r.mismatches()) or "all tensors and components equal",
             "ok" if r.ok else "MISMATCH"] for r in reports]  # fmt: skip

    def people() -> str:
        n_bad = sum(not r.ok for r in reports)
        summary = (
            f"{len(reports)} model(s): analytic == instantiated for every tensor (path and shape), parameters "
            "and FLOPs, component by component"
            if not n_bad
            else f"{n_bad} of {len(reports)} model(s) differ"
        )
        note = (
            "instantiated: the parameters of archspec.reference.build(spec, device='meta'); measured: torch's "
            "FlopCounterMode over one forward pass, batch 1 x max_positions tokens, on the meta device"
        )
        headers = [
            "model",
            "params analytic",
            "instantiated",
            "FLOPs analytic",
            "measured",
            "tensors and components",
            "check",
        ]
        align = ("left", "right", "right", "right", "right", "left", "left")
        return table(rows, headers, args.format, colalign=align) + f"\n\n{summary}\n{note}"

    _render(args, objects, people)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_MISMATCH


# ---------------------------------------------------------------- sweep


def _sweep_args(p: argparse.ArgumentParser) -> None:
    from archspec.memory import DTYPE_BYTES

    p.add_argument(
        "--vary",
        action="append",
        required=True,
        metavar="FIELD=VALUES",
        help="a field and its values: a list (d_model=512,1024; activation=gelu,swiglu) or an inclusive range "
        "START:STOP[:STEP] (d_model=512:4096:512); repeat for more fields: one row per combination",
    )
    p.add_argument(
        "--zip",
        action="append",
        metavar="FIELD,FIELD",
        default=[],
        help="vary these --vary fields in lock-step (equal-length lists: the first values together, then the "
        "second...) instead of in every combination; repeatable, e.g. --zip d_model,n_heads",
    )
    p.add_argument(
        "--keep",
        choices=["d_head"],
        help="d_head: keep the head width while d_model varies, so that n_heads = d_model / d_head",
    )
    p.add_argument(
        "--seq-len", type=positive_int, help="sequence length for FLOPs per token (default: each row's max_positions)"
    )
    p.add_argument("--dtype", default="bf16", type=_dtype_name, choices=list(DTYPE_BYTES), help=_DTYPE_HELP)


def cmd_sweep(args) -> int:
    from archspec.render import human, human_bytes, table
    from archspec.sweep import parse_vary, sweep

    varies = [parse_vary(v) for v in args.vary]
    zipped = [[f.strip() for f in z.split(",")] for z in args.zip]
    specs = _specs(args)
    objects, skipped = [], []
    for i, spec in enumerate(specs):
        progress = _progress_callback(f"sweep {spec.name}" + (f" ({i + 1}/{len(specs)})" if len(specs) > 1 else ""))
        objects += sweep(spec, varies, args.seq_len, args.dtype, progress, zipped, args.keep, skipped)
    if not objects:
        raise SpecError(f"no combination of the sweep is a valid spec; the first: {skipped[0]}")
    for s in skipped:
        sys.stderr.write(f"archspec: skipped {s}\n")

    def people() -> str:
        fields = [v.field for v in varies] + (["n_heads"] if args.keep else [])
        headers = ["model", *fields, "params", "active", "FLOPs/token", f"weights {args.dtype}", "KV/token"]
        rows = [
            [o["name"], *(_fmt_value(o[f]) for f in fields), human(o["total"]), human(o["active"]),
             human(float(o["forward_per_token"])), human_bytes(o["weights_bytes"]),
             human_bytes(o["kv_cache_bytes_per_token"])]
            for o in objects
        ]  # fmt: skip
        at = f"{args.seq_len:,}-token sequences" if args.seq_len else "each row's max_positions"
        note = (
            f"FLOPs/token: exact forward matmul FLOPs per token over {at} (2 per multiply-accumulate); "
            f"weights and KV cache per token in {args.dtype}."
        )
        if args.keep:
            note += " n_heads follows d_model (--keep d_head)."
        if skipped:
            note += f"\n{len(skipped)} combination(s) skipped (the spec refuses them; see stderr)."
        return table(rows, headers, args.format) + "\n\n" + ROUNDING_NOTE + "\n" + note

    _render(args, objects, people)
    return EXIT_MISMATCH if skipped else EXIT_OK


# ---------------------------------------------------------------- plot


# options that change one kind of plot only: a value given for another kind is refused, not ignored
_PLOT_OPTIONS = {"vary": "scaling", "gpu": "memory", "batch": "memory", "recompute": "memory", "dtype": "memory"}


def _plot_args(p: argparse.ArgumentParser) -> None:
    from archspec.hardware import ACCELERATORS
    from archspec.memory import DTYPE_BYTES, RECOMPUTE
    from archspec.plot import KINDS

    p.add_argument(
        "kind",
        choices=KINDS,
        help="breakdown: parameters by component, models side by side; memory: training and inference memory "
        "against sequence length; scaling: parameters and FLOPs per token against a --vary field",
    )
    p.add_argument("models", metavar="MODEL", nargs="+", help="a preset name (see `archspec list`) or a spec file")
    p.add_argument("--output", "-o", required=True, metavar="FILE", help="the picture to write: .png or .svg")
    p.add_argument("--vary", action="append", metavar="FIELD=VALUES", help="scaling: the field and its values, "
                   "e.g. d_model=512:4096:512 (one field)")  # fmt: skip
    p.add_argument("--gpu", metavar="NAME|FILE", help="memory: draw this accelerator's capacity (a name from "
                   f"{', '.join(list(ACCELERATORS)[:3])}, ... (`archspec hardware`), or a .toml file)")  # fmt: skip
    p.add_argument("--batch", "-b", type=positive_int, help="memory: sequences per step (default 1)")
    p.add_argument("--dtype", type=_dtype_name, choices=list(DTYPE_BYTES), help="memory: " + _DTYPE_HELP)
    p.add_argument("--recompute", choices=list(RECOMPUTE), help="memory: activation recomputation (default none)")
    p.add_argument(
        "--seq-len",
        "-s",
        type=positive_int,
        help="memory: the longest sequence (default max_positions); scaling: the sequence for FLOPs per token",
    )


def cmd_plot(args) -> int:
    from archspec import plot

    for option, kind in _PLOT_OPTIONS.items():
        if getattr(args, option) is not None and args.kind != kind:
            flag = "--" + option.replace("_", "-")
            raise SpecError(f"{flag} applies to `archspec plot {kind}`, not to `plot {args.kind}`")
    plot.output_format(args.output)
    plot.require_matplotlib()
    specs = _specs(args)
    if args.kind == "breakdown":
        if args.seq_len is not None:
            raise SpecError("--seq-len applies to `plot memory` and `plot scaling`, not to `plot breakdown`")
        data = plot.breakdown_data(specs)
    elif args.kind == "memory":
        data = plot.memory_data(specs, args.batch or 1, args.dtype or "bf16", "adamw", args.recompute or "none",
                                args.gpu, args.seq_len)  # fmt: skip
    else:
        if not args.vary or len(args.vary) != 1:
            raise SpecError("plot scaling needs exactly one --vary FIELD=VALUES, e.g. --vary d_model=512:4096:512")
        data = plot.scaling_data(specs, args.vary[0], args.seq_len)
    plot.draw(args.kind, data, args.output)

    def people() -> str:
        from pathlib import Path

        size = Path(args.output).stat().st_size
        names = ", ".join(s.name for s in specs)
        return f"wrote {args.output} ({size:,} bytes): {args.kind} of {names}; --format json gives the numbers drawn"

    _render(args, data.to_dicts(), people)
    return EXIT_OK


# ---------------------------------------------------------------- inference


def _inference_args(p: argparse.ArgumentParser) -> None:
    from archspec.hardware import ACCELERATORS
    from archspec.memory import DTYPE_BYTES

    p.add_argument("--gpu", required=True, choices=list(ACCELERATORS), help="the accelerator (each device)")
    p.add_argument("--batch", "-b", type=positive_int, default=1, help="sequences generated together (default 1)")
    p.add_argument("--prompt-len", "-p", type=positive_int, required=True, help="prompt tokens per sequence (P)")
    p.add_argument("--gen-len", "-g", type=positive_int, required=True, help="generated tokens per sequence (G)")
    p.add_argument("--dtype", type=_dtype_name, choices=list(DTYPE_BYTES), help="weights: " + _DTYPE_HELP)
    _storage_args(p, "default --dtype, else bf16")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel devices (Megatron-LM splits)")
    p.add_argument("--ep", type=positive_int, default=1, help="expert-parallel devices (routed experts spread)")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline stages")
    p.add_argument("--mfu", type=_mfu, default=0.4, help="share of the peak FLOP/s prefill reaches (default 0.4)")
    p.add_argument(
        "--mbu",
        type=_mfu,
        default=1.0,
        help="share of the peak memory bandwidth decode reaches (default 1: a lower bound on the time)",
    )


def _duration(seconds: float) -> str:
    """0.00275 -> '2.75 ms'; three significant figures in s, ms or µs."""
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale or unit == "µs":
            return f"{seconds / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def cmd_inference(args) -> int:
    from archspec.hardware import accelerator
    from archspec.inference import estimate_inference
    from archspec.render import human_bytes, table

    acc = accelerator(args.gpu)
    if args.weights and args.dtype and args.weights != args.dtype:
        raise SpecError(f"--dtype {args.dtype} and --weights {args.weights}: give one of them")
    weights = args.weights or args.dtype or "bf16"
    objects, blocks, code = [], [], EXIT_OK
    for spec in _specs(args):
        e = estimate_inference(spec, acc, args.batch, args.prompt_len, args.gen_len, weights, args.kv_dtype,
                               args.mfu, args.mbu, experts=args.experts, tensor_parallel=args.tp,
                               expert_parallel=args.ep, pipeline_parallel=args.pp)  # fmt: skip
        obj = e.to_dict()
        used = e.weights_bytes + e.kv_cache_bytes
        context = e.prompt_len + e.gen_len
        lay = e.layout
        where = f"{acc.memory_gib:g} GiB" + (" per device" if lay.devices > 1 else "")
        verdict = f"{'fits' if e.fits else 'does not fit'} ({used / e.capacity_bytes:.0%} of {where})"
        if not e.fits:
            code = EXIT_MISMATCH
            remedy = "; ".join(f"{s} would fit" for s in e.suggestions) or "no larger --tp or narrower --weights fits"
            obj["message"] = (
                f"{spec.name} does not fit: weights {human_bytes(e.weights_bytes)} + KV cache "
                f"{human_bytes(e.kv_cache_bytes)} = {human_bytes(used)} on the fullest device, "
                f"{human_bytes(e.shortfall_bytes)} more than {where}; {remedy}"
            )
        rows = []
        if e.fits:
            comm = f"; communication {_duration(e.communication_seconds_per_token)}" if lay.devices > 1 else ""
            rows += [
                ["prefill", _duration(e.prefill_seconds), f"{e.prefill_flops:,} FLOPs at {e.mfu:g} x peak"],
                ["decode, per token", _duration(e.decode_seconds_per_token),
                 f"{human_bytes(float(e.decode_bytes_per_token))} read per step at {e.mbu:g} x bandwidth{comm}"],
                ["whole request", _duration(e.total_seconds), f"prefill + {e.gen_len:,} decode steps"],
                ["tokens per second", f"{e.tokens_per_second:,.0f}" if e.tokens_per_second >= 100
                 else f"{e.tokens_per_second:.3g}", f"{e.batch} x {e.gen_len:,} generated tokens"],
            ]  # fmt: skip
        rows += [
            ["max batch", f"{e.max_batch:,}", f"sequences of {context:,} tokens beside the weights"
             + (" (the weights alone do not fit)" if e.weights_bytes > e.capacity_bytes else "")],
            ["memory" + (" per device" if lay.devices > 1 else "") + " at this batch", human_bytes(used),
             f"weights {human_bytes(e.weights_bytes)} + KV cache {human_bytes(e.kv_cache_bytes)}: {verdict}"],
        ]  # fmt: skip
        if e.expected_experts is not None:
            tokens = f"{e.batch} token{'s' if e.batch > 1 else ''}"
            rows.append(["routed experts read per MoE layer", f"{e.expected_experts:.3g}",
                         f"of {spec.mlp.experts}, top-{spec.mlp.top_k}, {tokens} per step"])  # fmt: skip
        degrees = f"tp {lay.tensor_parallel} x ep {lay.expert_parallel} x pp {lay.pipeline_parallel}"
        layout = "" if lay.devices == 1 else f"; {degrees} = {lay.devices} devices"
        lines = [
            f"{spec.name} on {acc.title}: batch {e.batch}, prompt {e.prompt_len:,} + {e.gen_len:,} generated tokens, "
            f"weights {e.dtype}"
            + (f", experts {e.experts_dtype}" if e.experts_dtype else "")
            + f", KV cache {e.kv_dtype}{layout}",
            table(rows, ["roofline estimate", "value", "from"], args.format, colalign=("left", "right", "left")),
        ]
        if e.fits:
            bound = (
                "compute-bound" if e.prefill_compute_bound else "memory-bound, so its time above is an underestimate"
            )
            lines.append(f"prefill intensity {e.prefill_intensity:,.0f} FLOPs/byte vs ridge {e.ridge_intensity:,.0f}: "
                         f"{bound}")  # fmt: skip
        else:
            lines.append(obj["message"] + "; no timings")
        lines += ["assumptions:", *(f"  - {a}" for a in e.assumptions)]
        objects.append(obj)
        blocks.append("\n".join(lines))
    note = f"estimates, not measurements; {acc.name}: {acc.source}; {acc.bandwidth_source}. GiB = 2^30 bytes."
    _render(args, objects, lambda: "\n\n".join(blocks) + "\n" + note)
    for obj in objects if args.format != "table" else ():
        if not obj["fits"]:
            sys.stderr.write(f"archspec: {obj['message']}\n")
    return code


# ---------------------------------------------------------------- hardware and fit


def _accelerators(names: list[str] | None):
    """The accelerators named by --gpu (table names or .toml files), or the whole table."""
    from archspec.hardware import ACCELERATORS, accelerator

    if not names:
        return list(ACCELERATORS.values())
    out = []
    for n in names:
        acc = accelerator(n)
        if all(a.name != acc.name for a in out):
            out.append(acc)
    return out


def _gpu_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--gpu",
        action="append",
        metavar="NAME|FILE",
        help=f"{what} (repeatable): a name from `archspec hardware`, or a .toml file describing your own "
        "(name, memory_gib, bandwidth_gbs, bf16_tflops, ...; see the README)",
    )


def _tflops(x) -> str:
    return "-" if x is None else f"{x:,.4g}"


def cmd_hardware(args) -> int:
    from archspec.render import table

    accs = _accelerators(args.gpu)
    objects = [a.to_dict() for a in accs]

    def people() -> str:
        headers = ["name", "accelerator", "bf16 TFLOPS", "fp8 TFLOPS", "fp32 TFLOPS", "memory GiB", "bandwidth GB/s",
                   "interconnect GB/s"]  # fmt: skip
        rows = [[a.name, a.title, _tflops(a.bf16_tflops if a.bf16_tflops is not None else a.fp16_tflops),
                 _tflops(a.fp8_tflops), _tflops(a.fp32_tflops), f"{a.memory_gib:g}", f"{a.bandwidth_gbs:,g}",
                 "-" if a.interconnect_gbs is None else f"{a.interconnect_gbs:,g}"] for a in accs]  # fmt: skip
        align = ("left", "left", "right", "right", "right", "right", "right", "right")
        sources = [f"{a.name}: {a.source}; {a.bandwidth_source}; {a.interconnect_source}" for a in accs]
        note = (
            "Dense peaks (a figure printed with sparsity is halved); bf16 is fp16 where the chip has no bf16 "
            "path; - where the vendor publishes none (fp8: no fp8 tensor path). Interconnect: device to device, "
            "per direction per device. GB/s = 10^9 bytes per second."
        )
        return (
            table(rows, headers, args.format, colalign=align)
            + "\n\n"
            + note
            + "\n\nsources:\n"
            + "\n".join(f"  {s}" for s in sources)
        )

    _render(args, objects, people)
    return EXIT_OK


def _fit_args(p: argparse.ArgumentParser) -> None:
    from archspec.compare import DEFAULT_SEQ_LEN
    from archspec.fit import LORA_RANK, LORA_TARGETS, TASKS

    p.add_argument("--task", default="inference", choices=TASKS,
                   help="inference (weights + KV cache; default), training (weights, gradients, AdamW states, "
                   "activations) or lora (a frozen base, adapters with their gradients and AdamW states, "
                   "activations)")  # fmt: skip
    p.add_argument(
        "--seq-len",
        "-s",
        type=positive_int,
        default=DEFAULT_SEQ_LEN,
        help=f"tokens per sequence (default {DEFAULT_SEQ_LEN:,}; a model whose context is shorter is planned at "
        "its context, and marked)",
    )
    p.add_argument("--batch", "-b", type=positive_int, default=1,
                   help="sequences: served together (inference) or per micro-batch on each device (training); "
                   "default 1")  # fmt: skip
    p.add_argument("--lora-rank", type=positive_int, metavar="RANK", default=LORA_RANK,
                   help=f"with --task lora: the adapters' rank (default {LORA_RANK})")  # fmt: skip
    p.add_argument("--lora-targets", metavar="LIST", default=LORA_TARGETS,
                   help=f"with --task lora: attention, mlp, all (default {LORA_TARGETS}) or projections "
                   "q,k,v,o,gate,up,down, comma-separated")  # fmt: skip
    _gpu_option(p, "only these accelerators")


def cmd_fit(args) -> int:
    from archspec.compare import context_seq_len
    from archspec.fit import DTYPES, MAX_DEVICES, fit
    from archspec.render import GREEN, RED, human_bytes, paint, table

    accs = _accelerators(args.gpu)
    lora = dict(lora_rank=args.lora_rank, lora_targets=args.lora_targets) if args.task == "lora" else {}
    objects, blocks = [], []
    for spec in _specs(args):
        seq_len, clamped = context_seq_len(spec, args.seq_len)
        rows, memo = [], {}
        for acc in accs:
            for dtype in DTYPES[args.task]:
                f = fit(spec, acc, dtype, args.task, args.batch, seq_len, memo, **lora)
                objects.append({**f.to_dict(), "seq_len_clamped": clamped})
                used = "" if f.per_device_bytes is None else (
                    f"{human_bytes(f.per_device_bytes)} of {acc.memory_gib:g} GiB")  # fmt: skip
                devices = paint(f"{f.devices:,}", GREEN if f.devices == 1 else "") if f.devices else paint("-", RED)
                rows.append([acc.name, dtype, devices, f.layout, used])
        what = {"inference": "weights + KV cache",
                "training": "weights, gradients, AdamW states (mixed precision: 16 bytes per parameter for bf16) "
                "and activations (flash attention, no recomputation)",
                "lora": f"the frozen base in the dtype, rank-{args.lora_rank} adapters on {args.lora_targets} with "
                "their gradients and AdamW states (bf16 mixed precision) and activations (flash attention, no "
                "recomputation)"}[args.task]  # fmt: skip
        at = f"{seq_len:,}" + (f" (its context; {args.seq_len:,} asked)" if clamped else "")
        head = f"{spec.name}: {args.task}, batch {args.batch} x {at} tokens; {what} per device"
        align = ("left", "left", "right", "left", "right")
        blocks.append(head + "\n" + table(rows, ["gpu", "dtype", "devices", "layout", "per device"], args.format,
                                         colalign=align))  # fmt: skip
    layouts = (
        "TP: tensor parallel (1, 2, 4 or 8, dividing the heads and d_ff), PP: pipeline stages beyond that"
        if args.task == "inference"
        else "ZeRO stage over DP data-parallel devices, with TP tensor parallelism (1, 2, 4 or 8) when needed"
    )
    note = (
        f"devices: the fewest that hold it ({layouts}), as `archspec memory` plans each layout; - : not on "
        f"{MAX_DEVICES:,}."
        + (" int8/int4 are weight-only (the KV cache stays bf16 for int4)." if args.task == "inference" else "")
        + (" bf16, int8 and nf4 (QLoRA) store the frozen base; the adapters train in bf16." if lora else "")
        + " Workspace, fragmentation and framework overhead are not counted. GiB = 2^30 bytes."
    )
    _render(args, objects, lambda: "\n\n".join(blocks) + "\n\n" + note)
    return EXIT_OK


# ---------------------------------------------------------------- report


def _report_args(p: argparse.ArgumentParser) -> None:
    from archspec.compare import DEFAULT_SEQ_LEN

    p.add_argument("--output", "-o", required=True, metavar="FILE.html", help="the page to write (.html)")
    p.add_argument("--seq-len", "-s", type=positive_int, default=DEFAULT_SEQ_LEN,
                   help=f"tokens per sequence for FLOPs, memory and fit (default {DEFAULT_SEQ_LEN:,}; a model whose "
                   "context is shorter at its context, marked)")  # fmt: skip
    p.add_argument("--batch", "-b", type=positive_int, default=1, help="sequences for memory and fit (default 1)")
    _gpu_option(p, "the accelerators of the fit section (default: the whole table)")


def cmd_report(args) -> int:
    from pathlib import Path

    from archspec.report import ReportInputs, build_report

    out = Path(args.output)
    if out.suffix.lower() not in (".html", ".htm"):
        raise SpecError(f"{args.output}: the report is an HTML page; name it FILE.html")
    if not out.parent.is_dir():
        raise SpecError(f"{args.output}: no such folder {str(out.parent)!r}")
    specs = _specs(args)
    page = build_report(ReportInputs(specs, list(args.models), args.seq_len, args.batch, _accelerators(args.gpu)))
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{args.output}: cannot write: {exc}") from None
    objects = [{"name": s.name, "output": str(out), "bytes": len(page.encode("utf-8"))} for s in specs]
    _render(args, objects, lambda: f"wrote {out} ({len(page.encode('utf-8')):,} bytes): "
            f"{', '.join(s.name for s in specs)}; open it in any browser, it loads nothing from elsewhere")  # fmt: skip
    return EXIT_OK


# ---------------------------------------------------------------- friendlier options

# torch's dtype names (and torch.* spellings) for --dtype, beside the short names
_DTYPE_HELP = "bytes per value (default bf16; torch names such as bfloat16 or float8_e4m3fn are accepted too)"


def _dtype_name(text: str) -> str:
    """'bfloat16' or 'torch.bfloat16' -> 'bf16'; other names pass through to the option's choices."""
    from archspec.vocab import dtype_key

    return dtype_key(text)


_progress_state = {"live": False}


def _progress_write(text: str | None) -> None:
    """Redraw the progress line on stderr (None clears it)."""
    sys.stderr.write("\r\033[K" + (text or ""))
    sys.stderr.flush()
    _progress_state["live"] = text is not None


def _progress(items: list, label: str, describe: Callable[[Any], str] = str):
    """Yield `items`; when stderr is a terminal, keep one line there saying which item of how many runs."""
    live = len(items) > 1 and sys.stderr.isatty()
    for i, item in enumerate(items):
        if live:
            _progress_write(f"{label}: {i + 1}/{len(items)} {describe(item)}")
        yield item
    if live:
        _progress_write(None)


def _progress_callback(label: str) -> Callable[[int, int], None] | None:
    """A (done, total) callback for library loops, drawing the progress line on a terminal; else None."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        _progress_write(f"{label}: {done}/{total}" if done < total else None)

    return show


# ---------------------------------------------------------------- the parser


COMMANDS: dict[str, dict[str, Any]] = {}


def register(
    name: str,
    run: Callable[[argparse.Namespace], int],
    help: str,
    examples: str,
    models: str | None = "+",
    add_args: Callable[[argparse.ArgumentParser], None] | None = None,
    default_format: str | None = "table",
    formats: tuple[list[str], str] | None = None,
    overrides: bool | None = None,
) -> None:
    """Add a subcommand: `models` is argparse's nargs for MODEL ('+', '*', or None for none: then
    `add_args` adds its own, and `overrides=True` says that --set applies to them); `formats`
    (choices, help) replaces --format's for a command whose output is not a table."""
    COMMANDS[name] = dict(run=run, help=help, examples=examples, models=models, add_args=add_args,
                          default_format=default_format, formats=formats,
                          overrides=models is not None if overrides is None else overrides)  # fmt: skip


# Options that a command has but that change nothing in some uses of it: given there, they are refused
# by name rather than ignored. (command, option's dest, whether it is used, what it needs)
UNUSED_UNLESS: list[tuple[str, str, Callable[[argparse.Namespace], bool], str]] = [
    ("verify", "recompute", lambda a: a.memory,
     "--recompute changes nothing without --memory (it is the recomputation --memory measures)"),
    ("verify", "zero", lambda a: bool(a.ranks),
     "--zero changes nothing without --ranks N (it is the ZeRO stage of the sharded step)"),
    ("verify", "tp", lambda a: bool(a.ranks),
     "--tp changes nothing without --ranks N (it is the tensor-parallel degree of the sharded step)"),
    ("flops", "mfu", lambda a: bool(a.gpu or a.peak_tflops),
     "--mfu changes nothing without --gpu NAME or --peak-tflops N (it scales the peak of a training-time estimate)"),
    ("flops", "dtype", lambda a: bool(a.gpu or a.peak_tflops),
     "--dtype changes nothing without --gpu NAME or --peak-tflops N (it chooses the precision of the peak)"),
    ("import", "format", lambda a: not a.output and a.format == "json",
     "--format changes nothing here: `archspec import` prints TOML, or JSON with --format json; "
     "with -o FILE the suffix of FILE chooses"),
    ("fit", "lora_rank", lambda a: a.task == "lora",
     "--lora-rank changes nothing without --task lora (it is the rank of the adapters a LoRA fine-tune trains)"),
    ("fit", "lora_targets", lambda a: a.task == "lora",
     "--lora-targets changes nothing without --task lora (they are the projections a LoRA fine-tune adapts)"),
    ("plot", "format", lambda a: a.format != "markdown",
     "--format markdown changes nothing for `archspec plot` (it prints one line; json or csv give the numbers drawn)"),
]  # fmt: skip


def refuse_unused_options(args: argparse.Namespace) -> None:
    """A SpecError naming an option given where the command makes no use of it."""
    given = getattr(args, "given", set())
    for command, dest, used, needs in UNUSED_UNLESS:
        if args.command == command and dest in given and not used(args):
            raise SpecError(needs)


register("list", cmd_list, "presets with a one-line summary", "archspec list\n  archspec list --format json",
         models=None)  # fmt: skip
register(
    "show",
    cmd_show,
    "the full spec of each MODEL, defaults resolved",
    "archspec show gpt2\n  archspec show my-model.toml --format json\n  archspec show gpt2 --set n_kv_heads=4",
)
register(
    "params",
    cmd_params,
    "exact parameter count by component, with the seed estimate and Kaplan's N",
    "archspec params gpt2\n  archspec params gpt3-175b --format json\n  archspec params gpt2 --set vocab_size=50_304"
    "\n  archspec params glm-4.5-air --mtp",
    add_args=lambda p: p.add_argument(
        "--mtp",
        action="store_true",
        help="count the multi-token-prediction modules of a spec with `mtp` too (component mtp); transformers "
        "does not build them, published totals often include them",
    ),
)
register(
    "compare",
    cmd_compare,
    "models side by side: shape, parameters, FLOPs per token, memory",
    "archspec compare transformer-base gpt2\n  archspec compare gpt2 gpt2-medium gpt2-large gpt2-xl --format markdown",
    add_args=_compare_args,
)
register(
    "flops",
    cmd_flops,
    "exact forward/backward/training FLOPs by component, the published approximations beside them, "
    "and training cost for --tokens on --gpus",
    "archspec flops gpt2 --batch 8 --seq-len 1024\n  archspec flops gpt3-175b --tokens 300e9\n"
    "  archspec flops gpt3-175b --tokens 300e9 --gpu h100 --gpus 1024 --mfu 0.4\n"
    "  archspec flops transformer-base --seq-len 30 --src-len 32 --format json",
    add_args=_flops_args,
)
register(
    "memory",
    cmd_memory,
    "memory for training (weights, gradients, optimizer states, activations) and inference (KV cache)",
    "archspec memory gpt2 --batch 8 --seq-len 1024\n  archspec memory gpt3-175b --gpus 1024 --tp 8 --pp 8 --zero 1\n"
    "  archspec memory gpt3-175b --gpus 64 --zero 3 --recompute full --gpu h100",
    add_args=_memory_args,
)
register(
    "validate",
    cmd_validate,
    "published claims (parameters, training compute) against the exact computation: source, deviation, "
    "status and explanation; all presets when no MODEL is given; a MODEL file in the presets' format "
    "checks your own claims",
    "archspec validate\n  archspec validate gpt2 transformer-base\n  archspec validate my-claims.toml --format json",
    models="*",
)


def _verify_all(reference, specs: list) -> list:
    """reference.verify of every spec, in order; across the machine's cores when there are many (each
    worker builds and counts its own models; the reports are plain data)."""
    import os

    workers = min(os.cpu_count() or 1, 4, len(specs) // 4)
    if workers < 2:
        return [reference.verify(spec) for spec in _progress(specs, "verify", lambda s: s.name)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        # the largest models first, so that no worker is left with one at the end
        order = sorted(range(len(specs)), key=lambda i: -specs[i].n_layers)
        futures = {i: pool.submit(reference.verify, specs[i]) for i in order}
        done = _progress(range(len(specs)), "verify", lambda i: specs[i].name)
        return [futures[i].result() for i in done]


def _verify_memory(args, reference) -> int:
    """verify --memory / --ranks: planned against measured bytes, one row per check."""
    from archspec.render import exact, table

    specs = _specs(args, default_all=True)
    reports = []
    for spec in _progress(specs, "verify", lambda s: s.name):
        if args.memory:
            reports.append(reference.verify_memory(spec, recompute=args.recompute))
        if args.ranks:
            reports.append(reference.verify_ranks(spec, args.ranks, args.zero, args.tp))
    objects = [r.to_dict() for r in reports]
    rows = []
    for r in reports:
        what = f"{r.ranks} ranks, ZeRO {r.zero}, tp {r.tp} (largest rank)" if hasattr(r, "ranks") else (
            f"batch {r.batch} x {r.seq_len}, recompute {r.recompute}")  # fmt: skip
        for k, p in r.checks.items():
            rows.append([r.name, what, k, exact(p.analytic), exact(p.measured), "ok" if p.ok else "MISMATCH"])
        if getattr(r, "skipped", None):
            rows.append([r.name, what, "activations", "", "", "skipped: " + r.skipped.split(": ", 1)[1]])

    def people() -> str:
        bad = sum(not r.ok and not getattr(r, "skipped", None) for r in reports)
        note = ("measured: real fp32 tensors on the CPU (saved tensors through autograd's hooks, each storage once, "
                "the loss included); ranks: gloo processes, one AdamW step; the optimizer's plan includes torch's "
                "4-byte step counter per tensor")  # fmt: skip
        head = ["model", "workload", "quantity", "planned", "measured", "check"]
        summary = "all planned figures equal the measured ones" if not bad else f"{bad} report(s) differ"
        return table(rows, head, args.format, colalign=("left", "left", "left", "right", "right", "left")) + (
            f"\n\n{summary}\n{note}")  # fmt: skip

    _render(args, objects, people)
    return EXIT_OK if all(r.ok or getattr(r, "skipped", None) for r in reports) else EXIT_MISMATCH


def _verify_args(p: argparse.ArgumentParser) -> None:
    from archspec.vocab import RECOMPUTE, ZERO_STAGES

    p.add_argument(
        "--memory",
        action="store_true",
        help="also train one step on the CPU and compare the saved-tensor bytes (flash and eager attention), "
        "the weights and the KV cache with the plan",
    )
    p.add_argument("--recompute", default="none", choices=list(RECOMPUTE),
                   help="with --memory: the recomputation to measure (default none)")  # fmt: skip
    p.add_argument("--ranks", type=positive_int, help="run a sharded AdamW step in N local processes and compare "
                   "each quantity of the largest rank with `archspec memory --gpus N`")  # fmt: skip
    p.add_argument("--zero", type=int, default=3, choices=ZERO_STAGES, help="with --ranks: ZeRO stage (default 3)")
    p.add_argument("--tp", type=positive_int, default=1, help="with --ranks: tensor-parallel degree (default 1)")


register(
    "verify",
    cmd_verify,
    "build the reference model on the meta device and check analytic == instantiated for every tensor, the "
    "parameters and forward FLOPs, component by component; --memory and --ranks measure memory too; "
    "all presets when no MODEL is given (needs torch)",
    "archspec verify\n  archspec verify gpt2 my-model.toml --format json\n"
    "  archspec verify gpt2 --memory --recompute selective\n"
    "  archspec verify gpt2 --set decoder_layers=2 --ranks 2 --zero 3",
    models="*",
    add_args=_verify_args,
)
register(
    "sweep",
    cmd_sweep,
    "one row per combination of --vary values: the varied fields, total and active parameters, forward FLOPs "
    "per token, weights and KV cache per token",
    "archspec sweep gpt2 --vary d_model=512:1024:256 --vary n_heads=8,16\n"
    "  archspec sweep gpt3-6.7b --vary n_kv_heads=1,8,32 --dtype bfloat16\n"
    "  archspec sweep gpt2 --vary activation=gelu,swiglu --set d_ff=2048 --format csv > sweep.csv",
    add_args=_sweep_args,
)
register(
    "plot",
    cmd_plot,
    "draw a PNG or SVG (by the suffix of -o): breakdown (parameters by component), memory (training and inference "
    "memory against sequence length), scaling (parameters and FLOPs per token against a --vary field); "
    "needs the [plot] extra",
    "archspec plot breakdown transformer-base gpt2 bert-base gpt3-175b -o breakdown.svg\n"
    "  archspec plot memory gpt3-xl gpt3-6.7b --gpu h100 --batch 4 -o memory.png\n"
    "  archspec plot scaling gpt2 --vary d_model=384:2304:192 --seq-len 1024 -o scaling.svg\n"
    "  archspec plot memory gpt2 -o memory.svg --format json",
    models=None,
    add_args=_plot_args,
    overrides=True,
)
register(
    "inference",
    cmd_inference,
    "roofline estimate of generation on one accelerator: prefill time (compute-bound), decode time per token "
    "(memory-bound), tokens per second, and the largest batch whose KV cache fits beside the weights",
    "archspec inference gpt2 --gpu h100 --batch 8 --prompt-len 512 --gen-len 256\n"
    "  archspec inference gpt3-175b --gpu h200 --prompt-len 1024 --gen-len 256 --dtype float8_e4m3fn\n"
    "  archspec inference gpt3-6.7b --gpu a100 --batch 32 -p 1500 -g 500 --mbu 0.7 --format json",
    add_args=_inference_args,
)
register(
    "hardware",
    cmd_hardware,
    "the accelerator table: dense peaks per dtype, memory, bandwidth and interconnect, with their sources; "
    "--gpu FILE adds your own",
    "archspec hardware\n  archspec hardware --gpu h100 --gpu mi355x --format json\n"
    "  archspec hardware --gpu my-gpu.toml",
    models=None,
    add_args=lambda p: _gpu_option(p, "only these accelerators"),
)
register(
    "fit",
    cmd_fit,
    "which accelerators, and how many of each, hold each MODEL: one row per accelerator and weight dtype, "
    "with the fewest devices and the layout (tensor parallel degree for inference, ZeRO stage for training "
    "and LoRA)",
    "archspec fit llama-3-70b\n  archspec fit gpt3-175b --task training --gpu h100 --gpu b200\n"
    "  archspec fit llama-2-7b --task lora --lora-rank 64 --lora-targets attention --gpu rtx4090\n"
    "  archspec fit mixtral-8x7b --seq-len 32768 --batch 8 --format json",
    add_args=_fit_args,
)
register(
    "report",
    cmd_report,
    "one self-contained HTML page (inline CSS and SVG, nothing loaded at view time): the comparison, the "
    "breakdowns, the three pictures, memory for training and inference, where each model fits, and the "
    "published claims with their sources; needs the [plot] extra",
    "archspec report gpt2 llama-3-8b mixtral-8x7b -o report.html\n"
    "  archspec report deepseek-v3 --seq-len 32768 --gpu h200 --gpu b200 -o deepseek.html",
    add_args=_report_args,
)
register(
    "import",
    cmd_import,
    "the archspec spec file of a Hugging Face config.json (TOML on stdout, or -o FILE by its suffix): "
    "transformers' defaults for missing keys, the head of the class in `architectures`; keys the spec "
    "cannot represent are refused by name",
    "archspec import Llama-3-8B/config.json\n  archspec import mixtral/config.json -o mixtral.toml\n"
    "  archspec import t5-base.json --format json\n  archspec import flan-t5-xxl/ --set tie_embeddings=false",
    models=None,
    add_args=_import_args,
    default_format=None,
    formats=(["json"], "json: print the spec as JSON instead of TOML (with -o, the suffix decides)"),
    overrides=True,
)
register(
    "schema",
    cmd_schema,
    "the JSON Schema of a spec file (--format table lists the fields)",
    "archspec schema > modelspec.schema.json\n  archspec schema --format table",
    models=None,
    default_format=None,
    formats=(list(FORMATS), "json (default): the JSON Schema; table, markdown or csv: the fields listed"),
)


class _Completion(argparse.Action):
    """--print-completion SHELL: the completion script of the whole parser, by shtab."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            import shtab
        except ImportError:
            parser.error("shell completion needs shtab: pip install shtab")
        sys.stdout.write(shtab.complete(parser, shell=values))
        parser.exit(EXIT_OK)


def build_parser(command: str | None = None) -> Parser:
    """The argument parser. With `command` (the first argument), only that subcommand is built: a
    command starts with the parser it needs; `archspec --help` and a bad command build them all."""
    parser = Parser(
        prog="archspec",
        description=(
            "Exact parameter counts, FLOPs and memory for Transformer architectures, "
            "checked against the real PyTorch model and against published claims."
        ),
        epilog="examples:\n  archspec compare transformer-base gpt2 gpt3-175b\n  archspec params gpt2 --format json\n"
        "  archspec COMMAND --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from archspec import __version__

    parser.add_argument("--version", action="version", version=f"archspec {__version__}")
    parser.command = command
    if command is None:  # the whole parser: shell completion knows every command and option
        parser.add_argument(
            "--print-completion",
            choices=["bash", "zsh", "fish"],
            action=_Completion,
            help="print a shell completion script (shtab), e.g. archspec --print-completion bash > "
            "~/.local/share/bash-completion/completions/archspec",
        )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, c in COMMANDS.items():
        if command is not None and name != command:
            continue
        p = sub.add_parser(
            name,
            help=c["help"],
            description=c["help"][0].upper() + c["help"][1:] + ".",
            epilog="examples:\n  " + c["examples"],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _common(p, c["models"], c["overrides"])
        p.set_defaults(format=c["default_format"], given=p.given)
        if c.get("formats"):  # a command whose output is not a table says what --format means for it
            fmt = next(a for a in p._actions if a.dest == "format")
            fmt.choices, fmt.help = c["formats"]
        if c["add_args"]:
            c["add_args"](p)
        p.set_defaults(run=c["run"])
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
            args = parser.parse_args(argv)
        except SystemExit:  # --help, --version (printed on stdout) or a usage error (one line on stderr)
            _write_stdout(None)
            raise
        refuse_unused_options(args)
        try:
            code = args.run(args)
        except NoAdapter as exc:
            raise SpecError(_no_spec(exc, args.command)) from None
        _write_stdout(None)
        return code
    except SpecError as exc:
        if _progress_state["live"]:
            _progress_write(None)
        sys.stderr.write(f"archspec: error: {one_line(str(exc))}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `archspec list | head`
        _discard_stdout()
        return EXIT_OK
    except OutputError as exc:  # `archspec list > /dev/full`
        _discard_stdout()
        sys.stderr.write(f"archspec: error: cannot write the output: {one_line(str(exc))}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("archspec: interrupted\n")
        return 130


def _discard_stdout() -> None:
    """Point the standard output at the null device, so that what is left in its buffer cannot fail
    again when the interpreter exits (Python's advice for a closed pipe)."""
    import contextlib
    import os

    with contextlib.suppress(AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
