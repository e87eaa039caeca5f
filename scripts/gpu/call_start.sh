# Sourced first by a device call (bench/results/ab/*-call.sh), from the repository root: `el`
# prints the seconds since the call began; $O (/root/call/c, emptied) collects the call's
# output and `pack` writes it as $OUT/c.tgz, the one file that comes back even from a call cut
# short; the card's name, clock and temperature go to $O/gpu.txt; the carried Debian packages
# are unpacked (device_deps.sh).
t0=$(date +%s)
el() { echo "[$(($(date +%s) - t0)) s] $*"; }
O=/root/call/c
rm -rf "$O" && mkdir -p "$O"
pack() { tar -C /root/call -czf "$OUT/c.tgz" c; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee "$O/gpu.txt"
source scripts/gpu/device_deps.sh unpack >/dev/null
