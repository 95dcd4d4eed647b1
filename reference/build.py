"""build(spec): construct on the meta device, then materialise and initialise where asked."""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from archspec.core.errors import SpecError
from archspec.core.limits import digits_of
from archspec.core.vocab import FLOAT_DTYPES, dtype_key
from archspec.reference.model import Head, LearnedPosition, Transformer
from archspec.spec.model import ModelSpec


class InsufficientMemoryError(MemoryError):
    """Real weights that would not fit in the memory available on the device."""


def resolve_dtype(dtype) -> torch.dtype:
    """torch's dtype of `dtype`: None (float32), a floating torch.dtype, a floating dtype torch names
    ('float64', 'float8_e5m2', 'torch.bfloat16'), or one of archspec's short names and aliases
    (archspec.core.vocab: 'bf16', 'fp8', which is E4M3)."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point type, got {dtype}")
        return dtype
    own = getattr(torch, dtype.strip().lower().removeprefix("torch."), None) if isinstance(dtype, str) else None
    if isinstance(own, torch.dtype) and own.is_floating_point:
        return own
    key = dtype_key(dtype)
    if key in FLOAT_DTYPES:
        return getattr(torch, FLOAT_DTYPES[key])
    raise SpecError(f"unknown dtype {dtype!r}; use one of {', '.join(FLOAT_DTYPES)}, a floating-point dtype torch "
                    "names (float64, float8_e5m2) or a torch.dtype")  # fmt: skip


DEVICES = "'cpu', 'cuda', 'cuda:N', 'mps' or 'meta'"
# The most layers build() makes (both stacks and the multi-token-prediction modules): a spec past it
# (a million layers) is refused from its fields before a single module is built. The deepest preset
# has a few hundred.
MAX_LAYERS = 10_000
INT64_MAX = 2**63 - 1


def resolve_device(device) -> torch.device:
    if device is None:
        return torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a string such as 'cpu' or a torch.device, got {type(device).__name__}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise SpecError(f"unknown device {device!r}; use {DEVICES}") from None
    if dev.type in ("cpu", "meta"):
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise SpecError(f"device {device!r} asked for, but CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise SpecError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return dev
    if dev.type == "mps" and torch.backends.mps.is_available():
        return dev
    backend = getattr(torch, dev.type, None)
    if backend is not None and getattr(backend, "is_available", lambda: False)():
        return dev
    raise SpecError(f"device {device!r} is not available on this machine; use {DEVICES}")


def _cgroup_free() -> int | None:
    """Bytes this process's cgroup may still allocate (v2 memory.max, v1 limit_in_bytes), if limited."""
    v1 = "/sys/fs/cgroup/memory/memory."
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         (v1 + "limit_in_bytes", v1 + "usage_in_bytes")):  # fmt: skip
        try:
            with open(limit) as f:
                text = f.read().strip()
            if text == "max":
                continue
            with open(usage) as f:
                used = int(f.read().strip())
            cap = int(text)
            if cap < 2**60:  # v1 reports "no limit" as a huge number
                return max(cap - used, 0)
        except (OSError, ValueError):
            continue
    return None


def available_memory(device: torch.device) -> int | None:
    """Bytes free for new tensors on `device`, or None where it cannot be told. On the CPU: the
    least of MemAvailable, the cgroup's remaining limit and the address-space rlimit."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except OSError:
        with contextlib.suppress(ValueError, OSError, AttributeError):
            limits.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    cgroup = _cgroup_free()
    if cgroup is not None:
        limits.append(cgroup)
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    except (ImportError, OSError, ValueError):
        pass
    return min(limits) if limits else None


def _sizes(model: Any, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(dotted field name, value) of every whole number in a spec, its sub-tables included."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, int) and not isinstance(value, bool):
            yield prefix + name, value
        elif hasattr(type(value), "model_fields"):
            yield from _sizes(value, f"{prefix}{name}.")


def _about(n: int) -> str:
    """A huge integer for a message, without converting it to a float (which fails beyond 1.8e308)."""
    digits = digits_of(n)
    return f"{n:,}" if digits <= 24 else f"about 10^{digits - 1}"


def check_buildable(spec: ModelSpec) -> None:
    """Refuse, from the spec's fields and before torch sees any size: a field beyond what torch
    represents (2^63 - 1), a sinusoidal table torch cannot address, or too many layers to build in
    reasonable time. A tensor too large for torch to address is refused as it is made (on_meta)."""
    for field, value in _sizes(spec):
        if value > INT64_MAX:
            raise SpecError(
                f"{spec.name}: {field} = {_about(value)} is more than torch can represent (2^63 - 1); "
                "count it with archspec.count_params, which needs no model"
            )
    if spec.position.kind == "sinusoidal" and spec.max_positions * spec.d_model * 4 > INT64_MAX:
        raise SpecError(
            f"{spec.name}: the sinusoidal table of max_positions x d_model = {spec.max_positions:,} x "
            f"{spec.d_model:,} fp32 values is more bytes than torch can address (2^63 - 1)"
        )
    layers = spec.encoder_layers + spec.decoder_layers + (spec.mtp.modules if spec.mtp is not None else 0)
    if layers > MAX_LAYERS:
        raise SpecError(
            f"{spec.name}: the reference model would hold {layers:,} layers, more than build() makes "
            f"({MAX_LAYERS:,}); count it with archspec.count_params, which needs no model"
        )


def on_meta(spec: ModelSpec, dtype: torch.dtype, make):
    """make() on the meta device; a tensor whose bytes in `dtype` torch cannot address (it says so as it
    sizes the tensor's storage) is refused in one line."""
    try:
        with torch.device("meta"):
            return make()
    except RuntimeError as err:
        sizes = re.match(r"Storage size calculation overflowed with sizes=(\[[0-9, ]*\])", str(err))
        if sizes is None:
            raise
        shape = tuple(int(s) for s in sizes[1].strip("[]").split(","))
        raise SpecError(
            f"{spec.name}: a tensor of shape {shape} has more bytes in {str(dtype).removeprefix('torch.')} "
            "than torch can address (2^63 - 1); count it with archspec.count_params, which needs no model"
        ) from None


def weight_bytes(model: nn.Module) -> int:
    """The bytes of the model's parameters, each tensor once (tied tables count once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def check_fits(model: nn.Module, device: torch.device) -> None:
    """Refuse, with the numbers, to allocate the weights of a meta-built `model` that would not fit."""
    need = weight_bytes(model)
    have = available_memory(device)
    if have is not None and need > have:
        dtype = next(model.parameters()).dtype
        raise InsufficientMemoryError(
            f"{model.spec.name}: its weights need {need / 2**30:.1f} GiB in {str(dtype).removeprefix('torch.')} "
            f"but {device} has {have / 2**30:.1f} GiB available; use device='meta' to build it without memory"
        )


def build(
    spec: ModelSpec,
    device=None,
    dtype=None,
    *,
    seed: int = 0,
    check_memory: bool = True,
    attention: str = "flash",
    recompute: str = "none",
    mtp: bool = False,
) -> Transformer:
    """The reference model of `spec`.

    device: 'meta' allocates nothing (shapes only); 'cpu' (default) or 'cuda' get real weights,
    initialised as GPT-2 does (see init_weights), deterministically under `seed`.
    attention ('flash' | 'eager') and recompute ('none' | 'selective' | 'full'): how forward runs,
    see Transformer.set_execution. mtp: also the multi-token-prediction modules (`spec.mtp`) at
    mtp.{i}, which transformers does not build and forward does not run.
    """
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"build() takes a ModelSpec, got {type(spec).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be a whole number, got {type(seed).__name__}")
    if not 0 <= seed <= INT64_MAX:
        raise SpecError(f"seed must be between 0 and 2^63 - 1, got {seed}")
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    if dt.itemsize == 1 and dev.type != "meta":
        raise SpecError(
            f"dtype {str(dt).removeprefix('torch.')} holds weights but torch's matmuls do not run in it; "
            "build it on device='meta' to count, or use bfloat16/float16/float32"
        )
    check_buildable(spec)
    model = on_meta(spec, torch.float32, lambda: Transformer(spec, mtp=mtp))
    model = on_meta(spec, dt, lambda: model.to(dt)).set_execution(attention, recompute)
    if dev.type == "meta":
        return model
    if check_memory:
        check_fits(model, dev)
    return materialize(model, dev, seed=seed)


def materialize(model: Transformer, device, seed: int = 0) -> Transformer:
    """Allocate a meta-built model on `device` and initialise it (buffers recomputed)."""
    model.to_empty(device=resolve_device(device))
    model.tie_weights()  # to_empty replaced the shared tensor with one per module
    init_weights(model, seed=seed)
    return model


@torch.no_grad()
def init_weights(model: Transformer, seed: int = 0, scheme: str | None = None) -> Transformer:
    """Initialise every parameter and recompute every buffer, deterministically under `seed`, by the
    spec's `init` scheme unless `scheme` names another.

    scheme 'gpt2' (the default of decoder-only and encoder-only specs): weights N(0, 0.02); residual output projections
    (attention, cross-attention and MLP outputs) N(0, 0.02 / sqrt(2 * layers)); biases 0; norms 1.
    scheme 'xavier' (the default of encoder-decoder specs, as torch.nn.Transformer and tensor2tensor): Xavier-uniform
    matrices, embeddings N(0, d_model^-1/2), biases 0, norms 1.
    """
    spec = model.spec
    scheme = scheme or spec.init
    if scheme not in ("gpt2", "xavier"):
        raise SpecError(f"unknown init scheme {scheme!r}; use 'gpt2' or 'xavier'")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    residual_std = 0.02 / math.sqrt(2 * spec.n_layers)
    residual_outputs = set()
    for m in model.modules():
        for name in ("out", "down"):
            if hasattr(m, "component") and isinstance(getattr(m, name, None), nn.Linear):
                residual_outputs.add(id(getattr(m, name).weight))

    def fill(t: torch.Tensor, sampler) -> None:
        # sample on the CPU with the seeded generator, then copy: identical on every device
        t.copy_(sampler(torch.empty(t.shape, dtype=torch.float32)))

    seen = set()
    for module in model.modules():
        for pname, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue  # tied
            seen.add(id(p))
            if pname == "bias":
                p.zero_()
            elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
                p.fill_(1.0)
            elif scheme == "gpt2":
                std = residual_std if id(p) in residual_outputs else 0.02
                fill(p, lambda t, s=std: t.normal_(0.0, s, generator=gen))
            elif isinstance(module, (nn.Embedding, LearnedPosition, Head)):
                fill(p, lambda t: t.normal_(0.0, spec.d_model**-0.5, generator=gen))
            else:
                bound = math.sqrt(6.0 / (p.shape[0] + p.shape[-1]))
                fill(p, lambda t, b=bound: t.uniform_(-b, b, generator=gen))
        if hasattr(module, "reset_buffers"):
            module.reset_buffers()
    return model
