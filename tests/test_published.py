"""Published deployment figures (tests/data/deployment/published.toml: engine logs and released files'
sizes, each with its source and a short quote) against archspec's weights per device and KV capacity
once the engine's reserve and paging are modelled (archspec.memory.runtime, archspec.memory.paging).

`python tests/test_published.py` prints every row with its deviation, the rows not held among them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import archspec
from archspec.memory import stage_slots, stored_weights_bytes
from archspec.memory.paging import paging
from archspec.memory.runtime import reserve
from archspec.plan.hardware import ACCELERATORS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

TABLE = tomllib.loads((Path(__file__).parent / "data" / "deployment" / "published.toml").read_text())
GiB = 2**30
KV_TOLERANCE = 0.10


def _accelerator(row):
    if row["gpu"] in ACCELERATORS:
        return ACCELERATORS[row["gpu"]]
    # a card the table lacks: its memory as the row's source gives it, the rest irrelevant to memory
    return dataclasses.replace(ACCELERATORS["rtx4090"], name=row["gpu"], title=row["gpu"], memory_gib=row["memory_gib"])


def weights_row(row) -> tuple[float, float]:
    """(archspec's weights per device, the published figure), in GiB."""
    got = stored_weights_bytes(archspec.preset(row["model"]), row["weights"], tensor_parallel=row["tp"])
    return got / GiB, row["gib"]


def kv_row(row) -> tuple[float, float, str]:
    """(archspec's figure, the published one, unit): the cache's GiB or its tokens on one device."""
    spec, acc = archspec.preset(row["model"]), _accelerator(row)
    r = reserve(spec, acc, row["engine"], row["tp"], row.get("fraction"), row.get("max_batched_tokens"),
                max_num_seqs=row.get("max_num_seqs"))  # fmt: skip
    free = r.usable_bytes - stored_weights_bytes(spec, row["weights"], tensor_parallel=row["tp"])
    if "gib" in row:
        return free / GiB, row["gib"], "GiB"
    pages = paging(spec, stage_slots(spec, 1)[0], "bf16", row["engine"], row["tp"])
    return pages.capacity_tokens(free), row["tokens"], "tokens"


def _id(row) -> str:
    return f"{row['model']}-{row.get('engine', row['weights'])}-tp{row['tp']}-{row['source'].rsplit('/', 1)[-1]}"


@pytest.mark.parametrize("row", TABLE["weights"], ids=_id)
def test_weights_per_device_agree_with_the_engines_logs_and_released_files(row):
    got, published = weights_row(row)
    assert abs(got / published - 1) <= row["tolerance"], (got, row["source"], row["quote"])


@pytest.mark.parametrize("row", [r for r in TABLE["kv"] if r["held"]], ids=_id)
def test_kv_capacity_within_10_percent_of_the_engines_logs(row):
    got, published, unit = kv_row(row)
    assert abs(got / published - 1) <= KV_TOLERANCE, (got, unit, row["source"], row["quote"])


def test_every_row_has_a_source_and_a_quote_and_every_row_not_held_says_why():
    for row in TABLE["weights"] + TABLE["kv"]:
        assert row["source"].startswith("https://github.com/") and len(row["quote"]) > 20, row
        assert row.get("held", True) or row.get("note"), row


if __name__ == "__main__":
    for row in TABLE["weights"]:
        got, published = weights_row(row)
        print(f"weights {_id(row)}: archspec {got:.3f} GiB, published {published} GiB ({got / published - 1:+.1%})")
    for row in TABLE["kv"]:
        got, published, unit = kv_row(row)
        held = "held" if row["held"] else "not held: " + row["note"]
        dev = f"{got / published - 1:+.1%}"
        print(f"kv {_id(row)}: archspec {got:,.2f} {unit}, published {published:,} ({dev}; {held})")
