"""Where a kernel's warps wait, from an Nsight Compute source page: total stall samples by reason
(also split into code one thread of a warp runs, mostly a producer's, and code whole warps run), then
per chunk of SASS instructions (in address order) its share of the samples, the instruction
with the most, and the chunk's top reasons. Input: the CSV of

  ncu --import REPORT.ncu-rep --page source --csv --print-source sass -k regex:KERNEL > source.csv

for a report taken with `--set full --import-source yes` (bench/profile_decode.py and
bench/profile_prefill.py run one step of each kernel for it). Where the filter matched several
launches (FA4 runs twice: its first call compiles), the CSV holds one table each; the last is read.

  python3 bench/ncu_stalls.py source.csv [CHUNK=64]
"""
import collections
import csv
import sys


def source_tables(path):
    """Each launch's table in a source-page CSV, in order: (column index by name, rows)."""
    rows = list(csv.reader(open(path)))
    heads = [i for i, r in enumerate(rows) if r and r[0] == "Address"]
    if not heads:
        sys.exit(f"{path}: no source table (no kernel matched, or ncu failed: see the file)")
    tables = []
    for j, h in enumerate(heads):
        end = heads[j + 1] if j + 1 < len(heads) else len(rows)
        col = {n: i for i, n in enumerate(rows[h])}
        tables.append((col, [r for r in rows[h + 1:end] if len(r) == len(col)]))
    return tables


def stall_columns(col):
    """The stall-reason columns of a source table (all samples; not the "(Not Issued)" ones)."""
    return [n for n in col if n.startswith("stall_") and "(Not" not in n]


def main(path, chunk):
    col, data = source_tables(path)[-1]
    samples = col["Warp Stall Sampling (All Samples)"]
    executed = col["Instructions Executed"]
    reasons = stall_columns(col)
    count = lambda r, c: int(r[c] or 0)
    total = sum(count(r, samples) for r in data) or 1
    by_reason = collections.Counter({n: sum(count(r, col[n]) for r in data) for n in reasons})
    print(f"{total} samples over {len(data)} instructions, "
          f"{sum(count(r, executed) for r in data)} warp-instructions executed")
    print(" ".join(f"{k[6:]}={v * 100 / total:.1f}%" for k, v in by_reason.most_common(9)))
    # Code run by one thread of its warp (mostly a producer's elected thread, whose waits are not
    # the consumers'; also consumers' single-lane arrives and store issues) apart from whole warps'.
    threads = col["Avg. Threads Executed"]
    for name, part in (("one-thread", [r for r in data if float(r[threads] or 0) <= 1.5]),
                       ("warp", [r for r in data if float(r[threads] or 0) > 1.5])):
        n = sum(count(r, samples) for r in part) or 1
        why = collections.Counter({k: sum(count(r, col[k]) for r in part) for k in reasons})
        print(f"  {name} code: {n * 100 / total:.0f}% of the samples, {sum(count(r, executed) for r in part)} "
              "warp-instructions executed; " + " ".join(f"{k[6:]}={v * 100 / n:.0f}%" for k, v in why.most_common(6)))
    for start in range(0, len(data), chunk):
        part = data[start:start + chunk]
        n = sum(count(r, samples) for r in part)
        if n * 100 / total < 1.0:
            continue
        top = max(part, key=lambda r: count(r, samples))
        why = collections.Counter({k: sum(count(r, col[k]) for r in part) for k in reasons})
        print(f"[{start:5d}] {n * 100 / total:5.1f}%  top: {top[1].strip()[:48]:48s} {count(top, samples):4d}  "
              + " ".join(f"{k[6:]}={v}" for k, v in why.most_common(3)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 64)
