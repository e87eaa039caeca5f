#!/usr/bin/env python3
"""A/B of builds, point by point: every build's timing of a point follows the others' within
seconds, instead of whole grids minutes apart.

scripts/gpu_ab.sh times each build's whole grid in its own process, one after another, so a
point's builds are timed minutes apart and the GPU's clocks and temperature drift between
them (bench/NOTES-prefill.md, "The grids of record in three rounds"). Here one
`bench.py --serve` process per build stays up; for each point and round the builds time it
back to back, in an order that alternates (A B, then B A), on the same tensors (one seed per
point and round).

    python3 bench/ab_interleaved.py --out DIR --rounds 3 base=/tmp/pkg-base main=/tmp/pkg-main \\
        -- --prefill --backend sm90 --target-ms 5 --anchors none

NAME=PACKAGE_DIR[:COMMIT] puts PACKAGE_DIR first on the server's PYTHONPATH and names its
results DIR/NAME.json (round 1) and DIR/NAME-r<r>.json (rounds 2 on), in bench.py's schema:
the files scripts/gpu_ab.sh writes and tabulates, each written as its round ends. The arguments
after `--` are bench.py's.

One package under two of the library's tuning overrides (bench.py's TUNING_VARIABLES) is an A/B
of a choice the library makes, timed the same way: list it twice and give one name the variable,

    python3 bench/ab_interleaved.py --out DIR --tuning per-block:FLASHBUF_PREFILL_GRID=off \
        auto=/tmp/pkg per-block=/tmp/pkg -- --prefill --d 128 --target-ms 5 --anchors none
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Server:
    """One build's bench.py --serve process."""

    def __init__(self, server: str, name: str, package: str, commit: str, bench_args: list[str], log,
                 tuning: dict[str, str], compared: set[str]):
        # The variables an A/B compares are the server's own: none comes from this environment.
        env = {k: v for k, v in os.environ.items() if k not in compared}
        env.update(tuning)
        env["PYTHONPATH"] = package + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        if commit:
            env["FLASHBUF_COMMIT"] = commit
        self.name = name
        self.proc = subprocess.Popen([sys.executable, server, "--serve", *bench_args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                     env=env, cwd="/tmp" if os.path.isdir("/tmp") else None)
        self.points = self.answer()["points"]

    def answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name}: bench.py --serve ended (exit {self.proc.wait()}); see its log")
        return json.loads(line)

    def ask(self, request: str) -> dict:
        self.proc.stdin.write(request + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def parse_build(text: str) -> tuple[str, str, str]:
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=PACKAGE_DIR[:COMMIT]")
    package, _, commit = rest.partition(":")
    return name, package, commit


def parse_tuning(text: str) -> tuple[str, str, str]:
    name, sep, assignment = text.partition(":")
    variable, eq, value = assignment.partition("=")
    if not sep or not name or not eq or not value or not variable.startswith("FLASHBUF_"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:FLASHBUF_VARIABLE=VALUE")
    return name, variable, value


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    bench_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for NAME.json, NAME-r<r>.json and the servers' logs")
    p.add_argument("--rounds", type=int, default=3, help="times each point is timed per build (default 3)")
    p.add_argument("--server", default=os.path.join(HERE, "bench.py"), help="the timing server (default: bench.py)")
    p.add_argument("--tuning", action="append", default=[], type=parse_tuning, metavar="NAME:VARIABLE=VALUE",
                   help="start build NAME's server with this tuning override in its environment (repeatable)")
    p.add_argument("builds", nargs="+", type=parse_build, help="NAME=PACKAGE_DIR[:COMMIT], two or more")
    args = p.parse_args(own)
    if len(args.builds) < 2:
        p.error("two or more builds to compare")
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: must be >= 1")
    if len({b[0] for b in args.builds}) != len(args.builds):
        p.error("build names must differ")
    tuning = {b[0]: {} for b in args.builds}
    for name, variable, value in args.tuning:
        if name not in tuning:
            p.error(f"--tuning {name}:{variable}={value}: no build named {name!r}")
        tuning[name][variable] = value
    if len({(package, tuple(sorted(tuning[name].items()))) for name, package, _ in args.builds}) != len(args.builds):
        p.error("two builds would run the same package under the same tuning: give one of them --tuning")
    os.makedirs(args.out, exist_ok=True)

    servers = []
    try:
        for name, package, commit in args.builds:
            log = open(os.path.join(args.out, f"serve-{name}.log"), "w")
            servers.append(Server(args.server, name, package, commit, bench_args, log, tuning[name],
                                  {variable for _, variable, _ in args.tuning}))
        points = {s.points for s in servers}
        if len(points) != 1:
            sys.exit(f"the builds list different numbers of points: {[(s.name, s.points) for s in servers]}")
        n = points.pop()
        rows = {s.name: [[] for _ in range(args.rounds)] for s in servers}
        failed = {s.name: 0 for s in servers}
        command = "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__)] + argv)
        start = time.time()
        for r in range(args.rounds):
            for point in range(n):
                order = servers if (point + r) % 2 == 0 else servers[::-1]
                seed = 1_000_003 * (point + 1) + r
                for s in order:
                    answer = s.ask(f"{point} {seed}")
                    rows[s.name][r].extend(answer["rows"])
                    # A point fails when its task raised or a row of it has no flashbuf time.
                    failed[s.name] += answer.get("error") is not None or \
                        any(row.get("flashbuf") is None for row in answer["rows"])
            # Each round's files as it ends: a call cut short by its time limit keeps the rounds done.
            for s in servers:
                meta = s.ask("meta")  # its "failures" lists every failure so far
                meta.update({"command": command, "interleaved_with": [b[0] for b in args.builds if b[0] != s.name]})
                path = os.path.join(args.out, s.name + ("" if r == 0 else f"-r{r + 1}") + ".json")
                with open(path, "w") as f:
                    json.dump({"meta": meta, "rows": rows[s.name][r]}, f, indent=1)
            print(f"round {r + 1}: {n} points x {len(servers)} builds, {time.time() - start:.0f} s", flush=True)
        for s in servers:
            print(f"{s.name}: {len(rows[s.name][0])} rows a round, {failed[s.name]} point timing(s) failed")
    finally:
        for s in servers:
            s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
