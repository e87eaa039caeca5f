"""Tiny randomly initialised transformers models for the flashbuf integration tests (CPU and GPU):
the same weights loaded under attn_implementation="flashbuf" and "sdpa", a left-padded batch,
and the comparisons the tests make (logits at real tokens, greedy generate)."""
from __future__ import annotations

import torch
import transformers

import flashbuf.integrations.transformers as flashbuf_transformers

VOCAB = 96
HEAD_DIM = 64  # a head dim the GPU kernels are built for (the CPU backend takes any)


def configs() -> dict:
    """GQA everywhere; Qwen2 and Qwen3 with a sliding window shorter than the prompts on their
    second layer (the first keeps full attention), so both mask kinds run in one model."""
    common = dict(vocab_size=VOCAB, hidden_size=4 * HEAD_DIM, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  initializer_range=0.2)  # peaked attention, so that masks show in the logits
    sliding = dict(use_sliding_window=True, sliding_window=5, max_window_layers=1)
    return {
        "llama": transformers.LlamaConfig(**common),
        "qwen2": transformers.Qwen2Config(**common, **sliding),
        "qwen3": transformers.Qwen3Config(**common, head_dim=HEAD_DIM, **sliding),
    }


def model_pair(name: str, device: str, dtype: torch.dtype):
    """(flashbuf model, sdpa model) with the same weights, in eval mode."""
    flashbuf_transformers.register()
    torch.manual_seed(0)
    # One config object each: from_config records the implementation in the config it gets.
    ours = transformers.AutoModelForCausalLM.from_config(configs()[name], attn_implementation="flashbuf", dtype=dtype)
    theirs = transformers.AutoModelForCausalLM.from_config(configs()[name], attn_implementation="sdpa", dtype=dtype)
    theirs.load_state_dict(ours.state_dict())
    assert ours.config._attn_implementation == "flashbuf"
    return ours.to(device).eval(), theirs.to(device).eval()


def padded_batch(device: str, lengths=(17, 11, 14)):
    """Token ids (B, max) left-padded with the mask marking real tokens."""
    generator = torch.Generator().manual_seed(1)
    width = max(lengths)
    ids = torch.randint(0, VOCAB, (len(lengths), width), generator=generator)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, width - n:] = 1
    ids = ids.masked_fill(mask == 0, 0)
    return ids.to(device), mask.to(device)


@torch.no_grad()
def logits_error(ours, theirs, ids, mask) -> tuple[float, float]:
    """(max abs difference of the logits at real tokens, max abs logit) for a prefill."""
    a = ours(input_ids=ids, attention_mask=mask).logits.float()
    b = theirs(input_ids=ids, attention_mask=mask).logits.float()
    real = mask.bool()
    return float((a - b)[real].abs().max()), float(b[real].abs().max())


@torch.no_grad()
def greedy(model, ids, mask, new_tokens=12):
    return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                          pad_token_id=0)[:, ids.shape[1]:]


@torch.no_grad()
def first_divergence_margin(model, ids, mask, got, want) -> float:
    """model's top-1 minus top-2 logit at the first step where two greedy continuations part:
    how close to a tie the choice was that they made differently."""
    differs = (got != want).any(dim=0).nonzero()
    step = int(differs[0])
    row = int((got[:, step] != want[:, step]).nonzero()[0])
    prefix = torch.cat([ids, want[:, :step]], dim=1)
    prefix_mask = torch.cat([mask, torch.ones_like(want[:, :step])], dim=1)
    logits = model(input_ids=prefix, attention_mask=prefix_mask).logits[row, -1].float()
    top = logits.topk(2).values
    return float(top[0] - top[1])
