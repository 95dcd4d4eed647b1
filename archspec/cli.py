"""The `archspec` command line: a thin renderer over the pure functions of the package.

Every command takes MODEL arguments (a preset name or a spec file), ``--format`` and ``--set``.
Exit codes: 0 done, 1 a check found a mismatch, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from archspec.errors import SpecError
from archspec.render import FORMATS

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2

ROUNDING_NOTE = (
    "Counts rounded for reading (K = 10^3, M = 10^6, B = 10^9, T = 10^12); --format json gives exact integers."
)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"archspec: error: {message} (see `{self.prog} --help`)\n")
        sys.exit(EXIT_BAD_INPUT)


# ---------------------------------------------------------------- option types


def _number_type(kind: str, *, minimum: float | None = None, strict_min: bool = True, integer: bool = True):
    def parse(text: str):
        from archspec.loading import parse_number

        try:
            value = parse_number(text, kind)
        except SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if integer and not isinstance(value, int):
            raise argparse.ArgumentTypeError(f"{kind}: {text!r} is not a whole number")
        if minimum is not None and (value <= minimum if strict_min else value < minimum):
            bound = f"greater than {minimum:g}" if strict_min else f"at least {minimum:g}"
            raise argparse.ArgumentTypeError(f"{kind}: must be {bound}, got {text}")
        return value

    parse.__name__ = kind
    return parse


positive_int = _number_type("a positive whole number", minimum=0)
positive_number = _number_type("a positive number", minimum=0, integer=False)


# ---------------------------------------------------------------- shared plumbing


def _common(p: argparse.ArgumentParser, models: str | None = "+") -> None:
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


def _emit(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")


def _render(args, objects: list[dict[str, Any]], people: Callable[[], str]) -> None:
    from archspec.render import to_csv, to_json

    if args.format == "json":
        _emit(to_json(objects))
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
            blocks.append(table(rows, ["field", "value", ""], args.format))
        return "\n\n".join(blocks)

    _render(args, objects, people)
    return EXIT_OK


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


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

    specs = _specs(args)
    counts = [count_params(s) for s in specs]
    objects = [c.to_dict() for c in counts]

    def people() -> str:
        blocks = []
        for spec, c in zip(specs, counts):
            rows = [[name, human(n), exact(n), pct(c.share(name))] for name in COMPONENTS if (n := c.components[name])]
            rows.append(["total", human(c.total), exact(c.total), pct(1.0)])
            head = f"{spec.name}: {spec.kind}, {_layers(spec)} layers, d_model {spec.d_model}"
            per = "; ".join(
                f"{stack} layer {human(v['total'])} ({exact(v['total'])})" for stack, v in c.per_layer.items()
            )
            dev = (c.estimate - c.total) / c.total
            lines = [
                head,
                table(
                    rows,
                    ["component", "params", "exact", "share"],
                    args.format,
                    colalign=("left", "right", "right", "right"),
                ),
                f"per layer: {per}",
                f"non-embedding (Kaplan's N): {human(c.non_embedding)} ({exact(c.non_embedding)})",
                f"seed estimate 12*L*d^2 + V*d: {human(c.estimate)} ({exact(c.estimate)}), {signed_pct(dev)} vs exact; "
                "leaves out biases, norms, position tables, cross-attention and any other departure "
                "from the GPT-2 block",
            ]
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks) + "\n\n" + ROUNDING_NOTE

    _render(args, objects, people)
    return EXIT_OK


# ---------------------------------------------------------------- compare


def compare_columns(spec, count, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": spec.name,
        "kind": spec.kind,
        "encoder_layers": spec.encoder_layers,
        "decoder_layers": spec.decoder_layers,
        "d_model": spec.d_model,
        "n_heads": spec.n_heads,
        "n_kv_heads": spec.n_kv_heads,
        "d_head": spec.d_head,
        "d_ff": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_positions": spec.max_positions,
        "total": count.total,
        "non_embedding": count.non_embedding,
        "estimate": count.estimate,
        "components": dict(count.components),
        **(extra or {}),
    }


def cmd_compare(args) -> int:
    from archspec.params import count_params
    from archspec.render import human, table

    specs = _specs(args)
    counts = [count_params(s) for s in specs]
    extras = [_compare_extras(args, s, c) for s, c in zip(specs, counts)]
    objects = [compare_columns(s, c, e) for s, c, e in zip(specs, counts, extras)]

    def people() -> str:
        headers = ["model", "layers", "d_model", "heads", "d_head", "d_ff", "vocab", "ctx", "params", "non-emb"]
        rows = []
        for s, c, e in zip(specs, counts, extras):
            row = [
                s.name,
                _layers(s),
                s.d_model,
                _heads(s),
                s.d_head,
                s.d_ff,
                f"{s.vocab_size:,}",
                s.max_positions,
                human(c.total),
                human(c.non_embedding),
            ]
            row += [e[k]["text"] for k in e]
            rows.append(row)
        headers += [e["label"] for e in (extras[0].values() if extras else [])]
        note = _compare_note(args)
        return table(rows, headers, args.format) + "\n\n" + ROUNDING_NOTE + (("\n" + note) if note else "")

    _render(
        args,
        [{k: (v["value"] if isinstance(v, dict) and "value" in v else v) for k, v in o.items()} for o in objects],
        people,
    )
    return EXIT_OK


def _compare_extras(args, spec, count) -> dict[str, dict[str, Any]]:
    """Extra compare columns: {key: {"label", "value", "text"}}."""
    return {}


def _compare_note(args) -> str:
    return ""


# ---------------------------------------------------------------- schema


def cmd_schema(args) -> int:
    import json

    from archspec.render import table
    from archspec.spec import ModelSpec

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
        rows.append([name, kind, default, info.get("description", "")])
    if args.format == "csv":
        from archspec.render import to_csv

        _emit(to_csv([dict(zip(["field", "type", "default", "meaning"], r)) for r in rows]))
    else:
        _emit(table(rows, ["field", "type", "default", "meaning"], args.format))
    return EXIT_OK


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
    from archspec.params import COMPONENTS, count_params
    from archspec.render import exact, table

    reference = _reference()
    specs = _specs(args, default_all=True)
    objects, rows = [], []
    for spec in specs:
        analytic = count_params(spec)
        model = reference.build(spec, device="meta")
        measured = reference.count_by_component(model)
        instantiated = reference.count_total(model)
        bad = [c for c in COMPONENTS if analytic.components[c] != measured[c]]
        ok = not bad and analytic.total == instantiated
        obj = {
            "name": spec.name,
            "analytic": analytic.total,
            "instantiated": instantiated,
            "ok": ok,
            "components": {c: {"analytic": analytic.components[c], "instantiated": measured[c]} for c in COMPONENTS},
            "mismatched_components": bad,
        }
        objects.append(obj)
        detail = (
            "all components equal"
            if not bad
            else "differ: " + ", ".join(f"{c} {analytic.components[c]:,} vs {measured[c]:,}" for c in bad)
        )
        rows.append([spec.name, exact(analytic.total), exact(instantiated), detail, "ok" if ok else "MISMATCH"])

    def people() -> str:
        n_bad = sum(not o["ok"] for o in objects)
        summary = (
            f"{len(objects)} model(s): analytic == instantiated for all"
            if not n_bad
            else f"{n_bad} of {len(objects)} model(s) differ"
        )
        note = "instantiated: unique parameters of archspec.reference.build(spec, device='meta'), by component"
        headers = ["model", "analytic", "instantiated", "components", "check"]
        align = ("left", "right", "right", "left", "left")
        return table(rows, headers, args.format, colalign=align) + (f"\n\n{summary}\n{note}")

    _render(args, objects, people)
    return EXIT_OK if all(o["ok"] for o in objects) else EXIT_MISMATCH


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
) -> None:
    """Add a subcommand: `models` is argparse's nargs for MODEL ('+', '*', or None for none)."""
    COMMANDS[name] = dict(run=run, help=help, examples=examples, models=models, add_args=add_args,
                          default_format=default_format)  # fmt: skip


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
    "archspec params gpt2\n  archspec params gpt3-175b --format json\n  archspec params gpt2 --set vocab_size=50_304",
)
register(
    "compare",
    cmd_compare,
    "models side by side: shape, parameters, FLOPs per token, memory",
    "archspec compare transformer-base gpt2\n  archspec compare gpt2 gpt2-medium gpt2-large gpt2-xl --format markdown",
)
register(
    "verify",
    cmd_verify,
    "build the reference model on the meta device and check analytic == instantiated, component by "
    "component; all presets when no MODEL is given (needs torch)",
    "archspec verify\n  archspec verify gpt2 my-model.toml --format json",
    models="*",
)
register(
    "schema",
    cmd_schema,
    "the JSON Schema of a spec file (--format table lists the fields)",
    "archspec schema > modelspec.schema.json\n  archspec schema --format table",
    models=None,
    default_format=None,
)


def build_parser() -> Parser:
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, c in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=c["help"],
            description=c["help"][0].upper() + c["help"][1:] + ".",
            epilog="examples:\n  " + c["examples"],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _common(p, c["models"])
        p.set_defaults(format=c["default_format"])
        if c["add_args"]:
            c["add_args"](p)
        p.set_defaults(run=c["run"])
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except SpecError as exc:
        sys.stderr.write(f"archspec: error: {exc}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `archspec list | head`
        return EXIT_OK
