"""bench/trace_variants.py on the CPU, with stand-ins for nvcc and the GPU runs: each variant's
median TFLOP/s and its ratio to the first, and with --tiles a -DTRACE_TILES build of every
variant, run once, whose stamps bench/tile_overlap.py tabulates (a CSV the build did not write is
named as such)."""
import pathlib
import stat
import sys

import pytest

import bench_scripts
POINT = "D=128 Dv=128 causal=0 S= 8192 section= 0"

# A stand-in for a -DTRACE_TILES build: two consumers, 100-cycle tiles, softmaxes of 60 cycles
# 50 apart (tile_overlap.py's own test: overlap 20 a tile), into OUTDIR's D 128 CSV only.
TILES_SCRIPT = """import sys
row = lambda c: [0, 0, 0] + [x for i in range(1, 40) for x in (10000 + 100 * i + 50 * c, 10020 + 100 * i + 50 * c, 10080 + 100 * i + 50 * c)]
with open(sys.argv[1] + "/trace-d128-s8192-c0-sec0-tiles.csv", "w") as f:
    f.write("block,consumer,stamps\\n")
    for c in (0, 1):
        f.write(",".join(map(str, [0, c] + row(c))) + "\\n")
"""


def load_trace_variants():
    return bench_scripts.load("trace_variants", with_siblings=True)


@pytest.mark.parametrize("keep", [False, True])
def test_trace_variants_ratios_and_tiles(tmp_path, monkeypatch, capsys, keep):
    tv = load_trace_variants()
    built = {}

    def build(outdir, name, flags):
        built[name] = flags
        exe = pathlib.Path(outdir) / f"trace-{name}"
        exe.write_text(f"#!{sys.executable}\n" + (TILES_SCRIPT if "-DTRACE_TILES" in flags else ""))
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
        return str(exe)

    speed = {"base": [600.0, 610.0, 590.0], "fast": [660.0, 671.0, 649.0]}  # medians 600 and 660
    monkeypatch.setattr(tv, "build", build)
    monkeypatch.setattr(tv, "run", lambda outdir, name, exe, rnd: ({POINT: speed[name][rnd - 1]}, []))
    monkeypatch.setattr(sys, "argv", ["trace_variants.py", str(tmp_path), "base=", "fast=-DFAST", "--rounds", "3",
                                      "--tiles"] + (["--keep-stamps"] if keep else []))
    tv.main()
    out = capsys.readouterr().out.splitlines()

    assert built == {"base": "", "fast": "-DFAST", "base+tiles": " -DTRACE_TILES", "fast+tiles": "-DFAST -DTRACE_TILES"}
    row = next(line for line in out if line.startswith(POINT)).split()
    assert row[-4:] == ["600.0", "1.000", "660.0", "1.100"]
    for name in ("base", "fast"):
        at = out.index(f"== {name}: per-tile stamps")
        assert out[at + 1].endswith("trace-d128-s8192-c0-sec0-tiles.csv")
        table = {line.split()[0]: line.split()[1:] for line in out[at + 3:at + 8]}
        # 2 consumers x steady tiles 2 .. 38; period, K -> S, softmax, overlap (2 x (60 - 50): the
        # other's same tile and its neighbour), consumer 1's offset
        assert table["all"] == ["74", "100", "20", "60", "20", "50"]
        assert any(line.endswith("trace-d64-s8192-c0-sec0-tiles.csv: not written") for line in out[at:])
        # tabulated, then removed unless --keep-stamps
        assert (tmp_path / f"tiles-{name}" / "trace-d128-s8192-c0-sec0-tiles.csv").exists() == keep
