"""An A/B folder that scripts/gpu_ab.sh wrote (NAME.json, NAME-r<r>.json per tree), each tree
against a base: per point, the geometric mean over rounds of the speed ratio.

    python3 bench/ab_summary.py DIR BASE TREE...          the summary: the points' geometric
        mean, min and max, by head dim (decode: by batch and page), and the four lowest points
        with their per-round ratios
    python3 bench/ab_summary.py --table DIR BASE TREE...  every point, and each build against
        cuDNN (round 1): the table scripts/gpu_ab.sh prints last
"""
import collections
import glob
import json
import math
import os
import sys

KEY = ("kind", "d", "sq", "causal", "b", "hq", "sk", "page")  # what makes two rows the same point


def rounds(folder, name):
    """Every round's rows of one tree, round 1 first ([] where it has none)."""
    files = [os.path.join(folder, name + ".json")]
    files += sorted(glob.glob(os.path.join(folder, name + "-r*.json")), key=lambda f: int(f.rsplit("-r", 1)[1][:-5]))
    return [json.load(open(f))["rows"] for f in files if os.path.exists(f)]


def speed(row):
    return row["flashbuf"] if row["unit"] == "TFLOP/s" else 1.0 / row["flashbuf"]


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def points(base_rounds, tree_rounds, tree):
    """(base row, per-round ratios) for each point of the base's first round, over the rounds
    both trees have; a round that lacks a flashbuf time has None."""
    n = min(len(base_rounds), len(tree_rounds))
    out = []
    for i, row in enumerate(base_rounds[0]):
        pairs = [(tree_rounds[r][i], base_rounds[r][i]) for r in range(n)]
        if not all(all(x.get(k) == row.get(k) for k in KEY) for pair in pairs for x in pair):
            sys.exit(f"{tree}: its rows are not the base's (different arguments?)")
        out.append((row, [speed(t) / speed(b) if t.get("flashbuf") and b.get("flashbuf") else None for t, b in pairs]))
    return out, n


def describe(row, keys):
    return " ".join(f"{k}={row[k]}" for k in keys if k in row)


def summary(base, tree, pts, n):
    pts = [(geomean(r), row, r) for row, ratios in pts for r in [[x for x in ratios if x is not None]] if r]
    groups = collections.defaultdict(list)
    for g, row, _ in pts:
        groups[(row.get("b"), row.get("page")) if row.get("kind") == "decode" else row.get("d")].append(g)
    values = [p[0] for p in pts]
    print(f"{tree}/{base}: {n} rounds, {len(pts)} points, geomean {geomean(values):.3f}, "
          f"min {min(values):.3f}, max {max(values):.3f}")
    print("   by group: " + ", ".join(f"{k}: {geomean(v):.3f}" for k, v in sorted(groups.items(), key=str)))
    for g, row, ratios in sorted(pts, key=lambda p: p[0])[:4]:
        where = describe(row, ("case", "d", "sq", "sk", "causal", "b", "hq", "hkv", "page"))
        print(f"   low {g:.3f}  {where}  (" + " ".join(f"{x:.3f}" for x in ratios) + ")")


def table(base, tree, pts, n, tree_first_round):
    print(f"\n{tree} / {base} (flashbuf speed; > 1: {tree} faster{', geometric mean of the rounds' if n > 1 else ''}),"
          " and each vs cudnn (round 1):")
    for (row, ratios), first in zip(pts, tree_first_round):
        key = describe(row, ("d", "sq", "causal", "b", "hq", "sk", "page"))
        if None in ratios:
            print(f"  {key}: missing in a round")
            continue
        per_round = "  (" + " ".join(f"{q:.2f}" for q in ratios) + ")" if n > 1 else ""
        # Speed against the base's cuDNN time of the same point (the anchors ran with the base).
        vs = (lambda r: speed(r) * (row["cudnn"] if row["unit"] != "TFLOP/s" else 1.0 / row["cudnn"])
              if row.get("cudnn") else float("nan"))
        print(f"  {key:45s} {geomean(ratios):5.2f}   {vs(row):5.2f} -> {vs(first):5.2f}{per_round}")


def main(argv):
    as_table = argv[:1] == ["--table"]
    argv = argv[1:] if as_table else argv
    if len(argv) < 3:
        sys.exit(__doc__)
    folder, base, trees = argv[0], argv[1], argv[2:]
    base_rounds = rounds(folder, base)
    if not base_rounds:
        print(f"{base}: no results (every round)")
        return
    for tree in trees:
        tree_rounds = rounds(folder, tree)
        if not tree_rounds:
            print(f"{tree}: no results (every round)")
            continue
        pts, n = points(base_rounds, tree_rounds, tree)
        if as_table:
            table(base, tree, pts, n, tree_rounds[0])
        else:
            summary(base, tree, pts, n)


if __name__ == "__main__":
    main(sys.argv[1:])
