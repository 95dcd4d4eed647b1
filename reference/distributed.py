"""The reference model across processes with torch.distributed: per-rank bytes of one training step.

`measure_ranks(spec, ranks, zero, tp)` starts `ranks` local processes (gloo on the CPU, NCCL on
GPUs; a file rendezvous, no port), builds the same seeded model in each, shards it, runs one AdamW
step on a small batch and returns, per rank, the bytes of parameters, gradients and optimizer states
that rank holds after the step (each storage counted once; a DTensor by its local shard).

What each plan maps to (dim-0 sharding everywhere: rank r holds chunk r of ``torch.chunk(t, N, 0)``,
so rank 0 holds ceil(dim0 / N) rows of every tensor and is the largest rank):

- zero 0: replicated data parallelism; gradients all-reduced; every rank holds everything.
- zero 1: as 0, and each rank keeps AdamW states for its dim-0 chunk of every parameter only
  (``ShardedAdamW``); the updated chunks are broadcast back. Gradients stay whole.
- zero 2: as 1, and after the reduction each rank keeps only its chunk of every gradient.
- zero 3: FSDP2 (``torch.distributed.fsdp.fully_shard`` on every block, then the root): parameters,
  gradients and states are DTensors sharded on dim 0. FSDP2 stores each parameter's shard padded to
  ceil(dim0 / N) rows on every rank. (``fully_shard(reshard_after_forward=False)`` is the same at
  rest; it only keeps the gathered parameters from forward to backward.)
- tp T (ranks == T, so no data-parallel dimension: every ZeRO stage is the same plan): Megatron-style
  tensor parallelism with DTensor ``parallelize_module`` (see ``tensor_parallel``): query/key/value,
  query, key/value, MLP input projections column-wise, attention and MLP output projections
  row-wise (their biases replicated), token embeddings and an untied output head (and its bias)
  sharded on the vocabulary; norms, the position table and token types replicated.

``torch.distributed.optim.ZeroRedundancyOptimizer`` (torch's own ZeRO-1) assigns whole parameters to
ranks instead, greedily by size: its largest rank depends on the parameter sizes, not dim0 / N.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from archspec.core.errors import SpecError
from archspec.core.records import record, rendered
from archspec.core.vocab import ZERO_STAGES
from archspec.reference.build import build, resolve_dtype
from archspec.reference.memory_measure import random_batch, training_loss
from archspec.reference.model import MLP, Block, CrossAttention, SelfAttention, Transformer
from archspec.spec.model import ModelSpec


class DistributedUnavailable(RuntimeError):
    """This platform cannot start the processes or the backend a measurement needs."""


@dataclass(frozen=True)
class RankBytes:
    rank: int
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int  # AdamW's two moments and its step counters (one fp32 scalar per tensor)
    peak_bytes: int | None = None  # torch.cuda.max_memory_allocated over the step, on a GPU


@dataclass(frozen=True)
class RanksReport:
    name: str
    ranks: int
    zero: int
    tp: int
    dtype: str
    backend: str
    per_rank: tuple[RankBytes, ...]
    # each rank's training loss (equal across tensor-parallel ranks)
    losses: tuple[float, ...] = field(metadata=rendered(hidden=True))

    @property
    def largest(self) -> dict[str, int]:
        """The largest rank's bytes, quantity by quantity (rank 0 under dim-0 sharding)."""
        keys = ("params_bytes", "grads_bytes", "optimizer_bytes")
        return {k: max(getattr(r, k) for r in self.per_rank) for k in keys}

    def to_dict(self) -> dict:
        return record(self, derived=(("largest", "backend"),))


# ---------------------------------------------------------------- the public entry points


def measure_ranks(
    spec: ModelSpec,
    ranks: int = 2,
    zero: int = 3,
    tp: int = 1,
    *,
    batch: int = 2,
    seq_len: int = 16,
    dtype="fp32",
    device: str = "cpu",
) -> RanksReport:
    """Per-rank bytes of parameters, gradients and optimizer states after one AdamW step of the
    reference model of `spec` sharded over `ranks` local processes (see the module docstring)."""
    return measure_plans(spec, ranks, [(zero, tp)], batch=batch, seq_len=seq_len, dtype=dtype, device=device)[0]


def measure_plans(
    spec: ModelSpec,
    ranks: int,
    plans: list[tuple[int, int]],
    *,
    batch: int = 2,
    seq_len: int = 16,
    dtype="fp32",
    device: str = "cpu",
) -> list[RanksReport]:
    """measure_ranks for several (zero, tp) plans in one set of processes (starting them is the slow part)."""
    check_plan_inputs(spec, ranks, plans, dtype, device)
    with tempfile.TemporaryDirectory(prefix="archspec-ranks-") as tmp:
        job = dict(spec=spec, plans=plans, batch=batch, seq_len=seq_len, dtype=str(resolve_dtype(dtype)), device=device)
        launch(ranks, tmp, job)
        results = []
        for r in range(ranks):
            with open(os.path.join(tmp, f"rank{r}.json")) as f:
                results.append(json.load(f))
    backend = "nccl" if device == "cuda" else "gloo"
    reports = []
    for i, (zero, tp) in enumerate(plans):
        per_rank = tuple(RankBytes(**results[r][i]["bytes"]) for r in range(ranks))
        reports.append(
            RanksReport(
                name=spec.name,
                ranks=ranks,
                zero=zero,
                tp=tp,
                dtype=str(resolve_dtype(dtype)).removeprefix("torch."),
                backend=backend,
                per_rank=per_rank,
                losses=tuple(results[r][i]["loss"] for r in range(ranks)),
            )
        )
    return reports


def check_plan_inputs(spec: ModelSpec, ranks: int, plans, dtype, device: str) -> None:
    if not isinstance(ranks, int) or ranks < 1:
        raise SpecError(f"ranks must be a positive integer, got {ranks!r}")
    for zero, tp in plans:
        if zero not in ZERO_STAGES:
            raise SpecError(f"zero must be one of 0, 1, 2, 3, got {zero!r}")
        if not isinstance(tp, int) or tp < 1 or ranks % tp:
            raise SpecError(f"tp={tp!r} must be a positive integer dividing ranks={ranks}")
        if 1 < tp != ranks:  # tp with data parallelism beside it: a plan not measured here
            raise SpecError(
                f"tensor parallelism is measured on its own: tp must equal ranks ({ranks}), "
                f"not leave {ranks // tp} data-parallel replicas"
            )
        # tp == ranks leaves no data-parallel dimension: any ZeRO stage shards nothing, all mean one plan
        if tp > 1 and (unsupported := tensor_parallel_unsupported(spec)):
            raise SpecError(f"tensor parallelism is not implemented here for {unsupported}")
        if tp > 1 and (spec.n_heads % tp or spec.n_kv_heads % tp):
            raise SpecError(
                f"tp={tp} must divide n_heads={spec.n_heads} and n_kv_heads={spec.n_kv_heads}: "
                "each rank holds whole heads"
            )
        if resolve_dtype(dtype) != torch.float32 and zero != 3:
            raise SpecError("bf16 is measured with zero=3 (FSDP2 mixed precision: fp32 shards, bf16 compute)")
    if device not in ("cpu", "cuda"):
        raise SpecError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if not dist.is_available():
        raise DistributedUnavailable("this build of torch has no torch.distributed")
    if device == "cpu" and not dist.is_gloo_available():
        raise DistributedUnavailable("this build of torch has no gloo backend for CPU processes")
    if device == "cuda" and (not dist.is_nccl_available() or torch.cuda.device_count() < ranks):
        raise DistributedUnavailable(
            f"{ranks} ranks on CUDA need NCCL and {ranks} GPUs; this machine has {torch.cuda.device_count()}"
        )


def tensor_parallel_unsupported(spec: ModelSpec) -> str | None:
    """What in `spec` tensor_parallel does not split (None when it splits everything it should)."""
    for what, value, supported in (
        ("attention", spec.mixer.kind, ("standard",)),
        ("position", spec.position.kind, ("learned", "sinusoidal", "rotary", "none")),  # no per-head biases
        ("mlp", spec.mlp.kind, ("dense",)),
        ("head", spec.head.kind, ("lm", "none")),
    ):
        if value not in supported:
            return f"{what} kind {value!r} (supported: {', '.join(supported)})"
    if spec.d_embed != spec.d_model:
        return "a factorised embedding (d_embed != d_model)"
    return None


def launch(ranks: int, tmp: str, job: dict) -> None:
    """Start `ranks` processes running `_worker`; each writes rank{r}.json into `tmp`."""
    import torch.multiprocessing as mp

    try:
        mp.start_processes(_worker, args=(ranks, tmp, job), nprocs=ranks, start_method="spawn", join=True)
    except mp.ProcessRaisedException as exc:
        raise RuntimeError(f"a rank failed: {str(exc).strip().splitlines()[-1]}") from exc
    except mp.ProcessExitedException as exc:
        raise RuntimeError(f"a rank exited without a result: {exc}") from exc
    except OSError as exc:
        raise DistributedUnavailable(f"could not start {ranks} local processes: {exc}") from exc


# ---------------------------------------------------------------- one rank


def _worker(rank: int, world: int, tmp: str, job: dict) -> None:
    device = torch.device("cuda", rank) if job["device"] == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=world)
    try:
        out = [run_plan(job["spec"], zero, tp, job, device) for zero, tp in job["plans"]]
    finally:
        dist.destroy_process_group()
    with open(os.path.join(tmp, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)


def run_plan(spec: ModelSpec, zero: int, tp: int, job: dict, device: torch.device) -> dict:
    """Build, shard, one AdamW step; the bytes this rank holds afterwards."""
    from torch.distributed.device_mesh import init_device_mesh

    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh(device.type, (world,))
    compute = getattr(torch, job["dtype"].removeprefix("torch."))
    model = build(spec, device=device, dtype=torch.float32, seed=0)  # the same weights on every rank
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    if tp > 1:
        tensor_parallel(model, mesh)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)  # DTensor and plain tensors
    elif zero == 3:
        fsdp2(model, mesh, compute)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        optimizer = ShardedAdamW(model.parameters(), stage=zero, lr=1e-3)
    data_rank = 0 if tp > 1 else rank  # tensor-parallel ranks see the same batch
    inputs, targets = random_batch(spec, job["batch"], job["seq_len"], None, device, seed=data_rank)
    loss = training_loss(model, inputs, targets)
    loss.backward()
    if zero < 3 and tp == 1:
        for p in model.parameters():  # data parallelism: the mean gradient
            dist.all_reduce(p.grad)
            p.grad.div_(world)
    optimizer.step()
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return {
        "loss": loss.item(),
        "bytes": dict(
            rank=rank,
            params_bytes=storage_bytes(model.parameters()),
            grads_bytes=storage_bytes(gradients(model, optimizer)),
            optimizer_bytes=storage_bytes(t for state in optimizer.state.values() for t in state.values()),
            peak_bytes=peak,
        ),
    }


def local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (a DTensor by its local shard)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            s = local(t).untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def gradients(model: nn.Module, optimizer) -> list[torch.Tensor]:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if isinstance(optimizer, ShardedAdamW):
        grads += [s.grad for s in optimizer.shards if s.grad is not None]
    return grads


# ---------------------------------------------------------------- ZeRO-1/2 by hand, ZeRO-3 with FSDP2


class ShardedAdamW:
    """AdamW whose states cover this rank's dim-0 chunk of each parameter (ZeRO stage 1, or 2).

    The chunk is a view of the parameter, so the update lands in place; each chunk is then broadcast
    from its owner. Stage 2 keeps only the chunk of each (already averaged) gradient; stage 1 keeps
    the whole gradient. Stage 0 is plain AdamW over whole parameters (replicated states).
    """

    def __init__(self, params, stage: int, **adamw):
        self.stage = stage
        n, me = (dist.get_world_size(), dist.get_rank()) if stage >= 1 else (1, 0)
        self.params = list(params)
        self.chunks, self.rows, self.shards = [], [], []
        for p in self.params:
            chunks = torch.chunk(p.detach(), n, dim=0)  # views; fewer than n when dim 0 is shorter
            start = sum(c.shape[0] for c in chunks[:me])
            rows = slice(start, start + (chunks[me].shape[0] if me < len(chunks) else 0))
            self.chunks.append(chunks)
            self.rows.append(rows)
            self.shards.append(nn.Parameter(p.detach()[rows]))
        self.optimizer = torch.optim.AdamW(self.shards, **adamw)

    @property
    def state(self):
        return self.optimizer.state

    @torch.no_grad()
    def step(self) -> None:
        for p, rows, shard in zip(self.params, self.rows, self.shards):
            shard.grad = p.grad[rows] if self.stage < 2 else p.grad[rows].clone()
            if self.stage >= 2:
                p.grad = None  # only the chunk remains
        self.optimizer.step()
        if self.stage >= 1:
            for chunks in self.chunks:
                for owner, c in enumerate(chunks):
                    dist.broadcast(c, src=owner)


def fsdp2(model: Transformer, mesh, compute: torch.dtype) -> Transformer:
    """ZeRO-3 with FSDP2: every block its own group, the rest (embeddings, norms, head) the root's."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32)
    for module in model.modules():
        if isinstance(module, Block):
            fully_shard(module, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


# ---------------------------------------------------------------- tensor parallelism


def tensor_parallel(model: Transformer, mesh) -> Transformer:
    """Megatron-style tensor parallelism over `mesh` (1-D) with DTensor's parallelize_module.

    The fused query/key/value projection is column-parallel after its rows are regrouped so that
    chunk r holds rank r's query heads, then its key and value heads; each attention module then
    works on its local heads. Needs n_heads and n_kv_heads divisible by the mesh size.
    """
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    t = mesh.size()
    plan = {}
    for path, m in model.named_modules():
        if isinstance(m, SelfAttention):
            regroup_rows(m.qkv, m.split, t)
            plan[f"{path}.qkv"] = ColwiseParallel()
        elif isinstance(m, CrossAttention):
            regroup_rows(m.kv, m.split, t)
            plan[f"{path}.q"] = ColwiseParallel()
            plan[f"{path}.kv"] = ColwiseParallel()
        elif isinstance(m, MLP):
            plan[f"{path}.up"] = ColwiseParallel()
            if m.gate is not None:
                plan[f"{path}.gate"] = ColwiseParallel()
            plan[f"{path}.down"] = RowwiseParallel()
        if isinstance(m, (SelfAttention, CrossAttention)):
            plan[f"{path}.out"] = RowwiseParallel()
            m.nh, m.nkv, m.split = m.nh // t, m.nkv // t, tuple(s // t for s in m.split)
    for name in ("embed", "target_embed"):
        if getattr(model, name) is not None:
            plan[name] = RowwiseParallel(input_layouts=Replicate())  # vocabulary-parallel embedding
    parallelize_module(model, mesh, plan)
    head = model.head
    if head is None:
        return model
    if model.spec.tie_embeddings:
        head.weight = model.embed.weight  # parallelize_module registered a new (sharded) parameter
    else:
        head.weight = nn.Parameter(distribute_tensor(head.weight.detach(), mesh, [Shard(0)]))
    if head.bias is not None:
        head.bias = nn.Parameter(distribute_tensor(head.bias.detach(), mesh, [Shard(0)]))
    # DTensor leaves a vocabulary-parallel embedding's gradient replicated (V x d on every rank);
    # keep each gradient as its parameter is placed, as Megatron's VocabParallelEmbedding does
    for p in model.parameters():
        if isinstance(p, DTensor):
            p.register_post_accumulate_grad_hook(place_gradient_like_parameter)
    # the head's output is sharded on the vocabulary; gather it for the loss
    head.register_forward_pre_hook(lambda m, args: (DTensor.from_local(args[0], mesh, [Replicate()]),))
    head.register_forward_hook(lambda m, args, out: out.full_tensor())
    return model


@torch.no_grad()
def place_gradient_like_parameter(p) -> None:
    from torch.distributed.tensor import DTensor

    if p.grad.placements != p.placements:
        shard = p.grad.redistribute(p.device_mesh, p.placements).to_local().clone()  # not a view of the whole
        p.grad = DTensor.from_local(shard, p.device_mesh, p.placements, shape=p.shape, stride=p.stride())


@torch.no_grad()
def regroup_rows(linear: nn.Linear, split: tuple[int, ...], t: int) -> None:
    """Reorder a fused projection's output rows [a | b | c] into t groups [a_0 b_0 c_0 | a_1 b_1 c_1 ...]."""
    parts = [torch.arange(sum(split[:i]), sum(split[: i + 1])).chunk(t) for i in range(len(split))]
    order = torch.cat([parts[i][r] for r in range(t) for i in range(len(split))]).to(linear.weight.device)
    linear.weight.copy_(linear.weight[order])
    if linear.bias is not None:
        linear.bias.copy_(linear.bias[order])
