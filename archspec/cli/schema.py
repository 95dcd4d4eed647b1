"""`archspec schema`: the JSON Schema of a spec file (--format table lists the fields)."""

from __future__ import annotations

from archspec.cli.output import EXIT_OK, emit, fmt_value
from archspec.render.text import FORMATS as OUTPUT_FORMATS

HELP = "the JSON Schema of a spec file (--format table lists the fields)"
EXAMPLES = "archspec schema > modelspec.schema.json\n  archspec schema --format table"
MODELS = None
DEFAULT_FORMAT = None
FORMATS = (list(OUTPUT_FORMATS), "json (default): the JSON Schema; table, markdown or csv: the fields listed")


def run(args) -> int:
    import json

    from archspec.render.text import table
    from archspec.spec.model import SUBTABLES, TABLES, ModelSpec

    schema = _with_older_names(ModelSpec.model_json_schema())
    if args.format in ("json", None):
        emit(json.dumps(schema, indent=2))
        return EXIT_OK
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    rows = []
    for name, info in props.items():
        kind = info.get("type") or " | ".join(str(x.get("const", x.get("type"))) for x in info.get("anyOf", []))
        if "enum" in info:
            kind = " | ".join(info["enum"])
        default = "required" if name in required else fmt_value(info.get("default", "derived"))
        field = "mixer" if name == "attention" else name  # the older name of the same table
        if field in SUBTABLES:  # a kind, or a table with one: its kinds and the default one
            kind = "table: kind " + " | ".join(SUBTABLES[field])
            default = ModelSpec.model_fields[field].default_factory().kind
        elif name in TABLES:
            fields = ", ".join(TABLES[name].model_fields)
            kind = f"boolean | table {{{fields}}}" if name == "bias" else f"table {{{fields}}}"
            default = "true" if name == "bias" else "-"
        rows.append([name, kind, default, info.get("description", "")])
    if args.format == "csv":
        from archspec.render.text import to_csv

        emit(to_csv([dict(zip(["field", "type", "default", "meaning"], r)) for r in rows]))
    else:
        emit(table(rows, ["field", "type", "default", "meaning"], args.format))
    return EXIT_OK


def _with_older_names(schema: dict) -> dict:
    """`attention`, the token mixer's older name, beside `mixer` (in the spec and in a layer kind) as the
    deprecated property it is: files that say it stay valid against the schema."""
    for where in (schema, schema["$defs"]["LayerKind"]):
        props = {}
        for name, info in where["properties"].items():
            props[name] = info
            if name == "mixer":
                props["attention"] = {
                    **info,
                    "deprecated": True,
                    "description": "the older name of mixer, still read; give one of them",
                }
        where["properties"] = props
    return schema
