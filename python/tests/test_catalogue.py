"""Every case of the invalid-input catalogue (catalogue.py, docs/errors.md) through every
entry point it applies to, each case in a subprocess of its own so that a crash fails the case
instead of the session: NumPy and torch CPU here, torch CUDA when a GPU is present (the GPU
machine runs scripts/gpu/reliability.sh)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import catalogue

HERE = pathlib.Path(__file__).resolve().parent
ERRORS_MD = HERE.parents[1] / "docs" / "errors.md"


def _cuda_available() -> bool:
    try:
        import torch

        import flashbuf

        return torch.cuda.is_available() and flashbuf.cuda_available()
    except ImportError:
        return False


DEVICES = ["cpu"] + (["cuda"] if _cuda_available() else [])


@pytest.fixture(scope="module")
def results():
    """Every case on every device: one runner per device, which forks a process per case."""
    done = {}
    for device in DEVICES:
        r = subprocess.run([sys.executable, "-X", "faulthandler", str(HERE / "catalogue.py"), device],
                           capture_output=True, text=True, timeout=3600, cwd=str(HERE))
        assert r.returncode == 0, f"the catalogue runner itself failed on {device}:\n{r.stderr[-4000:]}"
        for line in r.stdout.splitlines():
            report = json.loads(line)
            done[(report["case"], device)] = report
    return done


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("case_id", list(catalogue.CASES))
def test_case(results, case_id, device):
    if device not in DEVICES:
        pytest.skip("no CUDA device")
    case = catalogue.CASES[case_id]
    report = results[(case_id, device)]
    assert report["status"] == 0, f"{case_id} on {device}: the process died (exit status {report['status']})"
    reports = report["results"]
    for framework, report in reports.items():
        where = f"{case_id} [{framework}]"
        if case.error is None:
            assert report["raised"] is None, f"{where}: a valid input was refused: {report}"
            continue
        assert report["raised"] == case.error.__name__, f"{where}: expected {case.error.__name__}, got {report}"
        assert report["message"].startswith(case.arg + ":"), f"{where}: the message does not name {case.arg}: {report}"
        assert case.fragment in report["message"], f"{where}: expected '{case.fragment}' in: {report['message']}"


def test_docs_list_every_case_and_only_those():
    text = ERRORS_MD.read_text()
    documented = {line.split("|")[1].strip().strip("`") for line in text.splitlines()
                  if line.startswith("| `")}
    assert documented == set(catalogue.CASES), (
        f"docs/errors.md and catalogue.py differ: only in the docs {sorted(documented - set(catalogue.CASES))}, "
        f"only in the catalogue {sorted(set(catalogue.CASES) - documented)}")
