"""The tuning overrides reach the library only when a caller passes them: importing flashbuf
reads no environment (a bad FLASHBUF_* value in it changes nothing), and the extension's
set_tuning_overrides parses the variables' text as the command line does."""
import os
import subprocess
import sys

import pytest

import flashbuf


def test_import_reads_no_tuning_environment():
    env = dict(os.environ, FLASHBUF_DECODE_SPLITS="bogus", FLASHBUF_PREFILL_GRID="sideways")
    r = subprocess.run([sys.executable, "-c", "import flashbuf; print(flashbuf.__version__)"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == flashbuf.__version__


def test_set_tuning_overrides_names_a_bad_variable():
    with pytest.raises(ValueError, match="FLASHBUF_DECODE_SPLITS"):
        flashbuf._C.set_tuning_overrides({"FLASHBUF_DECODE_SPLITS": "bogus"})


@pytest.mark.skipif(not flashbuf.cuda_available(), reason="the split override applies to CUDA plans")
def test_set_tuning_overrides_forces_the_plan_splits():
    def splits():
        return flashbuf.DecodePlan(batch=1, q_per_seq=1, heads_q=8, heads_kv=2, head_dim=64, head_dim_v=64,
                                   max_seqlen_k=4096, page_size=0, dtype="bf16", device="cuda").num_splits
    try:
        flashbuf._C.set_tuning_overrides({"FLASHBUF_DECODE_SPLITS": "3"})
        forced = splits()
    finally:
        flashbuf._C.set_tuning_overrides({})
    assert forced == 3
