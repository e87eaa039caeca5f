"""Variants of the Hopper block-per-item kernel against each other, on the GPU machine (a
measurement tool, not a benchmark of record): bench/trace_prefill.cu built once per set of -D
flags (nvcc directly: seconds a build, all in parallel), then every build run ROUNDS times in
rotated order (the second round reversed), with nvidia-smi sampling the SM clock and the board's
power during each run. The long prefills run at the power limit, where a change's time is its
work per cycle times the clock its energy leaves (bench/NOTES-prefill.md, stop 51): the clock
column says which of the two moved. Prints each point's median TFLOP/s per variant and its ratio
to the first variant, then each variant's mean clock and power over its runs.

    python3 bench/trace_variants.py OUTDIR base= after=-DDIAG_AFTER noload="-DDIAG_NOLOAD" [--rounds 3] [--tiles]

NAME=FLAGS names a build (FLAGS may be empty: the tree as it is). Run from any directory; the
sources are this checkout's. Builds, runs and samples go to OUTDIR. --tiles also builds every
variant with -DTRACE_TILES, runs it once after the rounds and prints bench/tile_overlap.py's
tables of its steady tiles (TILE_CSVS: D 128 and D 64, S 8k unmasked); their CSVs (tens of MB
each) are removed once tabulated, unless --keep-stamps, so that an archive of OUTDIR stays within
what a device call brings back (16 MiB a file).
"""
import argparse
import collections
import concurrent.futures
import os
import re
import shlex
import statistics
import subprocess
import sys

import tile_overlap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POINT = re.compile(r"(D=.*?section=\s*\d+).*?([\d.]+) TFLOP/s")
TILE_CSVS = ("trace-d128-s8192-c0-sec0-tiles.csv", "trace-d64-s8192-c0-sec0-tiles.csv")
TILES_SUFFIX = "+tiles"  # the name of a variant's -DTRACE_TILES build


def build(outdir: str, name: str, flags: str) -> str:
    exe = os.path.join(outdir, f"trace-{name}")
    cmd = (["nvcc", "-std=c++20", "-O3", "-DNDEBUG", "-DFLASHBUF_WITH_CUDA=1", *shlex.split(flags),
            "-gencode", "arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr",
            "-Iinclude", "-Isrc", "-Ibench", "bench/trace_prefill.cu", "src/cuda/tensor_map.cu", "-o", exe, "-lcuda"])
    with open(os.path.join(outdir, f"build-{name}.log"), "w") as log:
        if subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
            sys.exit(f"build {name} failed: {log.name}")
    return exe


def run(outdir: str, name: str, exe: str, rnd: int) -> tuple[dict, list]:
    """One run of a build: its points' TFLOP/s and the (clock MHz, power W) samples taken during it."""
    traces = os.path.join(outdir, f"traces-{name}-{rnd}")
    os.makedirs(traces, exist_ok=True)
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "20"], stdout=subprocess.PIPE, text=True)
    out = subprocess.run([exe, traces], capture_output=True, text=True).stdout
    smi.terminate()
    samples = [tuple(map(float, line.split(","))) for line in smi.communicate()[0].splitlines() if line.count(",") == 1]
    with open(os.path.join(outdir, f"run-{name}-{rnd}.txt"), "w") as f:
        f.write(out)
    return {m.group(1): float(m.group(2)) for m in map(POINT.match, out.splitlines()) if m}, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("variants", nargs="+", help="NAME=FLAGS (the first is the reference)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tiles", action="store_true", help="also each variant's per-tile stamps (-DTRACE_TILES)")
    ap.add_argument("--keep-stamps", action="store_true", help="keep the per-tile CSVs once tabulated")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    variants = dict(v.split("=", 1) for v in a.variants)
    names = list(variants)
    builds = dict(variants)
    if a.tiles:
        builds.update({n + TILES_SUFFIX: f"{variants[n]} -DTRACE_TILES" for n in names})
    with concurrent.futures.ThreadPoolExecutor(len(builds)) as pool:
        exes = dict(zip(builds, pool.map(lambda n: build(a.outdir, n, builds[n]), builds)))
    tflops = collections.defaultdict(lambda: collections.defaultdict(list))
    clocks = collections.defaultdict(list)
    for rnd in range(1, a.rounds + 1):
        for name in (names if rnd % 2 else names[::-1]):
            points, samples = run(a.outdir, name, exes[name], rnd)
            for point, value in points.items():
                tflops[point][name].append(value)
            clocks[name] += [s for s in samples if s[1] > 300]  # the GPU busy, not between launches
    print("point".ljust(50) + "".join(n.rjust(14) for n in names))
    for point, by_name in tflops.items():
        medians = {n: statistics.median(v) for n, v in by_name.items() if v}
        ref = medians.get(names[0])
        cells = [f"{medians[n]:7.1f} {medians[n] / ref:5.3f}" if n in medians and ref else "-" for n in names]
        print(point.ljust(50) + "".join(c.rjust(14) for c in cells))
    for name in names:
        s = clocks[name]
        if s:
            print(f"{name}: SM clock {statistics.mean(x[0] for x in s):.0f} MHz,"
                  f" power {statistics.mean(x[1] for x in s):.0f} W ({len(s)} samples)")
    if a.tiles:
        for name in names:
            stamps = os.path.join(a.outdir, f"tiles-{name}")
            os.makedirs(stamps, exist_ok=True)
            subprocess.run([exes[name + TILES_SUFFIX], stamps], capture_output=True, text=True)
            print(f"== {name}: per-tile stamps")
            for csv in TILE_CSVS:
                path = os.path.join(stamps, csv)
                if os.path.exists(path):
                    tile_overlap.summarize(path)
                    if not a.keep_stamps:
                        os.remove(path)
                else:
                    print(f"{path}: not written")


if __name__ == "__main__":
    main()
