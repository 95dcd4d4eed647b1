"""Reading spec files (.toml, .json, .yaml) and parsing command-line values."""

from __future__ import annotations

import math
import os
import re
import stat
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from archspec.core.errors import SpecError, clip, one_line, shown
from archspec.core.limits import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_INTEGER,
    MAX_INTEGER_BITS,
    MAX_YAML_NODES,
    digits_of,
    file_too_large,
    integer_too_large,
    too_deep,
    too_many_yaml_nodes,
)

# re-exported: what the command line writes is read by archspec.io.values
from archspec.io.values import looks_numeric as looks_numeric
from archspec.io.values import parse_assignments as parse_assignments
from archspec.io.values import parse_number as parse_number
from archspec.io.values import parse_value as parse_value
from archspec.spec.model import ModelSpec, describe_spec_error

if TYPE_CHECKING:
    from archspec.sources.stored import Source

SUFFIXES = (".toml", ".json", ".yaml", ".yml")


def _where(path: str | Path) -> str:
    return clip(str(path), 200)


def read_text(path: str | Path) -> str:
    """The text of a regular file of at most MAX_FILE_BYTES bytes, in UTF-8 (a byte-order mark is
    dropped), or a SpecError naming the problem. Nothing but a regular file is opened, and nothing
    beyond the limit is read: a FIFO, a device (/dev/zero, also through a symlink) or a directory
    is refused by what it is."""
    where = _where(path)
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise SpecError(f"{where}: no such file") from None
    except (OSError, ValueError) as exc:  # name too long, a loop of links, no permission, a NUL byte
        raise SpecError(f"{where}: cannot read: {_reason(exc)}") from None
    _check_regular(where, info.st_mode)
    if info.st_size > MAX_FILE_BYTES:
        raise SpecError(f"{where}: the file is {file_too_large(info.st_size)}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as f:
            _check_regular(where, os.fstat(f.fileno()).st_mode)  # the same file that was checked
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"{where}: cannot read: {_reason(exc)}") from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(f"{where}: the file is {file_too_large()}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SpecError(f"{where}: not UTF-8 text (an invalid byte on line {line}); save the file as UTF-8") from None


def _reason(exc: Exception) -> str:
    return (getattr(exc, "strerror", None) or str(exc)).lower()


def _check_regular(where: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    raise SpecError(f"{where}: is {kind}, not a spec file; give a .toml, .json or .yaml file")


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level table of a .toml, .json or .yaml file, or a SpecError naming the problem."""
    return _read_mapping(path)[0]


def _read_mapping(path: str | Path) -> tuple[dict[str, Any], str]:
    """read_mapping's table, and the file's text."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a path (str or pathlib.Path), got {type(path).__name__} {shown(path)}")
    path = Path(path)
    text = read_text(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise SpecError(
            f"{_where(path)}: unsupported file type {clip(suffix) or '(none)'!r}; use .toml, .json or .yaml"
        )
    if not text.strip():
        raise SpecError(f"{_where(path)}: file is empty; a spec file holds the spec fields at its top level")
    data = parse_text(path, suffix, text)
    if not isinstance(data, dict):
        raise SpecError(f"{_where(path)}: the top level must be a table of spec fields, not {type(data).__name__}")
    return data, text


def parse_text(path: Path, suffix: str, text: str) -> Any:
    """Parse TOML, JSON or YAML (safe loading only), naming the format in the error. Nesting deeper
    than MAX_DEPTH, integers beyond MAX_INTEGER, numbers that are not finite, duplicate keys and
    YAML aliases that expand beyond MAX_YAML_NODES values are refused."""
    where = _where(path)
    fmt = {".toml": "TOML", ".json": "JSON"}.get(suffix, "YAML")
    try:
        if suffix == ".toml":
            data = _parse_toml(where, text)
        elif suffix == ".json":
            data = _parse_json(where, text)
        else:
            data = _parse_yaml(where, text)
    except RecursionError:
        raise SpecError(f"{where}: malformed {fmt}: {too_deep()}") from None
    except ValueError as exc:
        if isinstance(exc, SpecError):
            raise
        if "digits" in str(exc):  # Python's limit on converting long integer text (4,300 digits)
            raise SpecError(f"{where}: {integer_too_large()}") from None
        raise SpecError(f"{where}: malformed {fmt}: {one_line(str(exc), 300)}") from None
    # a Hugging Face config.json may hold Infinity or NaN in keys that do not change the model; archspec.hf
    # refuses them where they would reach the spec
    check_data(data, where, finite=not (suffix == ".json" and is_hf_config(data)))
    return data


# patterns are compiled on first use (re caches them): a command that reads no file never needs them
_MANY_DOTS = r"(?:\.[^=\[\]{},\n.]*){" + str(MAX_DEPTH + 1) + "}"


def _check_toml_keys(where: str, text: str) -> None:
    """Refuse a dotted key of more than MAX_DEPTH parts before tomllib sees it (its cost grows with
    the square of the parts). One pass: strings and comments are skipped, and '=', brackets, braces,
    commas and line ends end a key."""
    if not re.search(_MANY_DOTS, text):  # the common case, in C: no run of dots that long at all
        return
    i, n, dots = 0, len(text), 0
    while i < n:
        c = text[i]
        if c == "." and (dots := dots + 1) > MAX_DEPTH:
            line = text.count("\n", 0, i) + 1
            raise SpecError(f"{where}: malformed TOML: a dotted key {too_deep(f'line {line}')}")
        if c in "=[]{},\n":
            dots = 0
        elif c == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        elif c in "\"'":
            i = _skip_toml_string(text, i)
            continue
        i += 1


def _skip_toml_string(text: str, i: int) -> int:
    """The index just past the string starting at text[i] (or the end of the line for an unclosed one)."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        end, j = quote * 3, i + 3
    else:
        end, j = quote, i + 1
    while True:
        k = text.find(end, j)
        stop = text.find("\n", j) if len(end) == 1 else -1
        if k < 0 or (0 <= stop < k):
            return len(text) if k < 0 and stop < 0 else (stop if stop >= 0 else len(text))
        if quote == '"':  # an escaped quote does not close a basic string
            backslashes = len(text[j:k]) - len(text[j:k].rstrip("\\"))
            if backslashes % 2:
                j = k + 1
                continue
        return k + len(end)


def _parse_toml(where: str, text: str) -> Any:
    if sys.version_info >= (3, 11):  # imported here: packaged presets are read from a cache (see catalog)
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    _check_toml_keys(where, text)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"at line (\d+)", message)
        if found and ("overwrite" in message or "Cannot declare" in message):
            line = text.splitlines()[int(found.group(1)) - 1] if int(found.group(1)) <= text.count("\n") + 1 else ""
            key = line.split("=", 1)[0].strip().strip("[]").strip() if line else ""
            if key:
                message = f"duplicate key {shown(key)} ({message})"
        raise SpecError(f"{where}: malformed TOML: {one_line(message, 300)}") from None


def _parse_json(where: str, text: str) -> Any:
    import json

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise SpecError(f"{where}: malformed JSON: duplicate key {shown(key)}; each key may appear once")
            out[key] = value
        return out

    def integer(digits: str) -> int:
        if len(digits) > _MAX_INTEGER_DIGITS + 1:  # refused by length, before the conversion
            raise SpecError(f"{where}: {integer_too_large(len(digits.lstrip('-')))}")
        return int(digits)

    non_finite: list[str] = []

    def constant(name: str) -> Any:
        non_finite.append(name)
        return float(name)

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_int=integer, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{where}: malformed JSON: {one_line(str(exc), 300)}") from None
    if non_finite and not is_hf_config(data):  # a released config.json may hold them (Nemotron-H's time_step_limit)
        raise SpecError(f"{where}: malformed JSON: {non_finite[0]} is not a finite number")
    return data


def _parse_yaml(where: str, text: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise SpecError(f"{where}: reading YAML needs PyYAML (pip install pyyaml); or use .toml or .json") from None
    _check_yaml_brackets(where, text)
    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_nodes(where, node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise SpecError(f"{where}: malformed YAML: {one_line(str(exc), 300)}") from None
    finally:
        loader.dispose()


_BRACKETS = r"[\[\]{}]"


def _check_yaml_brackets(where: str, text: str) -> None:
    """Refuse flow collections ([...], {...}) nested beyond MAX_DEPTH before PyYAML scans them (its
    scanner slows with the square of the depth). Brackets are counted everywhere, quoted or not: a
    spec file has no use for more than a few."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for m in re.finditer(_BRACKETS, text):
        depth = depth + 1 if m.group() in "[{" else max(depth - 1, 0)
        if depth > MAX_DEPTH:
            line = text.count("\n", 0, m.start()) + 1
            raise SpecError(f"{where}: malformed YAML: brackets {too_deep(f'line {line}')}")


@cache
def _yaml_loader():
    """yaml's safe loader (libyaml's when installed) that refuses duplicate keys (explicit keys;
    values merged with `<<` may be overridden)."""
    import yaml

    class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                        continue
                    key = self.construct_object(key_node)
                    if key in seen:
                        mark = key_node.start_mark
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {shown(key)} on line {mark.line + 1}; each key may appear once"
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _check_yaml_nodes(where: str, root) -> None:
    """Count the values of a composed YAML document as it would expand (an alias counts its whole
    anchored value again) and its depth, before anything is constructed."""
    import yaml

    count, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise SpecError(f"{where}: {too_many_yaml_nodes()}")
        if depth > MAX_DEPTH:
            raise SpecError(f"{where}: {too_deep(f'line {node.start_mark.line + 1}')}")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


_MAX_INTEGER_DIGITS = digits_of(MAX_INTEGER)


def _passes(value: Any, finite: bool) -> bool:
    """A leaf that check_data accepts as it stands (text, a truth value, None, a number in range): the
    walk skips it rather than carry its path, which only an error needs."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return value.bit_length() <= MAX_INTEGER_BITS
    return kind is float and (not finite or math.isfinite(value))


def check_data(data: Any, where: str, finite: bool = True) -> None:
    """Walk parsed data without recursion: depth at most MAX_DEPTH, text keys, integers within
    MAX_INTEGER and (unless `finite` is false) finite floats, each refused with the path of the value."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, at, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SpecError(f"{where}: {too_deep(clip(at, 60))}")
        label = f"{where}: {at}" if at else where
        if isinstance(value, dict):
            for key, child in value.items():
                if not isinstance(key, str):
                    raise SpecError(f"{label}: keys must be text, got {shown(key)}")
                if depth >= MAX_DEPTH or not _passes(child, finite):  # a leaf that passes needs no path
                    stack.append((child, f"{at}.{clip(key, 40)}" if at else clip(key, 40), depth + 1))
        elif isinstance(value, list):
            stack.extend((child, f"{at}[{i}]", depth + 1) for i, child in enumerate(value)
                         if depth >= MAX_DEPTH or not _passes(child, finite))  # fmt: skip
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int):
            if value.bit_length() > MAX_INTEGER_BITS:
                raise SpecError(f"{label}: {integer_too_large(digits_of(value))}")
        elif finite and isinstance(value, float) and not math.isfinite(value):
            raise SpecError(f"{label}: {value} is not a finite number")


def build_spec(data: dict[str, Any], where: str = "") -> ModelSpec:
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(describe_spec_error(err, where, isinstance(data, dict) and "attention" in data)) from None


@dataclass(frozen=True)
class Loaded:
    """A model as read: its spec, what reading it told the user (a Hugging Face config.json's notes: a
    multimodal wrapper's uncounted towers, an alias, a tying that transformers overrides; a spec file and
    a preset tell nothing), and, for a checkpoint, a GGUF file or a Hub id, where it was read from
    (archspec.sources.stored.Source: its stored tensors and their formats, for `check` and the weights
    of `memory`, `inference` and `fit`)."""

    spec: ModelSpec
    notes: tuple[str, ...] = ()
    source: Source | None = None


def load(path: str | Path) -> Loaded:
    """The model of a .toml, .json or .yaml file holding the fields at its top level, or of a Hugging
    Face config.json (a JSON object with model_type) or a folder holding one, with its notes."""
    if isinstance(path, (str, os.PathLike)) and _is_dir(path):
        if not _is_file(Path(path) / "config.json"):
            raise SpecError(
                f"{_where(path)}: is a directory without a config.json; give a spec file (.toml, .json, .yaml), "
                "a Hugging Face config.json or a folder holding one"
            )
        return _load_config(path)
    data, _ = _read_mapping(path)
    if Path(path).suffix.lower() == ".json" and is_hf_config(data):
        from archspec import hf

        imported = hf.from_mapping(data, hf.spec_name(Path(path)), _where(path))
        return Loaded(build_spec(imported.data, _where(path)), tuple(imported.notes))
    if "models" in data and "name" not in data:
        raise SpecError(
            f"{path}: this looks like a preset family file (it has [models]); "
            "a spec file holds one model's fields at its top level"
        )
    return Loaded(build_spec(data, str(path)))


def load_spec(path: str | Path) -> ModelSpec:
    """A ModelSpec from a .toml, .json or .yaml file holding the fields at its top level, or from a
    Hugging Face config.json (a JSON object with model_type) or a folder holding one."""
    return load(path).spec


def _is_dir(path: str | os.PathLike) -> bool:
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def _is_file(path: str | os.PathLike) -> bool:
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def is_hf_config(data: Any) -> bool:
    """A Hugging Face config rather than a spec: a JSON object with model_type, or one that names
    `architectures` and has no spec `name` (ALBERT's files have no model_type)."""
    return isinstance(data, dict) and ("model_type" in data or ("architectures" in data and "name" not in data))


# ---------------------------------------------------------------- Hugging Face config files


def read_config(path: str | Path) -> tuple[dict[str, Any], Path]:
    """The JSON object of a config.json (or of folder/config.json), and the file's path; read as spec
    files are (regular files of bounded size, strict JSON)."""
    file, text = _config_text(path)
    return _config_object(file, text), file


def _config_text(path: str | Path) -> tuple[Path, str]:
    path = Path(path)
    if _is_dir(path):
        path = path / "config.json"
        if not path.is_file():
            raise SpecError(f"{clip(str(path.parent), 200)}: no config.json in this folder")
    return path, read_text(path)


def _config_object(file: Path, text: str) -> dict[str, Any]:
    data = parse_text(file, ".json", text)
    if not isinstance(data, dict):
        raise SpecError(f"{clip(str(file), 200)}: a config.json holds a JSON object, not {type(data).__name__}")
    return data


def load_config(path: str | Path, name: str | None = None, where: str | None = None) -> ModelSpec:
    """The ModelSpec of a Hugging Face config.json, or of a folder holding one; `name` and `where` (what
    messages call the file) default to the file's (a Hub id gives its own)."""
    return _load_config(path, name, where).spec


def _load_config(path: str | Path, name: str | None = None, where: str | None = None) -> Loaded:
    file, text = _config_text(path)
    imported = _imported(file, text, name, where)
    return Loaded(build_spec(imported.data, clip(where or str(file), 200)), tuple(imported.notes))


def import_config(path: str | Path, name: str | None = None, where: str | None = None):
    """What `archspec import` writes: the spec data of a config.json (an archspec.hf.Imported) with its notes."""
    return _imported(*_config_text(path), name, where)


def _imported(file: Path, text: str, name: str | None = None, where: str | None = None):
    from archspec import hf

    return hf.from_mapping(_config_object(file, text), name or hf.spec_name(file), clip(where or str(file), 200))
