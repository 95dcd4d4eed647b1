"""The base of the spec's sub-tables: a frozen, strict table, a union member discriminated by its
``kind``, and how a bare string names a member with its defaults (archspec.spec.subtables and
archspec.spec.mixer_tables build on it)."""

# Annotations are objects, not strings (no `from __future__ import annotations`): pydantic evaluates
# every string annotation when the class is defined, at every start-up.
from typing import Annotated, Any, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_serializer

# A feature that brings fields of its own is a small typed model, one member of a union that a
# `kind` tag discriminates (`head = {kind = "lm", bias = true}`). Each checks its own fields; the
# rules that reach across tables are archspec.spec.model.ModelSpec's. A bare string names a member
# with its defaults (`head = "none"` is `head = {kind = "none"}`), so a flat field can grow into a
# table without breaking any file that used the string; a member with nothing but defaults is
# written back as that string. New kinds are new members, not new flags.


class _Table(BaseModel):
    # defer_build: each validator is built on first validation, not at import (see ModelSpec)
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class _Member(_Table):
    kind: str

    @model_serializer(mode="wrap")
    def _as_shorthand(self, handler):
        """A member with only default fields is written as its kind: `position = "rotary"`."""
        defaults = all(getattr(self, f) == info.get_default(call_default_factory=True)
                       for f, info in type(self).model_fields.items() if f != "kind")  # fmt: skip
        return self.kind if defaults else handler(self)


def _shorthand(value: Any, default: str | None = None) -> Any:
    """'lm' -> {'kind': 'lm'}: a bare string names a member with its defaults; a table without a kind
    is of the field's default kind (`[attention] qk_norm = "head"` is standard attention)."""
    if isinstance(value, str):
        return {"kind": value}
    if default is not None and isinstance(value, dict) and "kind" not in value:
        return {"kind": default, **value}
    return value


def _union(*members: type[_Member]):
    """A sub-table field: one of `members` by its `kind`, the first member when the table names none."""
    default = members[0].model_fields["kind"].default
    return Annotated[
        Union[members],  # noqa: UP007
        Field(discriminator="kind"),
        BeforeValidator(lambda value: _shorthand(value, default)),
    ]
