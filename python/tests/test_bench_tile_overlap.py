"""bench/tile_overlap.py on made-up tile stamps: two consumers whose softmaxes of length L start
50 cycles apart in a 100-cycle period overlap by 2 (L - 50) cycles a tile (the other's same tile
and its previous one), so over blocks of L = 60, 70, 80 the fit is L = 50 + 0.5 x overlap; a
block with one consumer counts in the "alone" row only, the item's first tile (not stamped) and
tiles far apart for nothing."""
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
PERIOD, K_TO_S, OFFSET, TILES = 100, 20, 50, 40


def stamps(length, offset):
    row = [0, 0, 0]  # the item's first tile: no stamps
    for i in range(1, TILES):
        k = 10_000 + i * PERIOD + offset
        row += [k, k + K_TO_S, k + K_TO_S + length]
    return row


def test_tile_overlap_made_up(tmp_path):
    path = tmp_path / "trace-tiles.csv"
    lines = ["block,consumer,stamps"]
    for block, length in enumerate((60, 70, 80)):
        for consumer in (0, 1):
            lines.append(",".join(map(str, [block, consumer] + stamps(length, consumer * OFFSET))))
    lines.append(",".join(map(str, [3, 0] + stamps(90, 0))))  # one consumer: the "alone" row
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, str(REPO / "bench/tile_overlap.py"), str(path)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in out[2:-1]}
    # tiles 2 .. TILES - 2 of 2 consumers in 3 blocks; medians over L = 60, 70, 80: 70 and 40
    count = 3 * 2 * (TILES - 3)
    assert rows["all"] == [str(count), str(PERIOD), str(K_TO_S), "70", "40", str(OFFSET)]
    assert rows["2-3"][0] == str(3 * 2 * 2)
    assert rows["c0"] == [str(count // 2), str(PERIOD), str(K_TO_S), "70", "40", str(OFFSET)]
    assert rows["c1"] == [str(count // 2), str(PERIOD), str(K_TO_S), "70", "40", "-"]
    assert "c2" not in rows
    assert rows["alone"] == [str(TILES - 3), str(PERIOD), str(K_TO_S), "90", "0", "-"]
    assert out[-1] == f"softmax = 50 + 0.500 x overlap (least squares over {count} tiles)"
