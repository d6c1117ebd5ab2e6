"""A process that allocates GPU memory through the simulated libcuda the way
a framework does (cuInit, primary context, cuMemAlloc_v2), says "ready" on
stdout and holds the memory until its stdin closes.

usage: sim_alloc.py LIBCUDA GPU BYTES [BYTES...]
"""
import ctypes
import sys


def main():
    lib = ctypes.CDLL(sys.argv[1])
    gpu = int(sys.argv[2])
    sizes = [int(s) for s in sys.argv[3:]]

    def check(what, rc):
        if rc != 0:
            print(f"{what} failed: CUresult {rc}", flush=True)
            sys.exit(1)

    check("cuInit", lib.cuInit(0))
    dev = ctypes.c_int()
    check("cuDeviceGet", lib.cuDeviceGet(ctypes.byref(dev), gpu))
    ctx = ctypes.c_void_p()
    check("cuDevicePrimaryCtxRetain",
          lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check("cuCtxSetCurrent", lib.cuCtxSetCurrent(ctx))
    ptrs = []
    for size in sizes:
        ptr = ctypes.c_ulonglong()
        check("cuMemAlloc_v2",
              lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)))
        ptrs.append(ptr)
    print("ready", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
