"""pytest setup for the flashbuf Python tests: make a hard crash (a segmentation fault in the
extension, the CUDA runtime or PyTorch) name the test that was running.

A crash kills pytest before it reports anything, and under -q nothing has printed the test's
name yet. So:

  * faulthandler is on (pytest's own plugin normally enables it; if that plugin is disabled
    with -p no:faulthandler, it is enabled here), so a fatal signal prints the Python stack of
    every thread to stderr;
  * with FLASHBUF_TEST_TRACE=1 (bench/gpu_pytest.sh sets it), every test writes
    "[flashbuf-test] start <nodeid>" and "[flashbuf-test] done <nodeid>" straight to file
    descriptor 2 (unbuffered, so the line is out before the test runs), and the end of the
    session writes "[flashbuf-test] session finished" -- a crash after that line happened at
    interpreter exit (module teardown), not in a test.

Running pytest with -v has the same effect for the start of each test (pytest flushes the test
id before running it). The GPU machine's recipe is bench/gpu_pytest.sh, which runs one test
file per process with `python3 -X faulthandler -m pytest -v`.
"""
from __future__ import annotations

import faulthandler
import os
import sys

_TRACE = os.environ.get("FLASHBUF_TEST_TRACE", "") not in ("", "0")


def _say(text: str) -> None:
    try:
        os.write(2, f"[flashbuf-test] {text}\n".encode("utf-8", "replace"))
    except OSError:  # stderr closed: nothing to report to
        pass


def pytest_configure(config):
    if not faulthandler.is_enabled():
        try:
            faulthandler.enable(file=sys.__stderr__, all_threads=True)
        except (AttributeError, ValueError, OSError):  # no usable stderr (pytest captures it)
            faulthandler.enable(all_threads=True)


def pytest_runtest_logstart(nodeid, location):
    if _TRACE:
        _say(f"start {nodeid}")


def pytest_runtest_logfinish(nodeid, location):
    if _TRACE:
        _say(f"done {nodeid}")


def pytest_sessionfinish(session, exitstatus):
    if _TRACE:
        _say(f"session finished (exit status {int(exitstatus)}); a crash after this line is at interpreter exit")
