"""Summary of an A/B folder that scripts/gpu_ab.sh wrote (NAME.json, NAME-r<r>.json per tree):
for each tree against a base, the geometric mean over rounds of each point's speed ratio, then
their geometric mean, min and max over the points, by head dim (decode: by batch and page), and
the four lowest points with their per-round ratios.

    python3 bench/ab_summary.py DIR BASE TREE...
"""
import collections
import glob
import json
import math
import os
import sys


def rounds(folder, name):
    files = [os.path.join(folder, name + ".json")]
    files += sorted(glob.glob(os.path.join(folder, name + "-r*.json")), key=lambda f: int(f.rsplit("-r", 1)[1][:-5]))
    return [json.load(open(f))["rows"] for f in files if os.path.exists(f)]


def speed(row):
    return row["flashbuf"] if row["unit"] == "TFLOP/s" else 1.0 / row["flashbuf"]


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    folder, base, trees = argv[0], argv[1], argv[2:]
    base_rounds = rounds(folder, base)
    for tree in trees:
        tree_rounds = rounds(folder, tree)
        n = min(len(base_rounds), len(tree_rounds))
        points, groups = [], collections.defaultdict(list)
        for i, row in enumerate(base_rounds[0]):
            ratios = [speed(tree_rounds[r][i]) / speed(base_rounds[r][i]) for r in range(n)
                      if tree_rounds[r][i].get("flashbuf") and base_rounds[r][i].get("flashbuf")]
            if not ratios:
                continue
            g = geomean(ratios)
            points.append((g, row, ratios))
            groups[(row.get("b"), row.get("page")) if row.get("kind") == "decode" else row.get("d")].append(g)
        values = [p[0] for p in points]
        print(f"{tree}/{base}: {n} rounds, {len(points)} points, geomean {geomean(values):.3f}, "
              f"min {min(values):.3f}, max {max(values):.3f}")
        print("   by group: " + ", ".join(f"{k}: {geomean(v):.3f}" for k, v in sorted(groups.items(), key=str)))
        for g, row, ratios in sorted(points, key=lambda p: p[0])[:4]:
            where = " ".join(f"{k}={row[k]}" for k in ("case", "d", "sq", "sk", "causal", "b", "hq", "hkv", "page") if k in row)
            print(f"   low {g:.3f}  {where}  (" + " ".join(f"{x:.3f}" for x in ratios) + ")")


if __name__ == "__main__":
    main(sys.argv[1:])
