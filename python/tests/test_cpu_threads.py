"""The torch operators on CPU tensors run the CPU backend on torch.get_num_threads() workers:
the count reaches the C++ call (num_threads), and results do not depend on it. Skipped where
PyTorch is not installed.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import flashbuf  # noqa: E402
from flashbuf import _torch_ops  # noqa: E402


class _Recorder:
    """Wraps one function of the extension and records the num_threads it was called with."""

    def __init__(self, monkeypatch, name):
        self.seen = []
        inner = getattr(_torch_ops._C, name)

        def wrapper(*args, **kwargs):
            self.seen.append(args[-1] if "num_threads" not in kwargs else kwargs["num_threads"])
            return inner(*args, **kwargs)

        monkeypatch.setattr(_torch_ops._C, name, wrapper)


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_attention_passes_torch_thread_count(monkeypatch, restore_threads):
    recorder = _Recorder(monkeypatch, "attention")
    q = torch.randn(1, 300, 4, 64, dtype=torch.bfloat16)
    k = torch.randn(1, 300, 2, 64, dtype=torch.bfloat16)
    v = torch.randn(1, 300, 2, 64, dtype=torch.bfloat16)
    outputs = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        outputs.append(flashbuf.attention(q, k, v, causal=True))
    assert recorder.seen == [1, 2]
    assert torch.equal(outputs[0], outputs[1])


def test_decode_passes_torch_thread_count(monkeypatch, restore_threads):
    recorder = _Recorder(monkeypatch, "decode")
    plan = flashbuf.DecodePlan(2, 1, 8, 2, 64, 64, 100, 0, "bf16", "cpu")
    q = torch.randn(2, 1, 8, 64, dtype=torch.bfloat16)
    k = torch.randn(2, 100, 2, 64, dtype=torch.bfloat16)
    v = torch.randn(2, 100, 2, 64, dtype=torch.bfloat16)
    seqlens = torch.tensor([100, 37], dtype=torch.int32)
    torch.set_num_threads(1)
    plan.run(q, k, v, seqlens)
    assert recorder.seen == [1]
