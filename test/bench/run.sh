#!/usr/bin/env bash
# make bench: runs every test/bench/*.sh in turn (not lib.sh, the shared
# helpers, nor cmp.sh, which is make bench-cmp); each prints its own figures.
# Knobs (environment), read by the scripts:
#   BENCH_RUNS    runs per figure, medians printed (default 5)
#   BENCH_MB      size of throughput.sh's inputs, MB (default 100)
#   BENCH_BIG_MB  size of its memory-check stream, MB (default 1024)
#   BENCH_JQ_MB   size of the slice its jq programs run on, MB (default 2)
#   BENCH_OUT     its machine-readable table, TSV (default build/bench.tsv)
#   BENCH_TMP     scratch directory (default a fresh one under /tmp, removed)
# Prints figures, never fails on speed: on a shared machine they are noisy.
set -euo pipefail
cd "$(dirname "$0")/../.."
export ACPSNAP_BUILD=${ACPSNAP_BUILD:-build/rel}    # the build under test (make bench passes it)
export PATH="$PWD/$ACPSNAP_BUILD/bin:$PATH"
export BENCH_TMP="${BENCH_TMP:-$(mktemp -d /tmp/acpsnap-bench.XXXXXX)}"
trap 'rm -rf "$BENCH_TMP"' EXIT
echo "bench: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo '+changes'), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %T UTC')"
for b in test/bench/[0-9a-z]*.sh; do
    case $b in test/bench/run.sh|test/bench/lib.sh|test/bench/cmp.sh) continue ;; esac
    echo "== $(basename "$b" .sh)"
    bash "$b"
done
