"""The table of supported Hugging Face model_types (docs/huggingface.md) is the
adapter table's: one row per `Family` of archspec.hf.FAMILIES, naming its classes and the keys it
refuses, and the multimodal wrappers the section lists are archspec.hf.WRAPPERS.

A row is `| `model_type` (notes) | `Class`, `Class` | refused keys, each in backticks (or "as `other`",
or "—" when the adapter refuses no key) | test configs |`. The defaults are held against transformers'
config classes by tests/test_hf.py (test_adapter_defaults_are_transformers_config_class_defaults).
"""

import re
from pathlib import Path

from released import file_types

from archspec.hf import FAMILIES, WRAPPERS

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "huggingface.md").read_text(encoding="utf-8")
HOW = (
    "docs/huggingface.md, the table headed `| `model_type` | classes | refused when "
    "not the default | configs in `tests/data/hf/` |`: give every adapter of archspec.hf.FAMILIES one row "
    "`| `<model_type>` | `<Prefix><Suffix>`, ... (every class of Family.class_names) | each Refusal.key in "
    "backticks, or as `<other type>`, or — when it refuses none | the test configs, or none yet |`"
)


def _section() -> str:
    return PAGE


def _rows() -> dict[str, dict]:
    """model_type -> its row's cells: the wrappers named in its first cell, its classes, its refusals."""
    lines = [line for line in _section().splitlines() if line.startswith("| `")]
    rows: dict[str, dict] = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 4, f"the page table row with {len(cells)} cells, not 4: {line}\n{HOW}"
        model_type = re.findall(r"`([^`]+)`", cells[0])[0]
        if model_type == "model_type":  # the header
            continue
        assert model_type not in rows, f"the page table lists {model_type!r} twice\n{HOW}"
        rows[model_type] = {
            "wrappers": set(re.findall(r"the `([^`]+)` wrapper", cells[0])),
            "classes": set(re.findall(r"`([^`]+)`", cells[1])),
            "refused": cells[2],
            "configs": cells[3],
        }
    return rows


ROWS = _rows()


def test_every_adapter_has_a_row_and_every_row_an_adapter():
    missing = sorted(set(FAMILIES) - set(ROWS))
    extra = sorted(set(ROWS) - set(FAMILIES))
    assert not missing and not extra, (
        f"model_types with an adapter but no docs page row: {missing}; the page rows without an adapter: {extra}\n{HOW}"
    )


def test_each_row_names_the_classes_its_adapter_counts():
    wrong = {}
    for model_type, row in ROWS.items():
        if model_type not in FAMILIES:
            continue
        wrapper_classes = {WRAPPERS[w].prefix + "ForConditionalGeneration" for w in row["wrappers"] if w in WRAPPERS}
        expected = set(FAMILIES[model_type].class_names)
        if row["classes"] - wrapper_classes != expected:
            wrong[model_type] = f"the page {sorted(row['classes'] - wrapper_classes)}, adapter {sorted(expected)}"
    assert not wrong, f"the page rows whose classes are not the adapter's: {wrong}\n{HOW}"


def _named(model_type: str, seen: tuple = ()) -> set[str]:
    """The keys a row names in backticks, with those of the rows it refers to ("as `bert`")."""
    cell = ROWS[model_type]["refused"]
    names = set(re.findall(r"`([^`]+)`", cell))
    for other in re.findall(r"as `([^`]+)`", cell):
        if other in ROWS and other not in seen:
            names |= _named(other, (*seen, model_type))
    return names


def test_each_row_names_the_keys_its_adapter_refuses():
    wrong = {}
    for model_type, family in FAMILIES.items():
        if model_type not in ROWS:
            continue  # reported by test_every_adapter_has_a_row_and_every_row_an_adapter
        keys = {r.key for r in family.refuse}
        cell = ROWS[model_type]["refused"]
        if cell.startswith("—") and keys:
            wrong[model_type] = f"the page says — but the adapter refuses {sorted(keys)}"
        elif keys - _named(model_type):
            wrong[model_type] = f"the page does not name {sorted(keys - _named(model_type))}"
    assert not wrong, f"the page rows that do not name the adapter's refusals: {wrong}\n{HOW}"


def test_the_wrappers_listed_are_the_adapter_table_wrappers():
    rows = {w for row in ROWS.values() for w in row["wrappers"]}
    unknown = sorted(rows - set(WRAPPERS))
    assert not unknown, f"the page rows name wrappers that archspec.hf.WRAPPERS lacks: {unknown}"
    bullet = re.search(r"\*\*Multimodal wrappers\*\* \(([^:]+):", _section())
    assert bullet, "the page lost its '**Multimodal wrappers** (`type`, ...: ...' bullet"
    listed = set(re.findall(r"`([^`]+)`", bullet.group(1)))
    assert listed == set(WRAPPERS), (
        f"the page's Multimodal wrappers bullet lists {sorted(listed)}, archspec.hf.WRAPPERS has {sorted(WRAPPERS)}"
    )


def test_each_row_says_whether_the_test_set_holds_a_released_file_of_its_type():
    """The last cell says none (or "—") exactly for the types without a file in tests/data/hf/, and a row of a
    type with one names one of them: the column follows the test set as files arrive."""
    files = file_types()
    wrong = {}
    for model_type, row in ROWS.items():
        says_none = row["configs"].startswith(("none", "—"))
        held = files.get(model_type, set())
        if says_none and held:
            wrong[model_type] = f"the page says none; tests/data/hf holds {sorted(held)}"
        elif not says_none and not any(stem.split("-")[0] in row["configs"] for stem in held):
            wrong[model_type] = f"the page lists {row['configs']!r}; tests/data/hf holds {sorted(held) or 'none'}"
    assert not wrong, f"the page rows whose test configs are not the test set's: {wrong}\n{HOW}"
