# The head's whole verification on any card, call A: every instantiation built (tests and the
# package), the C++ GPU suite, the fuzz walk on a persistent grid with the host tests, memcheck.
O=$OUT/v; mkdir -p $O
timeout 590 env OUT=$O bash scripts/gpu/verify.sh build suite walk sanitize 2>&1 | tail -30
ls $O
