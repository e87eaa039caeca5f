# The head's C++ verification on any card in one call (about 400 s with the start): every
# instantiation built (tests and the package), the C++ GPU suite in 8 shards, memcheck on two
# small fuzz shards (h100-stop79-verify-call.sh's steps); then racecheck over the test of idle
# consumers (about 145 s), which runs past the tests' 80 s watchdog, with no
# FLASHBUF_TEST_WATCHDOG_S set: the watchdog should find compute-sanitizer attached and turn
# itself off ("[ WATCHDOG ] off") rather than abort. Here first:
#   mkdir -p .abp && git rev-parse --short HEAD > .commit && cp <this file> .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".commit", ".abp"].
O=$OUT/v; mkdir -p $O
timeout 285 env OUT=$O bash scripts/gpu/verify.sh build suite sanitize 2>&1 | tail -30
timeout 240 compute-sanitizer --tool racecheck --error-exitcode 9 ./build-gpu/tests/flashbuf_gpu_tests \
  --gtest_filter='*ConsumersWithoutRowsKeepThePace*' --gtest_brief=1 > $O/racecheck-idle-consumers.log 2>&1
echo "racecheck exit $?"; grep -E "WATCHDOG|RACECHECK SUMMARY|PASSED|FAILED" $O/racecheck-idle-consumers.log
ls $O
