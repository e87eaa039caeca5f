"""Where one warp of a Hopper attention kernel spends a steady tile, from an Nsight Compute source
page: the main loop (the innermost executed loop holding wgmma and exponentials) cut at its
landmarks, each part with its instructions executed per warp and tile, and its cycles (its share
of the loop's stall samples times the tile's period, which the caller gives: elapsed or SM-active
cycles over the block tiles an SM runs). It reads flashbuf's kernels and FlashAttention-4's alike,
so the two can be set side by side (bench/NOTES-prefill.md, "The P V wait after the rows' max"):

    ncu --set full --import-source yes -k regex:"prefill|flash" -c 3 -o REPORT \\
        python3 bench/profile_prefill.py 128 8192 full sm90 fa4
    ncu --import REPORT.ncu-rep --page source --csv --print-source sass -k regex:KERNEL > source.csv
    python3 bench/ncu_phases.py source.csv PERIOD [--table N] [--instructions]

The landmarks, in loop order: the issue turn (BAR.SYNC), S's products (HGMMA without a transposed
B), V's wait (the barrier try-wait after them), P V's products (HGMMA .tnspB), the turn passed
(BAR.ARV), S's wait (DEPBAR gsb0 0x1), P V's wait (DEPBAR gsb0 0x0). A CSV may hold several
launches' tables (FA4 runs twice: its first call compiles); --table picks one (default the last).
"""
import argparse
import collections
import re

from ncu_stalls import source_tables, stall_columns


def steady_loop(src, addr, samples, executed):
    """(first, last) of the innermost executed loop with wgmma and exponentials and most samples."""
    at = {a: i for i, a in enumerate(addr)}
    best = None
    for i, text in enumerate(src):
        m = re.search(r"BRA\s+(0x[0-9a-f]+)", text)
        if not m or executed[i] == 0:
            continue
        lo = at.get(int(m.group(1), 16))
        if lo is None or lo >= i:
            continue
        body = src[lo:i + 1]
        if not (any("HGMMA" in t for t in body) and any("MUFU" in t for t in body)):
            continue
        total = sum(samples[lo:i + 1])
        # an enclosing loop holds the inner one's samples too: prefer the shorter loop unless it
        # holds less than half of them
        if best is None or (i - lo < best[1] - best[0] and total > 0.5 * best[2]) or total > 2 * best[2]:
            best = (lo, i, total)
    return best


def phase_of(text, current, seen_s):
    if "BAR.SYNC" in text and current == "loop top, K wait":
        return "turn (BAR.SYNC)"
    if "HGMMA" in text and "tnspB" not in text and not seen_s:
        return "S issue"
    if current == "S issue" and "SYNCS.PHASECHK" in text:
        return "V wait"
    if "HGMMA" in text and "tnspB" in text and current in ("S issue", "V wait"):
        return "P V issue"
    if "BAR.ARV" in text and current == "P V issue":
        return "turn passed"
    if "DEPBAR.LE gsb0, 0x1" in text:
        return "S wait"
    if current == "S wait":
        return "softmax before the P V wait"
    if "DEPBAR.LE gsb0, 0x0" in text:
        return "P V wait"
    if current == "P V wait":
        return "after the P V wait"
    return current


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("period", type=float, help="cycles a steady tile (the kernel's SM-active cycles / block tiles an SM)")
    ap.add_argument("--table", type=int, default=-1, help="which launch's table (default: the last)")
    ap.add_argument("--instructions", action="store_true",
                    help="then every executed instruction of the loop: its offset in the loop, executions a "
                         "warp-tile, cycles and top stall reasons (where inside a part the cycles go)")
    a = ap.parse_args()
    col, data = source_tables(a.csv)[a.table]
    src = [r[col["Source"]] for r in data]
    addr = [int(r[col["Address"]], 16) for r in data]
    samples = [int(r[col["Warp Stall Sampling (All Samples)"]] or 0) for r in data]
    executed = [int(r[col["Instructions Executed"]] or 0) for r in data]
    reasons = stall_columns(col)
    lo, hi, total = steady_loop(src, addr, samples, executed)
    tiles = executed[hi]  # the back branch: once a warp and tile
    parts = collections.OrderedDict()
    current, seen_s = "loop top, K wait", False
    for i in range(lo, hi + 1):
        current = phase_of(src[i], current, seen_s)
        seen_s = seen_s or current == "S issue"
        p = parts.setdefault(current, [0, 0, 0, collections.Counter()])
        p[0] += samples[i]
        p[1] += executed[i]
        p[2] += 1
        for r in reasons:
            p[3][r] += int(data[i][col[r]] or 0)
    print(f"loop of {hi - lo + 1} instructions, {total} samples, {tiles} warp-tiles")
    print(f"{'part':30s} {'instr':>6s} {'exec/tile':>9s} {'cycles':>7s}  top stall reasons")
    for name, (s, e, n, why) in parts.items():
        top = ", ".join(f"{r[6:]} {100 * v // max(s, 1)}%" for r, v in why.most_common(3))
        print(f"{name:30s} {n:6d} {e / tiles:9.1f} {s * a.period / total:7.0f}  {top}")
    print(f"{'a steady tile':30s} {'':6s} {sum(p[1] for p in parts.values()) / tiles:9.1f} {a.period:7.0f}")
    if a.instructions:
        print(f"\n{'at':>5s} {'exec/tile':>9s} {'cycles':>7s}  {'instruction':60s} top stall reasons")
        for i in range(lo, hi + 1):
            if executed[i] == 0:
                continue  # code the loop holds but did not run (a cold path)
            why = collections.Counter({r: int(data[i][col[r]] or 0) for r in reasons})
            top = ", ".join(f"{r[6:]} {100 * v // max(samples[i], 1)}%" for r, v in why.most_common(2) if v)
            print(f"{i - lo:5d} {executed[i] / tiles:9.2f} {samples[i] * a.period / total:7.1f}  "
                  f"{src[i].strip()[:60]:60s} {top}")


if __name__ == "__main__":
    main()
