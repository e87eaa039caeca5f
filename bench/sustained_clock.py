#!/usr/bin/env python3
"""The SM clock and power each prefill implementation sustains at the GPU's power limit, and its
work per clock cycle: one point of the prefill grid, each implementation's CUDA graph replayed
for --seconds while nvidia-smi samples clocks.sm and power.draw every 20 ms (not a benchmark of
record; the records' TFLOP/s are timed at these sustained clocks, ncu's cycles at locked ones,
so a gap between two kernels splits into clock x work per cycle here).

    python3 bench/sustained_clock.py --d 128 --s 8192 --causal no --impls flashbuf,fa4

Prints one line per implementation: TFLOP/s over the last half of the replays, the median SM
clock (MHz) and power (W) sampled over that half, and TFLOP/s per GHz.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the harness's implementations and grid constants)


def sampled(seconds: float, replay) -> tuple[list[tuple[float, float]], list[tuple[float, float, float]]]:
    """Calls replay() for `seconds`; returns each replay's (end time, µs) and nvidia-smi's
    (time, clock MHz, power W) samples, both stamped with time.monotonic()."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "20", "-i", str(torch.cuda.current_device())],
                           stdout=subprocess.PIPE, text=True, bufsize=1)
    samples, replays = [], []

    def read_samples():  # a thread, so the replays never wait on the pipe
        for line in smi.stdout:
            try:
                clock, power = (float(x) for x in line.split(","))
            except ValueError:  # "[N/A]" or a partial line
                continue
            samples.append((time.monotonic(), clock, power))

    reader = threading.Thread(target=read_samples, daemon=True)
    reader.start()
    start_evt, stop_evt = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        start_evt.record()
        replay()
        stop_evt.record()
        stop_evt.synchronize()
        replays.append((time.monotonic(), start_evt.elapsed_time(stop_evt) * 1e3))
    smi.terminate()
    smi.wait()
    reader.join(timeout=1.0)
    return replays, samples


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--s", type=int, default=8192)
    p.add_argument("--causal", choices=("yes", "no"), default="no")
    p.add_argument("--impls", default="flashbuf,fa4", help="flashbuf and any of fa2, cudnn, fa4")
    p.add_argument("--seconds", type=float, default=3.0, help="replay time per implementation")
    p.add_argument("--backend", default="sm90")
    args = p.parse_args()
    causal = args.causal == "yes"
    d, s = args.d, args.s
    b, h = bench.PREFILL_TOKENS // s, bench.PREFILL_HIDDEN // d
    flops = bench.prefill_flops(b, h, s, d, d, causal)
    q, k, v = (torch.randn(b, s, h, d, device=bench.DEV, dtype=torch.bfloat16) for _ in range(3))
    print(f"prefill d={d} s={s} causal={causal} b={b} h={h}: {args.seconds:.1f} s each")
    for name in args.impls.split(","):
        if name == "flashbuf":
            fn = lambda: bench.flashbuf.attention(q, k, v, causal=causal, backend=args.backend)  # noqa: E731
        else:
            anchor = bench.anchor_fn(name, causal)
            fn = lambda anchor=anchor: anchor(q, k, v)  # noqa: E731
        graph, reps = bench.captured_graph([fn], target_ms=20.0)  # the harness's graphs, ~20 ms each
        t_start = time.monotonic()
        replays, samples = sampled(args.seconds, graph.replay)
        half = t_start + args.seconds / 2
        us = statistics.median(t for end, t in replays if end >= half) / reps
        clocks = [c for t, c, _ in samples if t >= half]
        powers = [w for t, _, w in samples if t >= half]
        tflops = flops / (us * 1e-6) / 1e12
        mhz = statistics.median(clocks) if clocks else float("nan")
        print(f"{name:>9}: {tflops:7.1f} TFLOP/s  {us:9.1f} us  SM {mhz:6.0f} MHz (min {min(clocks, default=0):.0f}) "
              f"{statistics.median(powers) if powers else float('nan'):5.0f} W  {tflops / (mhz / 1e3):6.1f} TFLOP/s per GHz "
              f"({len(clocks)} samples)")
        del graph
    return 0


if __name__ == "__main__":
    sys.exit(main())
