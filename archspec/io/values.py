"""Values as a person writes them on the command line: numbers exactly ('50_257', '300e9'), `--set`
assignments read by their field's type. archspec.io.loading re-exports them."""

from __future__ import annotations

import math
import re
import typing
from typing import Any

from archspec.core.errors import SpecError, clip, shown
from archspec.core.limits import (
    MAX_EXPONENT,
    MAX_INTEGER,
    MAX_INTEGER_BITS,
    MAX_NUMBER_CHARS,
    digits_of,
    integer_too_large,
)
from archspec.spec.model import ModelSpec

_MAX_INTEGER_DIGITS = digits_of(MAX_INTEGER)
_DIGITS = r"[0-9](?:_?[0-9])*"
_NUMBER = rf"([+-]?)((?:{_DIGITS})(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE]([+-]?{_DIGITS}))?"
_NUMERIC_LOOKING = r"(?i)[+-]?(?:\.?[0-9]|nan\b|inf)"


# size suffixes: K, M, B (or G), T as counts (10^3 ...); K and M as token lengths (binary: 8K = 8,192 tokens)
SIZE_SUFFIXES = {"k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
LENGTH_SUFFIXES = {**SIZE_SUFFIXES, "k": 2**10, "m": 2**20}


def parse_number(text: str, what: str = "value", *, integer: bool = False, length: bool = False) -> int | float:
    """A number as written on the command line, exactly: '50_257' -> 50257, '300e9' and '1e19' ->
    the integers they are (no float in between), '0.4' -> 0.4. With `integer`, a value that is not a
    whole number ('4097.0000000000001') is refused rather than rounded. 'nan', 'inf', numbers beyond
    MAX_INTEGER, exponents beyond MAX_EXPONENT and non-zero values too small for a float are refused."""
    from decimal import Decimal

    if not isinstance(text, str):
        raise TypeError(f"{what}: expected text, got {type(text).__name__}")
    s = text.strip()
    scales = LENGTH_SUFFIXES if length else SIZE_SUFFIXES  # '300B', '1.5T'; a length's '8k' is 8,192
    scale = scales.get(s[-1:].lower()) if len(s) > 1 and (s[-2:-1].isdigit() or s[-2:-1] == ".") else None
    if scale is not None:
        s = s[:-1]
    if len(s) > MAX_NUMBER_CHARS:
        raise SpecError(f"{what}: {shown(text)} is too long for a number ({len(s):,} characters)")
    m = re.fullmatch(_NUMBER, s)
    if not m:
        if s.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise SpecError(f"{what}: {shown(text)} is not a finite number")
        units = ", ".join(k.upper() for k in scales)
        raise SpecError(f"{what}: {shown(text)} is not a number (e.g. 1024, 50_257, 300e9, 0.4; suffixes {units})")
    sign, mantissa, exponent = m.groups()
    exp10 = int(exponent.replace("_", "")) if exponent else 0
    if abs(exp10) > MAX_EXPONENT:
        raise SpecError(f"{what}: {shown(text)} is out of range; exponents are limited to +-{MAX_EXPONENT}")
    value = Decimal(f"{sign}{mantissa.replace('_', '')}e{exp10}")
    if scale is not None:  # exactly: a Decimal product rounds to the context's precision
        from decimal import localcontext

        with localcontext() as ctx:
            ctx.prec = len(s) + 20
            value = value * scale
    if value == value.to_integral_value():
        if value.adjusted() > _MAX_INTEGER_DIGITS:  # refused by its size, before it becomes an int
            raise SpecError(f"{what}: {shown(text)}: {integer_too_large(value.adjusted() + 1)}")
        n = int(value)
        if n.bit_length() > MAX_INTEGER_BITS:
            raise SpecError(f"{what}: {shown(text)}: {integer_too_large(digits_of(n))}")
        return n
    if integer:
        raise SpecError(f"{what}: {shown(text)} is not a whole number")
    f = float(value)
    if not math.isfinite(f):
        raise SpecError(f"{what}: {shown(text)} is too large for a floating-point number")
    if f == 0.0:
        raise SpecError(f"{what}: {shown(text)} is too small for a floating-point number (it would be 0)")
    return f


def looks_numeric(text: str) -> bool:
    """Text that is meant as a number (a digit, a leading point and digit, nan, inf), valid or not."""
    return bool(re.match(_NUMERIC_LOOKING, text.strip()))


def parse_value(text: str, what: str = "value") -> Any:
    """A --set value: a number, true/false, null (clears an optional field: None), or a string. Text
    meant as a number that is not a valid one (1e999, nan) is an error rather than a string."""
    s = text.strip()
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if re.fullmatch(_NUMBER, s) or low.lstrip("+-") in ("nan", "inf", "infinity"):
        return parse_number(s, what)
    return s


def _field_kind(key: str) -> str:
    """'int', 'bool', 'str' or '' (unknown) for a spec field, from its annotation."""
    field = ModelSpec.model_fields.get(key)
    if field is None:
        return ""
    annotation = field.annotation
    if annotation is bool or bool in typing.get_args(annotation):  # bias: true/false, or a table
        return "bool"
    if annotation is int:
        return "int"
    if annotation is str or (
        typing.get_origin(annotation) is typing.Literal and all(isinstance(a, str) for a in typing.get_args(annotation))
    ):
        return "str"
    return ""


def parse_assignments(items: list[str] | None) -> dict[str, Any]:
    """['d_model=1024', 'bias=false'] -> {'d_model': 1024, 'bias': False}. A value is read by its
    field's type: a whole number for an integer field (never rounded), text for a text field."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise SpecError(f"--set {shown(item)}: expected FIELD=VALUE, e.g. --set d_model=1024")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key:
            raise SpecError(f"--set {shown(item)}: the field name is empty; expected FIELD=VALUE")
        what = f"--set {clip(key, 40)}"
        kind = _field_kind(key)
        if kind == "str":
            out[key] = value.strip()
        elif kind == "int" and looks_numeric(value):
            out[key] = parse_number(value, what, integer=True)
        else:
            out[key] = parse_value(value, what)
    return out
