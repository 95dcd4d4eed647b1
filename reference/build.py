"""build(spec): construct on the meta device, then materialise and initialise where asked."""

from __future__ import annotations

import math
import os

import torch
from torch import nn

from archspec.params import count_params
from archspec.reference.model import Head, LearnedPosition, Transformer
from archspec.spec import ModelSpec

DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "float64": torch.float64, "fp64": torch.float64, "double": torch.float64,
    "float8": torch.float8_e4m3fn, "fp8": torch.float8_e4m3fn,
}  # fmt: skip


class InsufficientMemoryError(MemoryError):
    """Real weights that would not fit in the memory available on the device."""


def resolve_dtype(dtype) -> torch.dtype:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point type, got {dtype}")
        return dtype
    if isinstance(dtype, str) and dtype.lower().removeprefix("torch.") in DTYPES:
        return DTYPES[dtype.lower().removeprefix("torch.")]
    raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(sorted(set(DTYPES)))} or a torch.dtype")


def resolve_device(device) -> torch.device:
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:N', 'mps' or 'meta'") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available on this machine")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r} asked for, but MPS is not available on this machine")
    return dev


def available_memory(device: torch.device) -> int | None:
    """Bytes free for new tensors on `device`, or None where it cannot be told."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "cpu":
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def check_fits(spec: ModelSpec, device: torch.device, dtype: torch.dtype) -> None:
    """Refuse, with the numbers, to allocate weights that would not fit."""
    need = count_params(spec).total * dtype.itemsize
    have = available_memory(device)
    if have is not None and need > have:
        raise InsufficientMemoryError(
            f"{spec.name}: its weights need {need / 2**30:.1f} GiB in {str(dtype).removeprefix('torch.')} "
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
) -> Transformer:
    """The reference model of `spec`.

    device: 'meta' allocates nothing (shapes only); 'cpu' (default) or 'cuda' get real weights,
    initialised as GPT-2 does (see init_weights), deterministically under `seed`.
    attention ('flash' | 'eager') and recompute ('none' | 'selective' | 'full'): how forward runs,
    see Transformer.set_execution.
    """
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"build() takes a ModelSpec, got {type(spec).__name__}")
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    with torch.device("meta"):
        model = Transformer(spec).to(dt).set_execution(attention, recompute)
    if dev.type == "meta":
        return model
    if check_memory:
        check_fits(spec, dev, dt)
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
        raise ValueError(f"unknown init scheme {scheme!r}; use 'gpt2' or 'xavier'")
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
