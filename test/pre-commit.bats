#!/usr/bin/env bats
# share/pre-commit: runs fixture-guard on the configured snapshot trees.
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    cd "$BATS_TEST_TMPDIR"
    git init -q repo
    cd repo
    mkdir -p tests
    cp -r "$CORPUS/acp-snapshot-suite/suite/snapshots" tests/snap
    git add tests
    HOOK="$ROOT/share/pre-commit"
    unset ACPSNAP_SNAPSHOTS ACPSNAP_DISCOVER ACPSNAP_FIXTURE_GUARD
}

@test "default: every tracked scenarios.jsonl's directory; a clean tree passes" {
    run -0 --separate-stderr "$HOOK"
    assert_equal "$stderr" ''
}

@test "a broken tree refuses the commit with the guard's report" {
    mkdir tests/snap/orphan && : > tests/snap/orphan/input.json
    run -1 --separate-stderr "$HOOK"
    assert_equal "$stderr" "$(printf '%s\n' \
        'fixture-guard: tests/snap/orphan: a snapshot directory the table does not name' \
        'acpsnap pre-commit: fixture problems above; fix them or commit with --no-verify')"
}

@test "runs from a subdirectory too" {
    mkdir tests/snap/orphan && : > tests/snap/orphan/input.json
    cd tests
    run -1 "$HOOK"
}

@test "git config acpsnap.snapshots chooses the trees" {
    mkdir other && echo '{"name":"x"}' > other/scenarios.jsonl && git add other
    run -1 "$HOOK"                     # the default picks up the broken table too
    git config --add acpsnap.snapshots tests/snap
    run -0 --separate-stderr "$HOOK"
    assert_equal "$stderr" ''
}

@test "ACPSNAP_SNAPSHOTS overrides the config" {
    git config --add acpsnap.snapshots nowhere
    ACPSNAP_SNAPSHOTS=tests/snap run -0 "$HOOK"
    run -2 "$HOOK"
}

@test "discovery over the whole repository" {
    cp "$CORPUS/acp-agent/raw/text-turn/session.jsonl" tests/persisted.jsonl
    run -0 "$HOOK"
    git config acpsnap.discover true
    run -1 --separate-stderr "$HOOK"
    assert_equal "$(echo "$stderr" | head -1)" 'fixture-guard: tests/persisted.jsonl:2: not projected: the record keeps its seq/time envelope; rewrite the fixture with jsonl-project'
}

@test "no fixture-guard: trouble" {
    ACPSNAP_FIXTURE_GUARD=/nonexistent/fixture-guard run -2 --separate-stderr "$HOOK"
    assert_equal "$stderr" 'acpsnap pre-commit: /nonexistent/fixture-guard not found; install acpsnap or set ACPSNAP_FIXTURE_GUARD'
}
