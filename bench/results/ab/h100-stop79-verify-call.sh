# The head's C++ verification on any card in one call (about 240 s): every instantiation built
# (tests and the package), the C++ GPU suite in 8 shards, memcheck on two small fuzz shards.
# Stop 75's call A without the walk and the host tests (the device time left). Here first:
#   mkdir -p .abp && git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".commit", ".abp"].
O=$OUT/v; mkdir -p $O
timeout 285 env OUT=$O bash scripts/gpu/verify.sh build suite sanitize 2>&1 | tail -30
ls $O
