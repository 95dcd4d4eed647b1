"""The fast `replace` held to full validation (tests/test_compiled.py, tests/test_planning.py): for the same
given fields and changes, both refuse, or both give the same spec with the same given fields."""

from __future__ import annotations

from archspec.core.errors import SpecError
from archspec.spec.model import ModelSpec


def validated_afresh(spec: ModelSpec, changes: dict) -> ModelSpec | Exception:
    """The spec full validation makes of `spec`'s given fields with `changes`, or its error."""
    try:
        return ModelSpec.model_validate({k: getattr(spec, k) for k in spec.model_fields_set} | changes)
    except Exception as exc:  # noqa: BLE001  (pydantic's error: only whether there is one matters here)
        return exc


def replaced_as_validated(spec: ModelSpec, changes: dict) -> tuple[ModelSpec, ModelSpec] | None:
    """(spec.replace(**changes), the spec full validation makes of the same fields), equal with the same given
    fields; None where both refuse. An AssertionError where one refuses what the other takes, or they differ."""
    fresh = validated_afresh(spec, changes)
    try:
        fast = spec.replace(**changes)
    except SpecError as exc:
        assert isinstance(fresh, Exception), f"replace refused what validation takes: {exc}"
        return None
    assert not isinstance(fresh, Exception), f"replace took what validation refuses: {fresh}"
    assert fast == fresh and fast.model_fields_set == fresh.model_fields_set
    return fast, fresh
