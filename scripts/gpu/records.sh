#!/usr/bin/env bash
# The files of record on the GPU machine, FlashAttention-4 in the same run: each named entry of
# bench/results/RECORD.json has its `command` run against a package of this tree, from /tmp (so
# that the package, not the checkout's python/ folder, is imported), with --out and --plot added:
# $OUT/<card>-<name>-<commit>-<date>.json and .png (card: h200, h100), ready to commit and to name in RECORD.json.
#
#   scripts/gpu/records.sh prefill-sm90 prefill-sm90-d192-128 prefill-serving
#
# FA4 arrives in two parts (scripts/gpu/fa4_site.sh) and the 64 MiB carry holds the tree, .deps and
# one part, so records take two calls on one warm machine; each call stashes the parts it carries,
# builds the package if this machine has none yet (~/flashbuf-package, commit_package.sh; the
# instantiations in FLASHBUF_PACKAGE_CMAKE_ARGS), and runs the records once both parts are there:
#   1. carry [".deps", ".commit", ".fa4site/part.ab", ".fa4site/SHA256SUMS"]: builds, stashes
#   2. right after (the machine stays warm 30 s), carry [".commit", ".fa4site/part.aa",
#      ".fa4site/SHA256SUMS"]: the packages .deps unpacked and the package stay from call 1
# RECORDS_ANCHORS_ONLY_OK=1 lets a record run without FA4 (its column then null).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root=$PWD
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
pkg=${FLASHBUF_PACKAGE:-$HOME/flashbuf-package}
[ $# -ge 1 ] || { echo "usage: scripts/gpu/records.sh RECORD_NAME... (the keys of bench/results/RECORD.json)" >&2; exit 2; }
commit=${FLASHBUF_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
export FLASHBUF_COMMIT=$commit

# Every name and its command first: a typo should cost nothing on the device.
declare -A command
for name in "$@"; do
  cmd=$(python3 -c 'import json, sys; print(json.load(open("bench/results/RECORD.json"))[sys.argv[1]]["command"])' "$name" 2>/dev/null) ||
    { echo "records: no record named '$name' in bench/results/RECORD.json" >&2; exit 2; }
  [[ "$cmd" == "python3 bench/bench.py "* ]] || { echo "records: '$name' is not a bench/bench.py record: $cmd" >&2; exit 2; }
  command[$name]=${cmd#python3 bench/bench.py }
done

source scripts/gpu/device_deps.sh unpack
source scripts/gpu/commit_package.sh
commit_package "$pkg" "$OUT/records-pip.log" || exit 1
fa4_env=$(bash scripts/gpu/fa4_site.sh env)
if [ -z "$fa4_env" ] && [ -z "${RECORDS_ANCHORS_ONLY_OK:-}" ]; then
  echo "records: FlashAttention-4 is not complete yet (fa4_site.sh above): carry the other part in the next call"
  exit 0
fi
eval "$fa4_env"
export PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH}
date=$(date +%Y%m%d)
# The file names the card it ran on (h200, h100): ratios hold within a file, times only per card.
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h[0-9]{3}' | tr 'A-Z' 'a-z')
card=${card:-gpu}
for name in "$@"; do
  base="$OUT/$card-$name-$commit-$date"
  start=$(date +%s)
  # shellcheck disable=SC2086  # the command's arguments, split as RECORD.json writes them
  (cd /tmp && PYTHONUNBUFFERED=1 python3 "$root/bench/bench.py" ${command[$name]} --out "$base.json" --plot "$base.png" \
     >"$OUT/records-$name.log" 2>&1)
  echo "records: $name exit $? in $(( $(date +%s) - start )) s -> $(basename "$base").json"
  tail -25 "$OUT/records-$name.log"
done
