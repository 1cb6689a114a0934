# Shared bats setup: every suite does `load helpers/common`.
# bats-support and bats-assert come from BATS_LIB_PATH (default /usr/lib/bats).
bats_load_library bats-support
bats_load_library bats-assert

# The project root: this file lives in test/helpers, whatever the suite's depth.
ROOT="$(cd "${BASH_SOURCE[0]%/*}/../.." && pwd)"
CORPUS="${ACPSNAP_CORPUS:-$ROOT/test/data/corpus}"
# The build under test (make check passes ACPSNAP_BUILD): its bin/ holds every
# tool, the pipeline scripts and acpsnap-agent.
BIN="$ROOT/${ACPSNAP_BUILD:-build/rel}/bin"
PATH="$BIN:$PATH"
export ROOT CORPUS PATH
# The make that runs the suites (make check, make -C DIR check) must not pass
# its flags on to the makes a test runs as a user would: -w from -C would add
# "Entering directory" lines to their output.
unset MAKEFLAGS MFLAGS MAKELEVEL

# Every fixture under the corpus: session*.jsonl inside snapshots/ trees.
corpus_fixtures() {
    find "$CORPUS" -path '*/snapshots/*' -name 'session*.jsonl' | LC_ALL=C sort
}
# The oracle directory of a fixture path.
oracle_of() { # fixture → oracle path prefix (…/oracle/<scenario>/<file>)
    local f=$1 scen file snapdir
    file=$(basename "$f"); scen=$(basename "$(dirname "$f")"); snapdir=$(dirname "$(dirname "$f")")
    echo "$(dirname "$snapdir")/oracle/$scen/$file"
}
# Compare two JSONL files as JSON values, line for line (jq -S normalises key order).
json_lines_equal() {
    diff <(jq -cS . "$1") <(jq -cS . "$2")
}

# For suites that run the reference agent through the pipelines: skips when
# it is not built; works in the test's own directory with a private TMPDIR;
# makes the directories named; copies the agent to ./agent when asked
# (--agent: the tree's binary may be relinked while the suite runs).
pipeline_setup() { # [--agent] [DIR...]
    [ -x "$BIN/acpsnap-agent" ] || skip "the reference agent is not built"
    cd "$BATS_TEST_TMPDIR"
    export TMPDIR=$BATS_TEST_TMPDIR/tmp
    local copy=
    [ "${1-}" = --agent ] && { copy=1; shift; }
    mkdir -p "$TMPDIR" "$@"
    [ -z "$copy" ] || cp "$BIN/acpsnap-agent" agent
}
