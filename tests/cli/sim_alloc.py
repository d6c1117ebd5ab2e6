"""A process that allocates GPU memory through the simulated libcuda the way
a framework does (cuInit, primary context, cuMemAlloc_v2), says "ready" on
stdout and holds the memory until its stdin closes.

usage: sim_alloc.py LIBCUDA GPU [--managed] [--ipc] BYTES [BYTES...]

--managed allocates the first size with cuMemAllocManaged (UVM), --ipc
exports the first allocation with cuIpcGetMemHandle: memory a checkpoint
cannot move. Lines on stdin are commands, each answered with one line:
  alloc BYTES  cuMemAlloc_v2 -> "alloc RC blocked=N" (N: the calls of
               this process that waited for a checkpoint's lock so far)
  free         frees the last allocation -> "free RC"
  sync         cuCtxSynchronize, a call the tracer does not record ->
               "sync RC blocked=N"
  threads N    starts N threads that wait on a lock, never calling CUDA
               -> "threads N"
  busy P       its GPU's SM utilization P percent from now (0: idle from
               now: gprsim_busy) -> "busy RC"
"""
import ctypes
import sys
import threading

never = threading.Lock()  # held for good: threads wait on it
never.acquire()


def main():
    lib = ctypes.CDLL(sys.argv[1])
    gpu = int(sys.argv[2])
    args = sys.argv[3:]
    managed = "--managed" in args
    ipc = "--ipc" in args
    sizes = [int(s) for s in args if not s.startswith("--")]

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
    for i, size in enumerate(sizes):
        ptr = ctypes.c_ulonglong()
        if managed and i == 0:
            check("cuMemAllocManaged",
                  lib.cuMemAllocManaged(ctypes.byref(ptr),
                                        ctypes.c_size_t(size), 1))
        else:
            check("cuMemAlloc_v2",
                  lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)))
        ptrs.append(ptr)
    if ipc and ptrs:
        handle = ctypes.create_string_buffer(64)
        check("cuIpcGetMemHandle", lib.cuIpcGetMemHandle(handle, ptrs[0]))
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["alloc"]:
            ptr = ctypes.c_ulonglong()
            rc = lib.cuMemAlloc_v2(ctypes.byref(ptr),
                                   ctypes.c_size_t(int(words[1])))
            if rc == 0:
                ptrs.append(ptr)
            print(f"alloc {rc} blocked={lib.gprsim_blocked_calls()}",
                  flush=True)
        elif words[:1] == ["free"]:
            rc = lib.cuMemFree_v2(ptrs.pop()) if ptrs else -1
            print(f"free {rc}", flush=True)
        elif words[:1] == ["sync"]:
            rc = lib.cuCtxSynchronize()
            print(f"sync {rc} blocked={lib.gprsim_blocked_calls()}",
                  flush=True)
        elif words[:1] == ["busy"]:
            print(f"busy {lib.gprsim_busy(gpu, int(words[1]))}", flush=True)
        elif words[:1] == ["threads"]:
            for _ in range(int(words[1])):
                threading.Thread(target=never.acquire, daemon=True).start()
            print(f"threads {words[1]}", flush=True)


if __name__ == "__main__":
    main()
