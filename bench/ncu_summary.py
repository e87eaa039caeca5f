"""One line of key metrics per kernel of an Nsight Compute details page: duration, SM clock,
elapsed cycles, issue slots busy, cycles between a warp's instructions, the busiest pipe, launch
shape and registers (for comparing flashbuf's kernel with an anchor's on the same inputs).

  ncu --import REPORT.ncu-rep --page details > details.txt
  python3 bench/ncu_summary.py details.txt
"""
import re, sys
txt = open(sys.argv[1]).read()
pats = {"dur": r"Duration\s+(\S+)\s+([\d.,]+)", "sm": r"SM Frequency\s+\S+\s+([\d.]+)",
        "cyc": r"Elapsed Cycles\s+\S+\s+([\d,]+)", "busy": r"Issue Slots Busy\s+%\s+([\d.]+)",
        "cpi": r"Warp Cycles Per Issued Instruction\s+cycle\s+([\d.]+)",
        "pipe": r"(\w+) is the highest-utilized pipeline \(([\d.]+%)", "grid": r"Grid Size\s+\S*\s+([\d,]+)",
        "block": r"Block Size\s+\S*\s+([\d,]+)", "regs": r"Registers Per Thread\s+\S+\s+(\d+)"}
for block in re.split(r"\n  (?=\S)", txt)[1:]:
    name = block.split("(")[0].strip()[:70]
    v = {}
    for k, pat in pats.items():
        m = re.search(pat, block)
        v[k] = " ".join(m.groups()) if m else "?"
    print(f"  {name}: {v['dur']}, SM {v['sm']} GHz, cycles {v['cyc']}, issue busy {v['busy']}%, "
          f"cycles/issue {v['cpi']}, top pipe {v['pipe']}, grid {v['grid']} x {v['block']}, regs {v['regs']}")
