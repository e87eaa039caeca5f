"""bench/record_summary.py: flashbuf's speed over an anchor's is > 1 where flashbuf is faster, for
rates (TFLOP/s) and for times (the decode grid's µs, the CPU benchmark's ms) alike, and a
summary row says so."""
import json

import pytest

import bench_scripts


def load_summary():
    return bench_scripts.load("record_summary")


@pytest.mark.parametrize("unit, ours, theirs, expected", [
    ("TFLOP/s", 600.0, 500.0, 1.2),  # a rate: more is faster
    ("us", 5.0, 10.0, 2.0),          # times: less is faster
    ("ms", 50.0, 40.0, 0.8),
    ("s", 2.0, 3.0, 1.5),
])
def test_speed_ratio_by_unit(unit, ours, theirs, expected):
    summary = load_summary()
    row = {"unit": unit, "flashbuf": ours, "sdpa_cpu": theirs}
    assert summary.speed_ratio(row, "sdpa_cpu") == pytest.approx(expected)


def test_speed_ratio_needs_both_positive_numbers():
    summary = load_summary()
    assert summary.speed_ratio({"unit": "ms", "flashbuf": 1.0, "fa4": None}, "fa4") is None
    assert summary.speed_ratio({"unit": "ms", "flashbuf": 0.0, "fa4": 2.0}, "fa4") is None


def test_a_cpu_file_of_record_reads_as_flashbuf_ahead(tmp_path, monkeypatch):
    summary = load_summary()
    rows = [{"unit": "ms", "flashbuf": 10.0, "sdpa_cpu": 20.0}, {"unit": "ms", "flashbuf": 30.0, "sdpa_cpu": 33.0}]
    (tmp_path / "cpu.json").write_text(json.dumps({"meta": {}, "rows": rows}))
    monkeypatch.setattr(summary, "RESULTS", tmp_path)
    cells = summary.summarise("cpu", {"file": "cpu.json", "commit": "0123456789", "command": "x"})
    assert cells[4] == "sdpa_cpu 1.10-2.00x (geomean 1.48, 2 rows)"
    assert cells[5] == "2.00x sdpa_cpu at best"
