#!/usr/bin/env bash
# FlashAttention-4 (the `fa4` anchor of bench/bench.py and the compatibility tests) on the GPU
# machine, in as few carried bytes as the 64 MiB limit allows. The recipe is
# ../shared/anchors/fa4/ (which wheels, and that they are unzipped, not pip-installed); this
# script ships them unzipped and xz-compressed instead of as wheels: 72 MB in two parts where
# the wheels take 102 MB in three (each part travels beside the working tree, 17 MB, and the
# 7 MB of .deps: the carry's limit leaves the tree about 20 MB, so plots that no document names
# are not kept in bench/results; their runs' JSON files are).
#
#   here:    bash scripts/gpu/fa4_site.sh pack        # fetches the wheels, writes .fa4site/part.*
#   device:  eval "$(bash scripts/gpu/fa4_site.sh env)"
#            in every call: stashes the parts it carries and, once every part is stashed,
#            unpacks /root/fa4site and prints the export (nothing while a part is missing;
#            `stash` and `finish` are its two halves)
# Carry one part per call (carry [".fa4site/part.aa", ...], with .fa4site/SHA256SUMS each time);
# the stash lives in /root, which survives between calls only while the machine stays warm.
# Later calls on the same machine: export PYTHONPATH=/root/fa4site:/root/fa4site/nvidia_cutlass_dsl/dsl_packages
set -euo pipefail
cd "$(dirname "$0")/../.."
site=/root/fa4site
stash=/root/fa4parts
case "${1:-}" in
  pack)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp" .fa4a .fa4b' EXIT
    bash ../shared/anchors/fa4/fetch_wheels.sh >/dev/null
    cat .fa4a/cu13.part.aa .fa4b/cu13.part.ab >"$tmp/nvidia_cutlass_dsl_libs_cu13.whl"
    mkdir "$tmp/site"
    for w in .fa4a/*.whl "$tmp/nvidia_cutlass_dsl_libs_cu13.whl"; do python3 -m zipfile -e "$w" "$tmp/site"; done
    rm -rf .fa4site && mkdir .fa4site
    tar -C "$tmp/site" -cf - . | xz -T0 -6 | split -b 36M - .fa4site/part.
    (cd .fa4site && sha256sum part.* >SHA256SUMS)
    ls -la .fa4site ;;
  stash)
    mkdir -p "$stash"
    cp .fa4site/SHA256SUMS "$stash/"
    for part in .fa4site/part.*; do [ -f "$part" ] && cp "$part" "$stash/"; done
    echo "fa4_site: stashed $(ls "$stash" | grep -c '^part\.') of $(wc -l <"$stash/SHA256SUMS") parts" >&2 ;;
  finish)
    if [ ! -d "$site/flash_attn" ]; then
      (cd "$stash" && sha256sum --quiet -c SHA256SUMS) >&2 || { echo "fa4_site: a part is missing or damaged" >&2; exit 1; }
      mkdir -p "$site"
      cat "$stash"/part.* | xz -d | tar -x -C "$site"
    fi
    export PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}
    python3 -c "import flash_attn.cute" >&2
    echo "export PYTHONPATH=$PYTHONPATH" ;;
  env)
    [ -d .fa4site ] && bash "$0" stash
    bash "$0" finish || true ;;
  *) echo "usage: scripts/gpu/fa4_site.sh pack|stash|finish|env" >&2; exit 2 ;;
esac
