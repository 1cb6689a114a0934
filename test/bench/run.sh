#!/usr/bin/env bash
# make bench: runs every test/bench/*.sh in turn; each prints its own figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
export ACPSNAP_BUILD=${ACPSNAP_BUILD:-build/rel}    # the build under test (make bench passes it)
export PATH="$PWD/$ACPSNAP_BUILD/bin:$PATH"
export BENCH_TMP="${BENCH_TMP:-$(mktemp -d /tmp/acpsnap-bench.XXXXXX)}"
trap 'rm -rf "$BENCH_TMP"' EXIT
for b in test/bench/[0-9a-z]*.sh; do
    case $b in test/bench/run.sh|test/bench/lib.sh) continue ;; esac
    echo "== $(basename "$b" .sh)"
    bash "$b"
done
