"""The startup hook's cost (docs/oom.md, "How it starts"): interpreter
start with and without gpureclaim-startup.pth in site-packages, the
variable unset; and, for scale, with GPURECLAIM_OOM=1 (the hook then
imports gpureclaim and starts the watch).

Two virtual environments (python -m venv --without-pip) are made in a
scratch folder, alike but for the .pth: each has a path .pth naming the
built package's folder, the second also gpureclaim-startup.pth. Rounds are
interleaved (each round starts every variant STARTS times, in turn, `python
-c pass`); printed per variant: the median and the minimum of all starts,
and the median of the per-round differences to the plain one, in µs. What
site does with the .pth at each start (site.addpackage: read it, compile
and run its line) is also timed inside one interpreter, where process
start-up noise cannot hide it.

  python3 bench/startup_bench.py [--rounds 7] [--starts 20] [--package DIR]

DIR: the folder holding the built gpureclaim package (default
build/python). Needs no GPU.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTH = os.path.join(ROOT, "python", "gpureclaim-startup.pth")


def make_venv(where, package, with_pth):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where],
                   check=True)
    site = subprocess.run(
        [os.path.join(where, "bin", "python"), "-c",
         "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(site, "gpr-build.pth"), "w") as f:
        f.write(package + "\n")
    if with_pth:
        shutil.copy(PTH, site)
    return os.path.join(where, "bin", "python")


def one_start(python, env):
    t0 = time.perf_counter()
    subprocess.run([python, "-c", "pass"], env=env, check=True)
    return (time.perf_counter() - t0) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--package", default=os.path.join(ROOT, "build",
                                                      "python"))
    args = ap.parse_args()
    if args.rounds < 7:
        ap.error("--rounds: at least 7")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("GPURECLAIM_", "PYTHON"))}
    scratch = tempfile.mkdtemp(prefix="gpr-startup-")
    try:
        plain = make_venv(os.path.join(scratch, "plain"), args.package,
                          False)
        hooked = make_venv(os.path.join(scratch, "hooked"), args.package,
                           True)
        oom_dir = os.path.join(scratch, "oom")
        os.mkdir(oom_dir)
        variants = [
            ("without the .pth", plain, base),
            ("with the .pth, variable unset", hooked, base),
            ("with the .pth, GPURECLAIM_OOM=1", hooked,
             dict(base, GPURECLAIM_OOM=oom_dir + os.sep)),
        ]
        for _, py, env in variants:  # warm the page cache
            one_start(py, env)
        starts = {name: [] for name, _, _ in variants}
        medians = {name: [] for name, _, _ in variants}
        for _ in range(args.rounds):
            for name, py, env in variants:
                got = [one_start(py, env) for _ in range(args.starts)]
                starts[name] += got
                medians[name].append(statistics.median(got))
        ref = variants[0][0]
        print(f"interpreter start ({sys.version.split()[0]}), "
              f"{args.rounds} interleaved rounds of {args.starts} starts "
              f"each, `python -c pass`, µs:")
        for name, _, _ in variants:
            diff = [m - r for m, r in zip(medians[name], medians[ref])]
            print(f"  {name:34s} median {statistics.median(starts[name]):8.0f}"
                  f"  min {min(starts[name]):8.0f}"
                  f"  paired diff median {statistics.median(diff):+7.0f}")
        # what site does with the file at each start: read it, compile
        # and run its line (site.addpackage), the variable unset
        import site

        folder = os.path.dirname(PTH)
        name = os.path.basename(PTH)
        # for scale, a .pth that only names a folder (as most do)
        ref_dir = os.path.join(scratch, "ref")
        os.mkdir(ref_dir)
        with open(os.path.join(ref_dir, "one-path.pth"), "w") as f:
            f.write(args.package + "\n")
        env_saved = {k: os.environ.pop(k) for k in list(os.environ)
                     if k.startswith("GPURECLAIM_")}
        try:
            n = 2000
            for label, d, f in (("gpureclaim-startup.pth", folder, name),
                                ("a .pth naming one folder", ref_dir,
                                 "one-path.pth")):
                per = [min(timeit.repeat(
                    lambda: site.addpackage(d, f, set()), number=n,
                    repeat=3)) / n * 1e6 for _ in range(args.rounds)]
                print(f"site.addpackage of {label} (read, compile, run; "
                      f"variable unset; {args.rounds} rounds): median "
                      f"{statistics.median(per):.1f} µs, min "
                      f"{min(per):.1f} µs")
        finally:
            os.environ.update(env_saved)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
