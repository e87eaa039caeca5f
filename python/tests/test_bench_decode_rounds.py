"""bench/bench.py's decode grid on the CPU, with stand-ins for the GPU parts (graph timing, the
library's DecodePlan, an anchor): every implementation on every page size is checked on the
rotated sets and timed --rounds times, each round from a different entry; each page's calls
run its own plan (a paged plan with its page table, the contiguous one without); each row takes
the median of its entry's rounds, and the anchors' times repeat on every page's row."""
import argparse
import statistics

import pytest

import bench_scripts

torch = pytest.importorskip("torch")


def load_bench():
    return bench_scripts.load("bench")


class StubPlan:
    """flashbuf.DecodePlan's call shape; run() refuses a cache of the other layout, so calls bound
    to the wrong page's plan fail."""

    def __init__(self, log, attention, b, q_per_seq, hq, hkv, d, dv, skv, page, dtype=None, device=None):
        self.log, self.attention, self.page = log, attention, page
        # a made-up plan per layout, which the rows must report: 4 splits in clusters contiguous,
        # 2 through a workspace paged
        self.num_splits, self.workspace_bytes = (2, 4096) if page else (4, 0)

    def run(self, q, k, v, seqlens, table):
        assert (table is None) == (self.page == 0), f"page {self.page} plan given the other layout"
        self.log.append(("flashbuf", self.page))
        if table is not None:  # the pool back in sequence order
            b, per_seq = table.shape
            k = k[table.long().flatten()].reshape(b, per_seq * k.shape[1], *k.shape[2:])
            v = v[table.long().flatten()].reshape(b, per_seq * v.shape[1], *v.shape[2:])
        return self.attention(q, k, v).to(q.dtype)


def test_decode_rows_time_every_entry_each_round(monkeypatch):
    bench = load_bench()
    log = []

    def attention(q, k, v):  # the harness's own float32 reference of the one query row
        return bench.reference_rows(q, k, v, torch.arange(1), causal=False)
    stub = argparse.Namespace(DecodePlan=lambda *a, **kw: StubPlan(log, attention, *a, **kw))
    monkeypatch.setattr(bench, "DEV", torch.device("cpu"))
    monkeypatch.setattr(bench, "flashbuf", stub)
    monkeypatch.setattr(bench, "rotation_sets", lambda *a, **kw: 2)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **kw: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda *a, **kw: None)

    def anchor_fn(name, causal):
        def run(q, k, v):
            log.append((name, None))
            return attention(q, k, v).to(q.dtype)
        return run
    monkeypatch.setattr(bench, "anchor_fn", anchor_fn)

    timed = []  # each graph_time_us call: which entry, from what its calls logged

    def graph_time_us(calls, iters, target_ms):
        start = len(log)
        for fn in calls:
            fn()
        entries = set(log[start:])
        assert len(entries) == 1 and len(log) - start == 2, "one entry's calls, over both sets"
        timed.append(entries.pop())
        return float(len(timed))  # a distinct time per measurement
    monkeypatch.setattr(bench, "graph_time_us", graph_time_us)

    args = argparse.Namespace(rounds=3, iters=7, target_ms=1.0, anchors=["cudnn"], sinks="off")
    rows = bench.bench_decode_shape(4, 2, 2, 64, (0, 16), args)

    entries = [("cudnn", None), ("flashbuf", 0), ("flashbuf", 16)]
    assert timed == entries + entries[1:] + entries[:1] + entries[2:] + entries[:2]  # rotated rounds
    assert bench.failures == []
    times = {e: statistics.median(float(i + 1) for i, t in enumerate(timed) if t == e) for e in entries}
    assert [r["page"] for r in rows] == [0, 16]
    for row in rows:
        assert row["flashbuf"] == times[("flashbuf", row["page"])]
        assert row["cudnn"] == times[("cudnn", None)]
        assert row["max_abs_err"] < 1e-2 and row["kernel"] == "decode"
        assert (row["splits"], row["merge"]) == ((2, "workspace") if row["page"] else (4, "cluster"))
