"""torch.fft: fft2 caches a cuFFT plan per device and shape in
torch.backends.cuda.cufft_plan_cache; cuFFT's own plan memory (2 MiB here)
is taken from the driver directly, outside the caching allocator, so Torch
reports the number of plans, never their bytes."""


def fft2(t):
    from . import Tensor
    from .backends import cuda as bc

    dev = int(t.device.split(":")[1])
    bc.cufft_plan_cache[dev]._add(("fft2", t.nbytes))
    return Tensor(t.nbytes, t.device, dtype=t.dtype)
