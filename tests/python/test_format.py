"""gpureclaim.format_bytes covers every figure a report prints: the sums
stop at 2**64 - 1 (16.0 EiB), so format_bytes(2**63) and up work (issue
21, item 11); past that, one clear OverflowError."""


def test_format_bytes_up_to_16_eib(scenario):
    r = scenario("""
cases = [0, 1536, 2**63 - 1, 2**63, 2**64 - 1, -2**63]
out = {str(n): gpureclaim.format_bytes(n) for n in cases}
errs = {}
for n in (2**64, -2**63 - 1, 10**30):
    try:
        gpureclaim.format_bytes(n)
        errs[str(n)] = None
    except OverflowError as e:
        errs[str(n)] = str(e)
emit({"out": out, "errs": errs})
""")
    assert r["out"] == {
        "0": "0 B", "1536": "1.5 KiB", str(2**63 - 1): "8.0 EiB",
        str(2**63): "8.0 EiB", str(2**64 - 1): "16.0 EiB",
        str(-2**63): "-8.0 EiB"}
    for n, e in r["errs"].items():
        assert e and "from -2**63 to 2**64 - 1" in e and n in e, (n, e)
