# Setup for acp-drive's suites: a scratch snapshots tree snap/ with one
# scenario s, a profile fake.profile booting test/helpers/fake-agent (spill
# root under the test's own TMPDIR), and input() to write its input.json.
drive_setup() {
    cd "$BATS_TEST_TMPDIR"
    export TMPDIR=$BATS_TEST_TMPDIR/tmp
    mkdir -p "$TMPDIR" snap/s
    printf 'command = %s\nharvest = */*/session.jsonl\nspill-root = tmpdir\n' "$ROOT/test/helpers/fake-agent" > fake.profile
    printf '{"type":"session","id":"x","createdAt":0}\n' > snap/s/session.jsonl
}

input() { printf '%s\n' "$1" > snap/s/input.json; }
