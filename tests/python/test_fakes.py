"""The fake frameworks size arrays as the real ones do (issue 33): an
element of its dtype, float32 by default in Torch and float64 in CuPy, so
that an example's figures on the simulated driver are what a GPU shows."""
GiB = 1 << 30
MiB = 1 << 20


def test_sizes_follow_the_dtype_as_on_a_gpu(scenario):
    r = scenario("""
import torch, cupy
held = lambda: gpureclaim.process_memory()[0]
t = torch.empty(1 << 28, device="cuda")           # float32: 1 GiB
base = held() - (1 << 30)
out = {"default": [t.nbytes, t.numel(), t.element_size(), repr(t.dtype)]}
b = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
h = torch.empty(2, 1 << 20, dtype=torch.float16, device="cuda")
out["uint8"], out["half"] = b.nbytes, h.nbytes
out["aliases"] = [repr(torch.float), repr(torch.long), repr(torch.bool)]
a = cupy.empty(1 << 20)                           # float64: 8 MiB
c = cupy.empty((1 << 20,), dtype=cupy.float32)
out["cupy"] = [a.nbytes, c.nbytes, a.size]
out["driver"] = held() - base
emit(out)
""")
    assert r["default"] == [GiB, 1 << 28, 4, "torch.float32"]
    assert r["uint8"] == 256 * MiB and r["half"] == 4 * MiB
    assert r["aliases"] == ["torch.float32", "torch.int64", "torch.bool"]
    assert r["cupy"] == [8 * MiB, 4 * MiB, 1 << 20]
    # what the driver holds: every array rounded to the pools' 2 MiB
    assert r["driver"] == GiB + 256 * MiB + 4 * MiB + 8 * MiB + 4 * MiB
