#!/usr/bin/env python3
"""What a softmax row sum of P as rounded for P V (the input dtype, e.g. bf16) does to the LSE,
against the float sum the kernels take now: a model on the CPU, no GPU.

A row sum taken by the tensor core (P times a column of ones, beside O += P V) sums P as the
product's A operand holds it, rounded to the input type; the kernels' FADD sum adds the float
P. Each rounded term is off by up to 2^-9 of itself in bf16 (2^-12 in fp16), so the sum, and
the LSE = max + log(sum), move by up to that much where a few terms carry the row. This model
runs the online softmax tile by tile over the tests' inputs (q, k normal with stddev 1 or 2,
scores scaled by 1 / sqrt(D)) both ways and prints the largest LSE error against float64, the
quantity the reference check bounds by 1e-3 (src/reference/check.hpp, kLseAtol).

    python3 bench/lse_rounding_model.py [--dtype bf16|fp16] [--trials 10]
"""
import argparse

import numpy as np


def rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """float32 x rounded to the nearest bf16 / fp16 (ties to even), back as float32."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def online_lse(scores: np.ndarray, round_p: str | None, block_n: int = 128) -> np.ndarray:
    """Each row's LSE by the kernels' online softmax over tiles of block_n keys: float32 P,
    summed as float (round_p None) or as rounded to round_p."""
    rows = scores.shape[0]
    m = np.full(rows, -np.inf)
    total = np.zeros(rows)
    for t in range(0, scores.shape[1], block_n):
        tile = scores[:, t:t + block_n]
        m_new = np.maximum(m, tile.max(axis=1))
        p = np.exp(tile - m_new[:, None]).astype(np.float32)
        if round_p is not None:
            p = rounded(p, round_p)
        total = total * np.exp(m - m_new) + p.sum(axis=1, dtype=np.float64)
        m = m_new
    return m + np.log(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--d", type=int, default=64)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"largest |LSE - float64 LSE| over 400 rows x {args.trials} trials, D {args.d}, {args.dtype} inputs")
    print("stddev  keys   float sum   sum of rounded P")
    for stddev in (1.0, 2.0):
        for keys in (16, 64, 400, 2000):
            worst = {None: 0.0, args.dtype: 0.0}
            for _ in range(args.trials):
                q = rounded(stddev * rng.standard_normal((400, args.d)), args.dtype)
                k = rounded(stddev * rng.standard_normal((keys, args.d)), args.dtype)
                scores = (q.astype(np.float64) @ k.T.astype(np.float64)) / np.sqrt(args.d)
                top = scores.max(axis=1)
                exact = top + np.log(np.exp(scores - top[:, None]).sum(axis=1))
                for how in worst:
                    worst[how] = max(worst[how], np.abs(online_lse(scores, how) - exact).max())
            print(f"{stddev:6.1f} {keys:5d}   {worst[None]:9.1e}   {worst[args.dtype]:9.1e}")


if __name__ == "__main__":
    main()
