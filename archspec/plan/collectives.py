"""What tensor- and expert-parallel serving spends on communication per step: a bandwidth term (the
bytes each device sends over the accelerator's interconnect) and a latency term (a fixed time per
collective, by interconnect, from published measurements).

- Tensor parallelism: a ring all-reduce of the d_model-wide output of every sublayer (attention and
  MLP: two per layer), 2 (t - 1)/t of its bytes sent per device, and one all-reduce latency each.
- Expert parallelism: each MoE layer dispatches its routed tokens to the experts' devices and combines
  them back, (e - 1)/e of them leaving the device: two all-to-alls per MoE layer, one latency each.
- Pipeline parallelism: a hand-over of the activations between consecutive stages (bandwidth only).

Activations cross in bf16. Nothing overlaps with compute. The latency of a collective is the smallest
published small-message time at eight devices of that interconnect, so that the sum stays a lower
bound; an interconnect without such a figure has no latency term, and the estimate says so.
"""

from __future__ import annotations

from dataclasses import dataclass

ACTIVATION_BYTES = 2  # bf16 activations cross the interconnect


@dataclass(frozen=True, kw_only=True)
class Link:
    """An interconnect and the published time of one small-message collective over it at eight
    devices, in microseconds (None: no published figure, no latency term)."""

    name: str
    title: str
    all_reduce_us: float | None = None
    all_to_all_us: float | None = None
    all_reduce_source: str = ""
    all_to_all_source: str = ""


_NCCL_1940 = (
    "https://github.com/NVIDIA/nccl/issues/1940: nccl-tests all_reduce_perf, 8-byte all-reduce, tuned, on "
    "NCCL 2.27's symmetric memory: "
)
_NO_FIGURE = "no published small-message figure found; not counted"

# The interconnects the accelerator table names (Accelerator.link), each with its sources.
LINKS = {
    k.name: k
    for k in (
        Link(name="nvlink2", title="NVLink 2 (Volta)", all_reduce_source=_NO_FIGURE, all_to_all_source=_NO_FIGURE),
        Link(name="nvlink3", title="NVLink 3 (Ampere)", all_reduce_source=_NO_FIGURE, all_to_all_source=_NO_FIGURE),
        Link(
            name="nvlink4", title="NVLink 4 (Hopper)", all_reduce_us=2.3, all_to_all_us=3.7,
            all_reduce_source=_NCCL_1940 + "\"on servers with 8x H800 or 8x H200 GPUs, the minimum latency for "
                              "the same 8-byte test reaches about 2.3 us\"",
            all_to_all_source="https://github.com/NVIDIA/nccl/issues/1984: nccl-tests sendrecv_perf on H800 GPUs "
                              "connected with NVLink, CUDA graphs: \"when I tested sendrecv_perf, the latency was "
                              "3.7us\" (one point-to-point send: the least an all-to-all waits for)",
        ),
        Link(
            name="nvlink5", title="NVLink 5 (Blackwell)", all_reduce_us=3.0,
            all_reduce_source=_NCCL_1940 + "\"8x B200 GPUs. With an 8-byte workload, the best latency I can "
                              "achieve is around 3 us\"",
            all_to_all_source=_NO_FIGURE,
        ),
        Link(name="pcie4", title="PCIe Gen4", all_reduce_source=_NO_FIGURE, all_to_all_source=_NO_FIGURE),
        Link(name="pcie5", title="PCIe Gen5", all_reduce_source=_NO_FIGURE, all_to_all_source=_NO_FIGURE),
        Link(name="infinity-fabric", title="AMD Infinity Fabric", all_reduce_source=_NO_FIGURE,
             all_to_all_source=_NO_FIGURE),  # fmt: skip
        Link(name="ici", title="Google TPU inter-chip interconnect", all_reduce_source=_NO_FIGURE,
             all_to_all_source=_NO_FIGURE),  # fmt: skip
        Link(name="roce", title="RoCE (Ethernet RDMA)", all_reduce_source=_NO_FIGURE, all_to_all_source=_NO_FIGURE),
    )
}  # fmt: skip


@dataclass(frozen=True)
class Collectives:
    """The collectives one step runs, summed over the stages: all-reduces (tensor parallelism, one per
    sublayer), all-to-alls (expert parallelism, dispatch and combine per MoE layer) and stage hand-overs."""

    all_reduces: int
    all_to_alls: int
    hand_overs: int


def collectives(sublayers: int, moe_layers: int, tp: int, ep: int, pp: int) -> Collectives:
    """The collectives of one step of a model with `sublayers` residual sublayers and `moe_layers` MoE
    layers, laid out tp x ep x pp."""
    return Collectives(sublayers if tp > 1 else 0, 2 * moe_layers if ep > 1 else 0, pp - 1)


def latency_seconds(link: Link | None, c: Collectives) -> float:
    """The collectives' fixed cost: each all-reduce and all-to-all its interconnect's published latency
    (none where there is no figure)."""
    if link is None:
        return 0.0
    us = c.all_reduces * (link.all_reduce_us or 0) + c.all_to_alls * (link.all_to_all_us or 0)
    return us * 1e-6


def bandwidth_seconds(c: Collectives, rows: int, d_model: int, routes: int, tp: int, ep: int, bytes_per_second: float
                      ) -> float:  # fmt: skip
    """The bytes one device sends in a step of `rows` tokens, over the interconnect: ring all-reduces
    of d_model values per row (2 (t - 1)/t sent), `routes` routed copies of each row dispatched and
    combined ((e - 1)/e of them leave), and stage hand-overs of d_model values per row."""
    width = rows * d_model * ACTIVATION_BYTES
    sent = c.all_reduces * 2 * (tp - 1) / tp * width if tp > 1 else 0.0
    sent += routes * 2 * width * (ep - 1) / ep if ep > 1 else 0.0
    sent += c.hand_overs * width
    return sent / bytes_per_second


def unpriced(link: Link | None, c: Collectives) -> list[str]:
    """The collectives this layout runs whose interconnect has no published latency, by name."""
    missing = []
    if c.all_reduces and (link is None or link.all_reduce_us is None):
        missing.append("all-reduce")
    if c.all_to_alls and (link is None or link.all_to_all_us is None):
        missing.append("all-to-all")
    return missing


def latency_note(link: Link | None, c: Collectives) -> str:
    """One clause on the latency term: the collectives counted, the figure each costs and its source, and
    those left out for want of a published figure."""
    if not c.all_reduces and not c.all_to_alls:
        return "no tensor- or expert-parallel collectives"
    title = link.title if link else "this interconnect"
    parts = []
    if c.all_reduces and link and link.all_reduce_us is not None:
        parts.append(f"{c.all_reduces:,} all-reduces x {link.all_reduce_us:g} µs ({_url(link.all_reduce_source)})")
    if c.all_to_alls and link and link.all_to_all_us is not None:
        parts.append(f"{c.all_to_alls:,} all-to-alls x {link.all_to_all_us:g} µs ({_url(link.all_to_all_source)})")
    note = f"latency per step over {title}: " + " + ".join(parts) if parts else ""
    missing = unpriced(link, c)
    if missing:
        note += ("; " if note else "") + f"no published {' or '.join(missing)} latency for {title}: not counted"
    return note


def _url(source: str) -> str:
    return source.split(": ", 1)[0]
