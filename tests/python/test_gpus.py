"""_gpureclaim.gpus(): the GPUs as NVML names them (UUID first), this
process's own bytes on each and every process there; what the cluster
reports key GPUs by."""

UUID = "GPU-5111a000-0000-4000-8000-00000000000{}".format


def test_in_use_and_host_views(scenario):
    r = scenario("""
    from gpureclaim import _gpureclaim as c
    out = {"none": c.gpus(), "host_before": c.gpus(host=True)}
    import cupy
    cupy.cuda.Device(1).use()
    a = cupy.empty(64 << 20, dtype=cupy.uint8)
    out["in_use"] = c.gpus()
    out["host"] = c.gpus(host=True)
    out["figure"] = gpureclaim.process_memory()
    out["pid"] = os.getpid()
    emit(out)
    """, sim="gpus=3;extra=0:1:3GiB")
    assert r["none"] == []  # no CUDA in the process: nothing in use
    assert [g["uuid"] for g in r["host_before"]] == [UUID(i) for i in range(3)]
    assert all(g["device"] is None and g["held"] == 0 for g in r["host_before"])
    (g,) = r["in_use"]
    assert g["device"] == 1 and g["nvml_index"] == 1 and g["uuid"] == UUID(1)
    assert g["name"] == "Simulated GPU" and g["total"] == 80 << 30
    assert g["held"] == r["figure"]["1"] == (512 << 20) + (64 << 20)
    assert g["processes"] == [[r["pid"], g["held"]]]
    assert g["used"] == g["held"] and g["error"] is None and g["mig"] is False
    h = r["host"]
    assert [x["device"] for x in h] == [0, 1, 2]  # CUDA is loaded now
    assert [x["held"] for x in h] == [0, g["held"], 0]
    assert h[0]["processes"] == [[1, 3 << 30]] and h[0]["used"] == 3 << 30


def test_mig_nvml_absent_and_broken_gpus(scenario):
    r = scenario("""
    from gpureclaim import _gpureclaim as c
    import cupy
    a = cupy.empty(2 << 20, dtype=cupy.uint8)
    emit(c.gpus())
    """, sim="gpus=1;fault=mig")
    (g,) = r.data
    assert g["uuid"] == UUID(0) and g["mig"] is True
    assert g["held"] is None  # MIG: the driver has no per-process figure
    assert all(b is None for _, b in g["processes"])

    r = scenario("""
    from gpureclaim import _gpureclaim as c
    import cupy
    a = cupy.empty(2 << 20, dtype=cupy.uint8)
    out = {"in_use": c.gpus()}
    try:
        c.gpus(host=True)
    except gpureclaim.Error as e:
        out["host_error"] = str(e)
    emit(out)
    """, sim="gpus=1;fault=nvml-absent")
    (g,) = r["in_use"]
    assert g["device"] == 0 and g["uuid"] is None and g["held"] is None
    assert "NVML" in g["error"]
    assert "NVML" in r["host_error"]

    r = scenario("""
    from gpureclaim import _gpureclaim as c
    emit(c.gpus(host=True))
    """, sim="gpus=2;fault=broken:1")
    ok, broken = r.data
    assert ok["uuid"] == UUID(0) and ok["error"] is None
    assert broken["uuid"] is None and "NVML" in broken["error"]


def test_bad_arguments(scenario):
    r = scenario("""
    from gpureclaim import _gpureclaim as c
    out = []
    for call in (lambda: c.gpus(True), lambda: c.gpus(hosts=True)):
        try:
            call()
        except TypeError as e:
            out.append(str(e))
    emit(out)
    """)
    assert len(r.data) == 2
