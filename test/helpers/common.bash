# Shared bats setup: every suite does `load helpers/common`.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

ROOT="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"
CORPUS="${ACPSNAP_CORPUS:-$ROOT/test/data/corpus}"
PATH="$ROOT/bin:$ROOT/example:$PATH"
export ROOT CORPUS PATH

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
