"""Published deployment figures (tests/data/deployment/published.toml: engine logs and released files'
sizes, each with its source and a short quote) against archspec's weights per device and KV capacity
once the engine's reserve and paging are modelled (archspec.memory.runtime, archspec.memory.paging),
and published decode throughput as a fraction of archspec's decode bound (reported, not held).

`python tests/test_published.py` prints every row with its deviation, the rows not held among them,
and every decode row's fraction of the bound."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

import archspec
from archspec.memory import stage_slots, stored_weights_bytes
from archspec.memory.paging import paging
from archspec.memory.runtime import reserve
from archspec.plan.hardware import ACCELERATORS
from archspec.plan.inference import estimate_inference

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

TABLE = tomllib.loads((Path(__file__).parent / "data" / "deployment" / "published.toml").read_text())
GiB = 2**30
KV_TOLERANCE = 0.10
# the decode bound is an upper bound: a fraction above 1 beyond measurement noise means a wrong setting
DECODE_MAX_FRACTION = 1.5


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


def decode_row(row) -> tuple[float, float]:
    """(archspec's decode bound, the published figure), in tokens per second per sequence."""
    e = estimate_inference(archspec.preset(row["model"]), _accelerator(row), batch=row["batch"],
                           prompt_len=row["prompt_len"], gen_len=row["gen_len"], dtype=row["weights"],
                           tensor_parallel=row["tp"], engine=row["engine"])  # fmt: skip
    assert e.fits, (row["model"], row["gpu"], e.shortfall_bytes)
    return 1 / e.decode_seconds_per_token, row["tokens_per_second"]


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


def _decode_id(row) -> str:
    return f"{row['model']}-{row['weights']}-{row['gpu']}-tp{row['tp']}-{row['source'].rsplit('/', 1)[-1]}"


@pytest.mark.parametrize("row", TABLE["decode"], ids=_decode_id)
def test_decode_throughput_is_a_share_of_the_bound_in_a_setting_archspec_plans(row):
    # reported, not held to a closeness: only a setting archspec can plan and a finite share of its bound
    keys = {"model", "weights", "gpu", "engine", "tp", "batch", "prompt_len", "gen_len", "tokens_per_second"}
    assert keys <= row.keys() and row["tokens_per_second"] > 0, row
    assert row["gpu"] in ACCELERATORS, row  # the bound needs the accelerator's bandwidth, not only its memory
    bound, published = decode_row(row)
    fraction = published / bound
    assert math.isfinite(fraction) and 0 < fraction <= DECODE_MAX_FRACTION, (fraction, row["source"], row["quote"])


def test_every_row_has_a_source_and_a_quote_and_every_row_not_held_says_why():
    for row in TABLE["weights"] + TABLE["kv"] + TABLE["decode"]:
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
    for row in TABLE["decode"]:
        bound, published = decode_row(row)
        print(
            f"decode {_decode_id(row)}: batch {row['batch']}, archspec's bound {bound:,.2f} tokens/s per sequence, "
            f"published {published:,} ({published / bound:.1%} of the bound)"
        )
