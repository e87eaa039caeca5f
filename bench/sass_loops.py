"""The softmax loops of compiled kernels, read from the SASS without a GPU: for each function of a
cubin, each innermost loop that holds MUFU instructions (a tile's exponentials), with

  - its instruction count and the sum of ptxas's stall counts (the control bits of every
    instruction: the cycles ptxas schedules before the next one issues; a static lower bound on
    the loop's issue time, which ignores waits on scoreboards and barriers);
  - the instructions after its last MUFU (work ptxas left for after the exponentials, on the
    way to the next tile's products);
  - with --regions, the same split at the loop's landmarks (the first S product, the V wait, the
    first P V product, the pass of the issue turn), for wgmma loops;
  - with --ops, its opcode counts.

    python3 bench/sass_loops.py build/prefill_bf16_128_128.cubin --function prefill_sm90_kernel
    python3 bench/sass_loops.py a.cubin b.cubin --regions         # two builds side by side

Takes cubins (disassembled with `nvdisasm -hex`, which must be on PATH: the CUDA toolkit's, or
the PyPI wheel nvidia-cuda-nvdisasm) or files `nvdisasm -hex` already wrote. bench/NOTES-prefill.md
("O's rescale among the exponentials") has how it was used; FlashAttention-4's sm90 kernel can be
read the same way from the cubin that bench/fa4_offline_sass.py compiles.
"""
import argparse
import collections
import re
import subprocess
import sys

INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* 0x([0-9a-f]{16}) \*/")
HIGH_WORD = re.compile(r"^\s*/\* 0x([0-9a-f]{16}) \*/\s*$")
FUNCTION = re.compile(r"^\.text\.(\S+):$")
LABEL = re.compile(r"^(\.L_x_\d+):$")
BRANCH_TARGET = re.compile(r"BRA.*`\((\.L_x_\d+)\)")


def stall_cycles(high_word: int) -> int:
    # Volta-and-later control bits live in the top 23 bits of the 128-bit instruction; the
    # stall count is the first 4 of them (bits 105-108, i.e. bits 41-44 of the high word).
    return (high_word >> 41) & 0xF


def opcode(text: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def disassemble(path: str) -> list[str]:
    if path.endswith(".cubin"):
        out = subprocess.run(["nvdisasm", "-hex", path], capture_output=True, text=True, check=True)
        return out.stdout.splitlines()
    with open(path) as f:
        return f.read().splitlines()


def functions(lines: list[str]) -> dict:
    """name -> (instructions [(text, stall)], labels {label: index})"""
    funcs = collections.OrderedDict()
    current = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        m = FUNCTION.match(stripped)
        if m:
            current = m.group(1)
            funcs[current] = ([], {})
            continue
        if current is None:
            continue
        m = LABEL.match(stripped)
        if m:
            funcs[current][1][m.group(1)] = len(funcs[current][0])
            continue
        m = INSTRUCTION.match(line)
        if m and i + 1 < len(lines):
            high = HIGH_WORD.match(lines[i + 1])
            if high:
                funcs[current][0].append((m.group(2), stall_cycles(int(high.group(1), 16))))
    return funcs


def softmax_loops(instructions, labels):
    """Innermost backward-branch loops that hold a MUFU: [(first, last)] instruction indices."""
    loops = []
    for i, (text, _) in enumerate(instructions):
        m = BRANCH_TARGET.search(text)
        if m and labels.get(m.group(1), len(instructions)) <= i:
            loops.append((labels[m.group(1)], i))
    holds_mufu = [(s, e) for s, e in set(loops) if any(opcode(t) == "MUFU" for t, _ in instructions[s:e + 1])]
    return sorted((s, e) for s, e in holds_mufu
                  if not any(s <= s2 and e2 <= e and (s2, e2) != (s, e) for s2, e2 in holds_mufu))


def regions(body):
    """Stall cycles and instructions between a wgmma loop's landmarks."""
    name, out = "top", collections.OrderedDict()
    for text, stall in body:
        if "HGMMA" in text and "tnspB" not in text and name == "top":
            name = "S products"
        elif name == "S products" and "SYNCS.PHASECHK" in text:
            name = "V wait"
        elif "HGMMA" in text and "tnspB" in text and name in ("S products", "V wait"):
            name = "P V products"
        elif "BAR.ARV" in text:
            name = "softmax"
        count, cycles = out.get(name, (0, 0))
        out[name] = (count + 1, cycles + stall)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="cubins or `nvdisasm -hex` listings")
    ap.add_argument("--function", default="", help="only functions whose (mangled) name holds this")
    ap.add_argument("--regions", action="store_true", help="split each loop at its wgmma landmarks")
    ap.add_argument("--ops", action="store_true", help="each loop's opcode counts")
    args = ap.parse_args()
    for path in args.inputs:
        for name, (instructions, labels) in functions(disassemble(path)).items():
            if args.function not in name:
                continue
            loops = softmax_loops(instructions, labels)
            if not loops:
                continue
            print(f"{path}: {name}")
            for s, e in loops:
                body = instructions[s:e + 1]
                mufu = [k for k, (t, _) in enumerate(body) if opcode(t) == "MUFU"]
                print(f"  loop at instruction {s}: {len(body)} instructions, {sum(st for _, st in body)} stall cycles, "
                      f"{len(mufu)} MUFU, {len(body) - 1 - mufu[-1]} instructions after the last")
                if args.regions:
                    print("    " + " | ".join(f"{k}: {n} / {c}" for k, (n, c) in regions(body).items()))
                if args.ops:
                    ops = collections.Counter(opcode(t) for t, _ in body)
                    print("    " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))


if __name__ == "__main__":
    sys.exit(main())
