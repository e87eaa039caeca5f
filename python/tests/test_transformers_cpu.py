"""flashbuf.integrations.transformers on the CPU: tiny random Llama, Qwen2 and Qwen3 models (GQA,
sliding windows) run with attn_implementation="flashbuf" give sdpa's logits on a left-padded
batch and the same tokens from greedy generate with the models' KV cache. Skipped where
transformers (or PyTorch) is not installed; the CUDA bf16 version is in test_compat_gpu.py.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import transformers_models as tm  # noqa: E402

import flashbuf.flash_attn as flash_attn  # noqa: E402


@pytest.fixture
def calls(monkeypatch):
    """Counts the flashbuf.attention calls that flashbuf.flash_attn makes, packed ("varlen") or
    not ("batch"). transformers keeps the entry points it loaded, so the count sits below them."""
    counts = {"varlen": 0, "batch": 0}
    original = flash_attn.attention

    def counted(*args, **kwargs):
        counts["varlen" if kwargs.get("cu_seqlens_q") is not None else "batch"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(flash_attn, "attention", counted)
    return counts


@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3"])
def test_prefill_logits_match_sdpa(name, calls):
    ours, theirs = tm.model_pair(name, "cpu", torch.float32)
    ids, mask = tm.padded_batch("cpu")
    err, scale = tm.logits_error(ours, theirs, ids, mask)
    assert err <= 1e-4 * max(scale, 1.0), f"{name}: logits differ by {err:.3g} (max logit {scale:.3g})"
    assert calls == {"varlen": 2, "batch": 0}  # the padded batch, packed, once per layer
    # Without padding the batch runs as it is.
    err, scale = tm.logits_error(ours, theirs, ids[:1], mask[:1])
    assert err <= 1e-4 * max(scale, 1.0)
    assert calls == {"varlen": 2, "batch": 2}


@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3"])
def test_greedy_generate_matches_sdpa(name, calls):
    ours, theirs = tm.model_pair(name, "cpu", torch.float32)
    ids, mask = tm.padded_batch("cpu")
    got, want = tm.greedy(ours, ids, mask), tm.greedy(theirs, ids, mask)
    assert torch.equal(got, want), f"{name}: greedy tokens differ\n{got}\n{want}"
    assert sum(calls.values()) == 2 * 12  # every layer of every step ran on flashbuf


def test_the_sliding_window_is_exercised():
    """The Qwen2 test model's window changes its logits: a model that ignored it would fail."""
    ours, theirs = tm.model_pair("qwen2", "cpu", torch.float32)
    ids, mask = tm.padded_batch("cpu", lengths=(17,))
    with torch.no_grad():
        windowed = ours(input_ids=ids, attention_mask=mask).logits
        for layer in ours.model.layers:
            layer.self_attn.sliding_window = None
        full = ours(input_ids=ids, attention_mask=mask).logits
    assert float((windowed - full).abs().max()) > 1e-2


def test_register_is_idempotent_and_keeps_other_implementations():
    import transformers
    from transformers import modeling_flash_attention_utils as fa_utils

    import flashbuf.integrations.transformers as integration

    integration.register()
    loader = fa_utils._lazy_imports
    integration.register()
    assert fa_utils._lazy_imports is loader and "flashbuf" in loader.names
    assert loader("flashbuf")[1] is flash_attn.flash_attn_varlen_func
    assert "sdpa" in transformers.AttentionInterface()
    with pytest.raises(ValueError, match=r"^name: "):
        integration.register("fb")
