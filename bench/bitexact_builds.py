"""Whether two builds of flashbuf give bit-identical outputs on the same inputs. For a change that
should only move instructions (scheduling, addressing, code structure) this is the strongest
check there is: the GPU tests bound the error against float64, this asks for every bit of O and
the LSE to stay the same. Each build runs in a process of its own (PYTHONPATH=<package>, as
scripts/gpu_ab.sh installs them), on inputs made from one seed per case; this script then
compares what the two wrote.

  python3 bench/bitexact_builds.py /tmp/ab-pkg-main /tmp/ab-pkg-branch            # CUDA, backend auto
  python3 bench/bitexact_builds.py A B --backend sm80
  python3 bench/bitexact_builds.py A B --device cpu --backend cpu                 # a smoke test anywhere

Cases: head dims 64, 128, 256 (and 192/128 where built), unmasked / causal / window / softcap /
sinks, odd lengths, GQA, varlen, paged (page 16), with the LSE. A case a build does not
support (a head dim it was not built with) must be refused by both, with the same message;
any other error ends the run. Exit status 1 if any case differs.
"""
import argparse
import os
import subprocess
import sys
import tempfile


def cases():
    """(name, keyword arguments of make_inputs and of the call)."""
    out = []
    for d, dv in ((64, 64), (128, 128), (192, 128), (256, 256)):
        for s in (509, 2048):
            for mask in ("none", "causal", "window", "softcap", "sinks"):
                out.append((f"d{d}-{dv} s{s} {mask}", dict(form="batch", d=d, dv=dv, sq=s, sk=s, mask=mask)))
    for d in (64, 128, 256):
        out.append((f"d{d} varlen causal", dict(form="varlen", d=d, dv=d, lens=(1, 300, 1029, 64, 2000), mask="causal")))
        out.append((f"d{d} paged16 causal", dict(form="paged", d=d, dv=d, lens=(17, 700, 1500), page=16, mask="causal")))
    return out


def make_and_run(flashbuf, torch, spec, seed, device, backend):
    g = torch.Generator(device=device).manual_seed(seed)
    dt = torch.bfloat16
    hq, hkv = 8, 2
    rnd = lambda *shape: torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(dt)
    kw = dict(backend=backend, return_lse=True)
    mask = spec["mask"]
    if mask == "causal":
        kw["causal"] = True
    elif mask == "window":
        kw["window"] = (200, 0)
    elif mask == "softcap":
        kw["softcap"] = 30.0
        kw["causal"] = True
    elif mask == "sinks":
        kw["sinks"] = torch.randn(hq, generator=g, device=device, dtype=torch.float32)
        kw["causal"] = True
    d, dv = spec["d"], spec["dv"]
    if spec["form"] == "batch":
        q = rnd(2, spec["sq"], hq, d)
        k = rnd(2, spec["sk"], hkv, d)
        v = rnd(2, spec["sk"], hkv, dv)
        return flashbuf.attention(q, k, v, **kw)
    lens = spec["lens"]
    total = sum(lens)
    cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32, device=device)
    q = rnd(total, hq, d)
    if spec["form"] == "varlen":
        k = rnd(total, hkv, d)
        v = rnd(total, hkv, dv)
        return flashbuf.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                                  max_seqlen_k=max(lens), **kw)
    page = spec["page"]
    pages_per = [(n + page - 1) // page for n in lens]
    num_pages = sum(pages_per) + 3
    perm = torch.randperm(num_pages, generator=g, device=device).to(torch.int32)
    table = torch.zeros(len(lens), max(pages_per), dtype=torch.int32, device=device)
    at = 0
    for b, n in enumerate(pages_per):
        table[b, :n] = perm[at:at + n]
        at += n
    k = rnd(num_pages, page, hkv, d)
    v = rnd(num_pages, page, hkv, dv)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    return flashbuf.attention(q, k, v, cu_seqlens_q=cu, max_seqlen_q=max(lens), seqlens_k=seqlens,
                              page_table=table, **kw)


def run(out_path, device, backend):
    import torch
    import flashbuf
    results = {}
    for i, (name, spec) in enumerate(cases()):
        try:
            o, lse = make_and_run(flashbuf, torch, spec, 1000 + i, device, backend)
            if device == "cuda":
                torch.cuda.synchronize()
            # bits, so that NaN compares equal to the same NaN and -0 differs from 0
            results[name] = (o.detach().cpu().view(torch.int16), lse.detach().cpu().view(torch.int32))
        except (ValueError, TypeError) as e:  # the API's refusals; anything else ends the run
            results[name] = f"refused: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    torch.save(results, out_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="package folder of the first build (its PYTHONPATH)")
    ap.add_argument("b", help="package folder of the second build")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--run", help=argparse.SUPPRESS)  # internal: one build's process
    args = ap.parse_args()
    if args.run:
        run(args.run, args.device, args.backend)
        return 0
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        outs = []
        for pkg in (args.a, args.b):
            path = os.path.join(tmp, f"{len(outs)}.pt")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [pkg, os.environ.get("PYTHONPATH")])))
            subprocess.run([sys.executable, os.path.abspath(__file__), args.a, args.b, "--device", args.device,
                            "--backend", args.backend, "--run", path], env=env, check=True, cwd=tmp)
            outs.append(torch.load(path))
    differ = 0
    for name, _ in cases():
        x, y = outs[0][name], outs[1][name]
        if isinstance(x, str) or isinstance(y, str):
            same = x == y  # both refused, with the same message
            verdict = ("both refused" if same else "REFUSED DIFFERENTLY") + f" ({x if isinstance(x, str) else y})"
        else:
            same = torch.equal(x[0], y[0]) and torch.equal(x[1], y[1])
            verdict = "bit-identical" if same else (
                f"DIFFER: {int((x[0] != y[0]).sum())} O elements, {int((x[1] != y[1]).sum())} LSE values")
        differ += not same
        print(f"{name:32s} {verdict}")
    print(f"{differ} of {len(cases())} cases differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
