"""verify(spec): the analytic description against the instantiated reference model.

Three comparisons, each of two independently obtained figures:

- tensors: every parameter of ``build(spec, device="meta")``, by path and shape, against
  ``archspec.describe.blocks.tensors(describe(spec))`` — a mismatch names the one tensor that differs;
- parameters: unique parameter sizes rolled up by the modules' component tags, against
  ``count_params(spec).components``;
- FLOPs: torch's FlopCounterMode over one forward pass on the meta device, by component, against
  ``count_flops(spec, ...)``.

The report is data; ``archspec verify`` renders it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from archspec.core.errors import SpecError
from archspec.core.records import record, rendered
from archspec.core.vocab import ATTENTION
from archspec.count.flops import count_flops
from archspec.count.params import COMPONENTS, count_params
from archspec.describe.blocks import describe, tensors
from archspec.spec.model import ModelSpec


@dataclass(frozen=True)
class Pair:
    """One quantity computed two ways."""

    analytic: int
    measured: int

    @property
    def ok(self) -> bool:
        return self.analytic == self.measured


def sides(analytic: str, measured: str, ok: bool = False):
    """How a dict of Pairs renders in a record: each Pair's two figures under these names (and, with
    `ok`, whether they are equal)."""

    def render(pairs: dict[str, Pair]) -> dict[str, dict]:
        return {k: {analytic: p.analytic, measured: p.measured, **({"ok": p.ok} if ok else {})}
                for k, p in pairs.items()}  # fmt: skip

    return render


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    """Analytic against instantiated for one spec: tensors, parameters and FLOPs by component. Its JSON
    record is its fields, in this order, with the checks to_dict derives."""

    name: str
    params: Pair = field(metadata=rendered(expand={"analytic": "analytic", "instantiated": "measured"}))
    components: dict[str, Pair] = field(metadata=rendered(convert=sides("analytic", "instantiated")))
    roles: dict[str, Pair] = field(metadata=rendered(convert=sides("analytic", "instantiated")))
    tensor_mismatches: list[str]
    batch: int = field(metadata=rendered("flops_batch"))
    seq_len: int = field(metadata=rendered("flops_seq_len"))
    src_len: int | None = field(default=None, metadata=rendered("flops_src_len", omit_none=True))
    flops: Pair = field(metadata=rendered(expand={"flops_analytic": "analytic", "flops_measured": "measured"}))
    flops_components: dict[str, Pair]  # each as {"analytic", "measured"}
    notes: list[str] = field(default_factory=list, metadata=rendered(hidden=True))

    @property
    def params_ok(self) -> bool:
        return (self.params.ok and not self.tensor_mismatches and all(p.ok for p in self.components.values())
                and all(p.ok for p in self.roles.values()))  # fmt: skip

    @property
    def flops_ok(self) -> bool:
        return self.flops.ok and all(p.ok for p in self.flops_components.values())

    @property
    def ok(self) -> bool:
        return self.params_ok and self.flops_ok

    @property
    def mismatched_components(self) -> list[str]:
        return [c for c, p in self.components.items() if not p.ok]

    @property
    def mismatched_flops_components(self) -> list[str]:
        return [c for c, p in self.flops_components.items() if not p.ok]

    def mismatches(self) -> list[str]:
        """One phrase per difference: the tensor, the component, the figure."""
        out = list(self.tensor_mismatches)
        out += [f"params {c} {p.analytic:,} vs {p.measured:,}" for c, p in self.components.items() if not p.ok]
        out += [f"role {r} {p.analytic:,} vs {p.measured:,}" for r, p in self.roles.items() if not p.ok]
        out += [f"FLOPs {c} {p.analytic:,} vs {p.measured:,}" for c, p in self.flops_components.items() if not p.ok]
        return out

    def to_dict(self) -> dict:
        return record(self, derived=(
            ("ok", "params"), ("params_ok", "params"), ("mismatched_components", "components"), ("flops_ok", "flops"),
            ("mismatched_flops_components", "flops_components"),
        ))  # fmt: skip


def compare_tensors(spec: ModelSpec, model, mtp: bool = False) -> list[str]:
    """Every parameter of `model` against the description's tensors (with `mtp`, the MTP modules'
    too), by path and shape."""
    analytic = {t.path: t.shape for t in tensors(describe(spec, mtp=mtp))}
    built = {name: tuple(p.shape) for name, p in model.named_parameters()}  # tied tensors once
    out = [f"tensor {path} {shape} is in the model, not in the description"
           for path, shape in built.items() if path not in analytic]  # fmt: skip
    out += [f"tensor {path} {shape} is in the description, not in the model"
            for path, shape in analytic.items() if path not in built]  # fmt: skip
    out += [f"tensor {path}: description {analytic[path]}, model {shape}"
            for path, shape in built.items() if path in analytic and analytic[path] != shape]  # fmt: skip
    return out


def verify(spec: ModelSpec, batch: int = 1, seq_len: int | None = None, src_len: int | None = None,
           mtp: bool = False) -> VerifyReport:  # fmt: skip
    """Build the reference model of `spec` on the meta device and compare it with the analytic figures:
    tensors by path and shape, parameters and forward FLOPs by component (batch × seq_len tokens,
    max_positions by default); with `mtp`, the multi-token-prediction modules are built and counted
    too (forward does not run them)."""
    from archspec.reference.build import build
    from archspec.reference.measure import (
        count_by_component,
        count_by_role,
        count_total,
        example_inputs,
        measure_flops,
    )

    if not isinstance(spec, ModelSpec):
        raise TypeError(f"verify() takes a ModelSpec (e.g. archspec.preset('gpt2')), got {type(spec).__name__}")
    try:
        analytic_flops = count_flops(spec, batch, seq_len, src_len)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    analytic = count_params(spec, mtp=mtp)
    model = build(spec, device="meta", mtp=mtp)
    measured = count_by_component(model)
    by_role = count_by_role(model)
    T, S = analytic_flops.seq_len, analytic_flops.src_len
    flops_total, flops_by_component = measure_flops(model, example_inputs(spec, batch, T, S))
    return VerifyReport(
        name=spec.name,
        params=Pair(analytic.total, count_total(model)),
        components={c: Pair(analytic.components[c], measured[c]) for c in COMPONENTS},
        roles={r: Pair(v, by_role[r]) for r, v in analytic.roles.items()},
        tensor_mismatches=compare_tensors(spec, model, mtp),
        flops=Pair(analytic_flops.forward, flops_total),
        flops_components={c: Pair(v, flops_by_component.get(c, 0)) for c, v in analytic_flops.components.items()},
        batch=batch,
        seq_len=T,
        src_len=S,
    )


# ---------------------------------------------------------------- memory and ranks


class PlannedChecks:
    """What the memory reports share: planned figures against measured ones, by quantity."""

    checks: dict[str, Pair]

    def mismatches(self) -> list[str]:
        return [f"{k} planned {p.analytic:,} vs measured {p.measured:,}" for k, p in self.checks.items() if not p.ok]


@dataclass(frozen=True, kw_only=True)
class MemoryReport(PlannedChecks):
    """Planned against measured memory for one spec: saved-tensor bytes for both attention modes (at
    one recomputation mode), weights in fp32 and bf16, the KV cache — or why it was not measured."""

    name: str
    batch: int
    seq_len: int
    recompute: str
    skipped: str | None = field(default=None, metadata=rendered(omit_none=True))
    checks: dict[str, Pair] = field(metadata=rendered(convert=sides("planned", "measured", ok=True)))
    measured_components: dict[str, dict[str, int]] = field(metadata=rendered("measured_activations_by_component"))

    @property
    def ok(self) -> bool:
        return self.skipped is None and all(p.ok for p in self.checks.values())

    def to_dict(self) -> dict:
        return record(self, derived=(("ok", "name"),))


# the largest model whose fp32 weights verify_memory builds for real (a GPT-2 XL fits)
MEASURE_LIMIT_PARAMS = 2_000_000_000


def verify_memory(spec: ModelSpec, batch: int = 2, seq_len: int | None = None, recompute: str = "none") -> MemoryReport:
    """Build the reference model with real fp32 weights on the CPU, run one training step in each
    attention mode and compare the bytes autograd saves with estimate_memory's activations; also the
    weights (fp32 and bf16, on the meta device) and the KV cache against the tensors a prompt fills."""
    from archspec.memory import estimate_memory, kv_cache_bytes, weights_bytes
    from archspec.reference.build import build
    from archspec.reference.memory_measure import measure_activations, measure_kv_cache, measure_weights

    if not isinstance(spec, ModelSpec):
        raise TypeError(f"verify_memory() takes a ModelSpec, got {type(spec).__name__}")
    T = min(spec.max_positions, 32) if seq_len is None else seq_len
    S = T if spec.kind == "encoder-decoder" else None
    checks: dict[str, Pair] = {}
    for dtype in ("fp32", "bf16"):
        measured = sum(measure_weights(build(spec, device="meta", dtype=dtype)).values())
        checks[f"weights {dtype}"] = Pair(weights_bytes(spec, dtype), measured)
    if spec.decoder_layers:
        checks["kv cache fp32"] = Pair(kv_cache_bytes(spec, batch, T, "fp32", S),
                                       measure_kv_cache(spec, batch, T, "fp32", S, device="meta"))  # fmt: skip
    if count_params(spec).total > MEASURE_LIMIT_PARAMS:
        return MemoryReport(name=spec.name, batch=batch, seq_len=T, recompute=recompute, checks=checks,
                            measured_components={},
                            skipped=f"activations not measured: {spec.name} is too large to train on this CPU "
                            "(verify a shallower copy, e.g. --set decoder_layers=2)")  # fmt: skip
    components = {}
    model = build(spec, device="cpu", dtype="fp32")
    for attention in ATTENTION:
        m = measure_activations(spec, batch, T, "fp32", attention, recompute, src_len=S, model=model)
        planned = estimate_memory(spec, batch, T, "fp32", recompute=recompute, src_len=S, attention=attention)
        checks[f"activations {attention}"] = Pair(planned.activations_bytes, m.total_bytes)
        components[attention] = dict(m.by_component)
    return MemoryReport(name=spec.name, batch=batch, seq_len=T, recompute=recompute, checks=checks,
                        measured_components=components)  # fmt: skip


@dataclass(frozen=True)
class RanksVerifyReport(PlannedChecks):
    """The planner's per-GPU bytes against the largest rank of a real sharded AdamW step."""

    name: str
    ranks: int
    zero: int
    tp: int
    checks: dict[str, Pair] = field(metadata=rendered(convert=sides("planned", "measured", ok=True)))
    # torch's AdamW keeps a 4-byte step per tensor, which the planner leaves out
    step_counters: int = field(metadata=rendered("optimizer_step_counters_bytes"))

    figure: ClassVar[str] = "largest rank"

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.checks.values())

    def to_dict(self) -> dict:
        return record(self, derived=(("ok", "name"), ("figure", "tp")))


def verify_ranks(spec: ModelSpec, ranks: int = 2, zero: int = 3, tp: int = 1) -> RanksVerifyReport:
    """Run one fp32 AdamW step of the reference model sharded over `ranks` local processes (FSDP2 for
    ZeRO, DTensor for tensor parallelism; gloo on the CPU) and compare each quantity of the largest
    rank with `archspec memory --gpus ranks --zero zero --tp tp`. The optimizer figure is compared
    with torch's per-tensor step counters (4 bytes each) added to the plan."""
    from archspec.memory import estimate_memory, parallel_layout
    from archspec.reference.distributed import DistributedUnavailable, measure_ranks

    lay = parallel_layout(spec, ranks, tp, 1, zero)
    plan = estimate_memory(spec, 2, min(spec.max_positions, 16), "fp32", zero_stage=zero,
                           data_parallel=lay.data_parallel, tensor_parallel=tp)  # fmt: skip
    try:
        largest = measure_ranks(spec, ranks, zero, tp).largest
    except DistributedUnavailable as exc:
        raise SpecError(f"cannot run {ranks} local processes for --ranks here: {exc}") from None
    steps = 4 * sum(1 for _ in tensors(describe(spec)))
    return RanksVerifyReport(spec.name, ranks, zero, tp, {
        "weights": Pair(plan.weights_bytes, largest["params_bytes"]),
        "gradients": Pair(plan.gradients_bytes, largest["grads_bytes"]),
        "optimizer": Pair(plan.optimizer_bytes + steps, largest["optimizer_bytes"]),
    }, steps)  # fmt: skip
