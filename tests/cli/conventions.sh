#!/bin/sh
# The command line behaves as common tools do: -h/--help on every command exits 0 and prints
# usage on stdout; an unknown option, a bad value and a repeated option exit 2 with a message
# naming the option. Usage: conventions.sh path/to/flashbuf
set -u
cli=$1
failures=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect STATUS STREAM TEXT -- ARGS...: runs `flashbuf ARGS`, checks the exit status and that
# STREAM (out or err) contains TEXT.
expect() {
  status=$1 stream=$2 text=$3
  shift 4
  "$cli" "$@" >"$out" 2>"$err"
  got=$?
  file=$out
  [ "$stream" = err ] && file=$err
  if [ "$got" -ne "$status" ] || ! grep -qF -- "$text" "$file"; then
    echo "FAIL: flashbuf $* -> exit $got (want $status), $stream lacks '$text':" >&2
    sed 's/^/  out: /' "$out" >&2
    sed 's/^/  err: /' "$err" >&2
    failures=$((failures + 1))
  fi
}

expect 0 out "Usage: flashbuf" -- --help
expect 0 out "Usage: flashbuf" -- -h
expect 0 out "Usage: flashbuf run" -- run -h
expect 0 out "Usage: flashbuf verify" -- verify --help
expect 0 out "Usage: flashbuf bench" -- bench -h
expect 0 out "Usage: flashbuf info" -- info --help
expect 0 out "flashbuf " -- --version
expect 0 out "CPU backend" -- info
expect 2 err "Usage: flashbuf" --
expect 2 err "unknown command 'frob'" -- frob
expect 2 err "unknown option --bogus" -- run --bogus
expect 2 err "unknown option --bogus" -- verify --bogus=3
expect 2 err "unknown option -x" -- bench -x
expect 2 err "unexpected argument 'extra'" -- info extra
expect 2 err "--backend: tpu not in" -- run --backend tpu
expect 2 err "--backend needs a value" -- run --backend
expect 2 err "--count" -- verify --count 0
expect 2 err "--count" -- verify --count many
expect 2 err "--seed" -- run --seed -1
expect 2 err "outside the int64 range" -- verify --seed 99999999999999999999999
expect 2 err "expected a decimal integer" -- verify --count 0x10
expect 0 out "PASS: 110 problems" -- verify --backend cpu --count 010
expect 2 err "empty file name" -- bench --out ""
expect 2 err "--kind" -- bench --kind everything
expect 2 err "--backend was given 2 times" -- run --backend cpu --backend cpu
expect 2 err "--quick was given 2 times" -- bench --quick --quick
expect 2 err "--quick excludes --full" -- bench --quick --full

# A failed write of the results is an error naming --out (a full device), and a run refused
# before it starts leaves an earlier results file as it was.
if [ -w /dev/full ]; then
  expect 1 err "--out: writing '/dev/full' failed" -- bench --backend cpu --kind decode --quick --out /dev/full
fi
previous=$(mktemp)
echo '{"earlier": true}' >"$previous"
expect 2 err "--kind" -- bench --kind everything --out "$previous"
if ! grep -qF '"earlier": true' "$previous"; then
  echo "FAIL: a refused bench emptied its --out file" >&2
  failures=$((failures + 1))
fi
rm -f "$previous"
# A symbolic link is written through, not replaced by a file of its own.
dir=$(mktemp -d)
echo old >"$dir/real.json"
ln -s real.json "$dir/link.json"
expect 0 err "wrote" -- bench --backend cpu --kind decode --quick --out "$dir/link.json"
if [ ! -L "$dir/link.json" ] || ! grep -qF '"rows"' "$dir/real.json"; then
  echo "FAIL: bench --out replaced a symbolic link instead of writing through it" >&2
  failures=$((failures + 1))
fi
rm -rf "$dir"

if [ "$failures" -ne 0 ]; then
  echo "$failures command-line convention(s) broken" >&2
  exit 1
fi
echo "command-line conventions: all hold"
