"""bench/ab_interleaved.py's protocol, against a stand-in for `bench.py --serve`: every build
times every point once a round, in alternating order, on the seed of that point and round, and
the results land in bench.py's schema under the build's name."""
import importlib
import io
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# Answers like bench.py --serve; logs each request (build, point, seed) to a shared file.
SERVER = r'''
import json, os, sys
build = os.environ["PYTHONPATH"].split(os.pathsep)[0]
log = open(os.environ["AB_TEST_LOG"], "a")
say = lambda o: (sys.stdout.write(json.dumps(o) + "\n"), sys.stdout.flush())
say({"points": 3})
for line in sys.stdin:
    w = line.split()
    if w == ["meta"]:
        say({"gpu": "stand-in", "commit": os.environ.get("FLASHBUF_COMMIT"), "failures": []})
        continue
    point, seed = int(w[0]), int(w[1])
    log.write(f"{os.path.basename(build)} {point} {seed}\n")
    log.flush()
    fails = point == 2 and build.endswith("b")
    rows = [] if fails else [{"kind": "prefill", "d": 64, "sq": point, "causal": False, "unit": "TFLOP/s",
                              "flashbuf": float(seed % 97)}]
    say({"point": point, "rows": rows, "error": "boom" if fails else None})
'''


def test_interleaved_rounds_alternate_and_share_seeds(tmp_path):
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    log = tmp_path / "requests.log"
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ab_interleaved.py"), "--out", str(out), "--rounds", "2",
         "--server", str(server), f"a={tmp_path / 'a'}:abc1234", f"b={tmp_path / 'b'}", "--", "--prefill"],
        capture_output=True, text=True, env={"AB_TEST_LOG": str(log), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert run.returncode == 0, run.stderr
    requests = [line.split() for line in log.read_text().splitlines()]
    # 2 rounds x 3 points x 2 builds; point p of round r is timed a-then-b when p + r is even.
    assert len(requests) == 12
    for i in range(0, 12, 2):
        (first, p1, s1), (second, p2, s2) = requests[i], requests[i + 1]
        r, p = divmod(i // 2, 3)
        assert (int(p1), int(p2)) == (p, p) and s1 == s2
        assert (first, second) == (("a", "b") if (p + r) % 2 == 0 else ("b", "a"))
    seeds = {(int(p), s) for _, p, s in requests}
    assert len(seeds) == 6  # a seed per point and round
    a1 = json.loads((out / "a.json").read_text())
    a2 = json.loads((out / "a-r2.json").read_text())
    b1 = json.loads((out / "b.json").read_text())
    assert a1["meta"]["commit"] == "abc1234" and a1["meta"]["interleaved_with"] == ["b"]
    assert [row["sq"] for row in a1["rows"]] == [0, 1, 2] and len(a2["rows"]) == 3
    assert [row["sq"] for row in b1["rows"]] == [0, 1]  # b's point 2 failed in each round
    assert "b: 2 rows a round, 2 point timing(s) failed" in run.stdout
    assert a1["rows"][0]["flashbuf"] == b1["rows"][0]["flashbuf"]  # the same seed for both builds


def test_a_run_cut_short_keeps_its_finished_rounds(tmp_path):
    """Each round's files are written as the round ends: a server that dies in round 2 (as
    under a call's time limit) leaves round 1's results of every build."""
    server = tmp_path / "server.py"
    server.write_text("import json, sys\n"
                      "print(json.dumps({'points': 2}), flush=True)\n"
                      "for line in sys.stdin:\n"
                      "    w = line.split()\n"
                      "    if w == ['meta']:\n"
                      "        print(json.dumps({'failures': []}), flush=True); continue\n"
                      "    if int(w[1]) % 1_000_003 != 0:\n"
                      "        sys.exit(1)  # round 2: its seeds are point seeds + 1\n"
                      "    print(json.dumps({'point': int(w[0]), 'rows': [{'flashbuf': 1.0}], 'error': None}), flush=True)\n")
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ab_interleaved.py"), "--out", str(out), "--rounds", "3",
         "--server", str(server), f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}", "--", "--decode"],
        capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    for build in "ab":
        assert len(json.loads((out / f"{build}.json").read_text())["rows"]) == 2
        assert not (out / f"{build}-r2.json").exists()


def test_builds_must_list_the_same_points(tmp_path):
    # Each build's package goes first on a PYTHONPATH that may already hold other entries (the
    # GPU machine's FA4 site): the stand-in server tells the builds apart by the first entry.
    server = tmp_path / "server.py"
    server.write_text("import json, os, sys\n"
                      "n = 3 if os.environ['PYTHONPATH'].split(os.pathsep)[0].endswith('a') else 4\n"
                      "print(json.dumps({'points': n}), flush=True)\n"
                      "sys.stdin.read()\n")
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ab_interleaved.py"), "--out", str(tmp_path / "out"),
         "--server", str(server), f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}", "--", "--decode"],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")))
    assert run.returncode != 0
    assert "different numbers of points" in run.stderr


def test_bench_serve_answers_points_on_stdout_alone(monkeypatch, capsys, tmp_path):
    """bench.py --serve itself, with its timing functions stood in for (no GPU needed): the
    first line says how many points, each request gets its point's rows, "meta" the run's meta,
    and nothing else the run prints (its notes, the failure lines) reaches stdout."""
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    bench = importlib.import_module("bench")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 0)
    seen = []

    def decode(hq, hkv, b, skv, pages, args):
        seen.append((skv, float(torch.rand(1))))
        return [{"kind": "decode", "b": b, "hq": hq, "sk": skv, "page": page, "unit": "us", "flashbuf": 1.0}
                for page in pages]

    monkeypatch.setattr(bench, "bench_decode_shape", decode)
    monkeypatch.setattr(bench, "flashbuf", types.SimpleNamespace(cuda_available=lambda: True, build_info=lambda: {}))
    monkeypatch.setattr(bench, "gpu_meta", lambda: {"gpu": "stand-in"})
    monkeypatch.setattr(bench, "l2_bytes", lambda: 0)
    monkeypatch.setattr(bench, "fa4_version", lambda: None)
    monkeypatch.setattr(bench, "note_failure", lambda what, err: print("  !", what))  # as the real one, to stdout
    monkeypatch.setattr(sys, "stdin", io.StringIO("1 5\n0 5\n1 5\nmeta\n"))
    rc = bench.main(["--decode", "--heads", "32/8", "--b", "1", "--kv", "512,2048", "--pages", "0,16",
                     "--anchors", "none", "--serve"])
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rc == 0
    assert answers[0] == {"points": 2}
    assert [a["point"] for a in answers[1:4]] == [1, 0, 1]
    assert [r["sk"] for r in answers[1]["rows"]] == [2048, 2048] and answers[1]["error"] is None
    assert answers[4]["gpu"] == "stand-in" and "commit" in answers[4]
    assert seen[0] == seen[2]  # the same seed, the same inputs


@pytest.mark.parametrize("serve", [True, False], ids=["serve", "run"])
@pytest.mark.parametrize("package", [None, types.SimpleNamespace(cuda_available=lambda: False)],
                         ids=["import-failed", "no-cuda-kernels"])
def test_bench_refuses_a_build_that_cannot_time_flashbuf(monkeypatch, capsys, package, serve):
    """A server (or a run of a grid) whose flashbuf did not import, or has no CUDA kernels,
    would time the anchors alone and give flashbuf null cells, an A/B or a file of record that
    measures nothing: it stops before its first point instead (a run may ask for the anchors
    alone with --anchors-only)."""
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    bench = importlib.import_module("bench")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "flashbuf", package)
    timed = []
    monkeypatch.setattr(bench, "bench_decode_shape", lambda *a: timed.append(a) or [])
    monkeypatch.setattr(sys, "stdin", io.StringIO("0 5\n"))
    rc = bench.main(["--decode", "--heads", "32/8", "--b", "1", "--kv", "512", "--pages", "0",
                     "--anchors", "none"] + (["--serve"] if serve else []))
    captured = capsys.readouterr()
    assert rc == 2
    assert timed == []
    assert "{" not in captured.out  # no {"points": n}: ab_interleaved.py reports the server's end
    assert "flashbuf cannot run here" in captured.err


def test_one_package_under_two_tunings(tmp_path):
    """--tuning NAME:VARIABLE=VALUE: the same package listed twice is an A/B of a choice the
    library makes; only the named build's server sees the variable, and a value this process
    inherited reaches neither (the other build keeps the library's own choice)."""
    server = tmp_path / "server.py"
    server.write_text("import json, os, sys\n"
                      "grid = os.environ.get('FLASHBUF_PREFILL_GRID', 'auto')\n"
                      "print(json.dumps({'points': 1}), flush=True)\n"
                      "for line in sys.stdin:\n"
                      "    if line.split() == ['meta']:\n"
                      "        print(json.dumps({'failures': []}), flush=True); continue\n"
                      "    print(json.dumps({'point': 0, 'rows': [{'grid': grid, 'flashbuf': 1.0}], 'error': None}),"
                      " flush=True)\n")
    pkg = tmp_path / "pkg"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ab_interleaved.py"), "--out", str(tmp_path / "out"), "--rounds", "1",
         "--server", str(server), "--tuning", "off:FLASHBUF_PREFILL_GRID=off", f"auto={pkg}", f"off={pkg}",
         "--", "--prefill"],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, FLASHBUF_PREFILL_GRID="on"))
    assert run.returncode == 0, run.stderr
    for name in ("auto", "off"):
        rows = json.loads((tmp_path / "out" / f"{name}.json").read_text())["rows"]
        assert [row["grid"] for row in rows] == [name]


@pytest.mark.parametrize("tuning, builds, message", [
    ([], ["a=/p", "b=/p"], "same package under the same tuning"),
    (["c:FLASHBUF_PREFILL_GRID=off"], ["a=/p", "b=/p"], "no build named 'c'"),
    (["b:PREFILL_GRID=off"], ["a=/p", "b=/p"], "expected NAME:FLASHBUF_VARIABLE=VALUE"),
    (["b:FLASHBUF_PREFILL_GRID="], ["a=/p", "b=/p"], "expected NAME:FLASHBUF_VARIABLE=VALUE"),
])
def test_tunings_that_cannot_be_told_apart_are_refused(tmp_path, tuning, builds, message):
    args = [a for t in tuning for a in ("--tuning", t)]
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ab_interleaved.py"), "--out", str(tmp_path / "out"), *args, *builds,
         "--", "--prefill"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert message in run.stderr
    assert not (tmp_path / "out").exists()  # refused before any server started
