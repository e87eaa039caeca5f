"""bench/ncu_phases.py on a made-up Nsight Compute source page: it finds the steady loop (the
innermost executed loop with wgmma and exponentials, not the enclosing one nor a never-taken
retry branch), cuts it at its landmarks in order, and turns each part's samples into cycles of
the given period and its executions into counts per warp-tile."""
import csv
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
TILES = 10  # executions of the loop's back branch: warp-tiles


def source_page(path):
    """A kernel whose steady loop (addresses 0x100-0x1b0) sits inside an outer loop, with a
    never-executed retry branch backwards, and an instruction after the loop."""
    rows = []

    def add(addr, text, samples, executed, stalls):
        rows.append([hex(addr), text, samples, executed, stalls])

    add(0x000, "MOV R1, c[0x0][0x28]", 0, 1, 0)
    add(0x100, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4+0x10], R2", 10, TILES, 5)  # loop top, K wait
    add(0x110, "BAR.SYNC.DEFER_BLOCKING R3, 0x100", 20, TILES, 20)
    add(0x120, "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT", 30, TILES, 30)
    add(0x130, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR5+0x30], R2", 40, TILES, 40)
    add(0x140, "HGMMA.64x128x16.F32.BF16 R88, R152, gdesc[UR8].tnspB, R88", 50, TILES, 50)
    add(0x150, "BAR.ARV R0, 0x100", 0, TILES, 0)
    add(0x160, "WARPGROUP.DEPBAR.LE gsb0, 0x1", 60, TILES, 60)
    add(0x170, "FMNMX R10, R24, R25, !PT", 70, 2 * TILES, 0)
    add(0x180, "WARPGROUP.DEPBAR.LE gsb0, 0x0", 80, TILES, 80)
    add(0x190, "MUFU.EX2 R24, R24", 90, 3 * TILES, 0)
    add(0x1a0, "@!P0 BRA 0x100", 0, 0, 0)  # a retry that never ran: not the loop's end
    add(0x1b0, "@P1 BRA 0x100", 50, TILES, 0)  # the back branch
    add(0x1c0, "@P2 BRA 0x000", 0, 1, 0)  # the enclosing loop
    add(0x1d0, "EXIT", 0, 1, 0)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "made_up_kernel"])
        w.writerow(["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
                    "stall_wait", "stall_wait (Not Issued)"])
        for addr, text, samples, executed, stalls in rows:
            w.writerow([addr, text, samples, executed, stalls, 0])


def test_parts_of_the_steady_loop(tmp_path):
    page = tmp_path / "source.csv"
    source_page(page)
    period = 500.0  # the loop's 500 samples become 500 cycles: one per sample
    out = subprocess.run([sys.executable, str(REPO / "bench" / "ncu_phases.py"), str(page), str(period)],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == f"loop of 12 instructions, 500 samples, {TILES} warp-tiles"
    parts = {}
    for line in lines[2:-1]:
        name, rest = line[:30].strip(), line[30:].split()
        parts[name] = (int(rest[0]), float(rest[1]), int(rest[2]))  # instructions, exec/tile, cycles
    assert list(parts) == ["loop top, K wait", "turn (BAR.SYNC)", "S issue", "V wait", "P V issue",
                           "turn passed", "S wait", "softmax before the P V wait", "P V wait",
                           "after the P V wait"]
    assert parts["loop top, K wait"] == (1, 1.0, 10)
    assert parts["V wait"] == (1, 1.0, 40)
    assert parts["softmax before the P V wait"] == (1, 2.0, 70)
    assert parts["P V wait"] == (1, 1.0, 80)
    # the exponential, the retry branch that never ran and the back branch
    assert parts["after the P V wait"] == (3, 4.0, 140)
    assert lines[-1].split()[-2:] == ["14.0", "500"]  # executions a warp-tile in all, and the period


def test_instruction_listing(tmp_path):
    page = tmp_path / "source.csv"
    source_page(page)
    out = subprocess.run([sys.executable, str(REPO / "bench" / "ncu_phases.py"), str(page), "500", "--instructions"],
                         capture_output=True, text=True, check=True).stdout
    listing = out.split("\n\n", 1)[1].splitlines()[1:]
    rows = {int(line.split()[0]): line for line in listing}
    assert sorted(rows) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11]  # the loop's executed instructions; not the retry
    fields = rows[7].split()
    assert fields[1:3] == ["2.00", "70.0"] and "FMNMX" in rows[7]  # executions a warp-tile, cycles
    assert rows[8].rstrip().endswith("wait 100%")
