#!/usr/bin/env bats
# share/acpsnap.mk: a project that includes it gets the whole workflow as
# make targets (replay record refresh update guard review list), under the
# names the pipelines' hints print, prefixed only when it asks.
bats_require_minimum_version 1.5.0
load helpers/common

TARGETS='replay record refresh update guard review list'

setup() {
    cd "$BATS_TEST_TMPDIR"
    export TMPDIR=$BATS_TEST_TMPDIR/tmp
    mkdir -p "$TMPDIR" snap
    # a private copy: the tree's binary may be relinked while the suite runs
    [ ! -x "$BIN/acpsnap-agent" ] || cp "$BIN/acpsnap-agent" agent
    cp -r "$ROOT/scenarios/text-turn" "$ROOT/scenarios/handshake" snap/
    printf '%s\n' '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}' \
        '{"name":"handshake","hasModelTurn":false,"recorded":false}' > snap/scenarios.jsonl
    sed "s|^command = .*|command = $BATS_TEST_TMPDIR/agent|" "$ROOT/scenarios/acpsnap-agent.profile" > snap/agent.profile
    project
}

need_agent() { [ -x agent ] || skip "the reference agent is not built"; }

# project [PREFIX]: a Makefile including the fragment (with the target prefix).
project() {
    { printf 'ACPSNAP_SNAPSHOTS := snap\nACPSNAP_BIN := %s\n' "$BIN"
      [ -z "${1:-}" ] || printf 'ACPSNAP_TARGET_PREFIX := %s\n' "$1"
      printf 'include %s\n' "$ROOT/share/acpsnap.mk"; } > Makefile
}

# what make -n runs for target T (one line)
dry() { make -s -n "$1" SCENARIO='text-*'; }

@test "make-fragment: every target of the workflow exists under its plain name and runs the right command" {
    local t
    for t in $TARGETS; do run -0 dry "$t"; done
    for t in replay record refresh update; do
        run -0 dry "$t"
        assert_output --partial 'ACPSNAP_TARGET_PREFIX="$ACPSNAP_MK_TARGET_PREFIX" "${ACPSNAP_MK_BIN:+$ACPSNAP_MK_BIN/}acpsnap-replay" -d "$ACPSNAP_MK_SNAPSHOTS"' 
        assert_output --partial "--mode $t -- \"\$ACPSNAP_MK_SCENARIO\""
    done
    run -0 dry guard
    assert_output "\"\${ACPSNAP_MK_BIN:+\$ACPSNAP_MK_BIN/}fixture-guard\" \"\$ACPSNAP_MK_SNAPSHOTS\""
    run -0 dry review
    assert_output --partial 'acpsnap-review" -d "$ACPSNAP_MK_SNAPSHOTS" -- "$ACPSNAP_MK_SCENARIO"'
    run -0 dry list
    assert_output --partial '--list -- "$ACPSNAP_MK_SCENARIO"'
    run -2 make -s -n acpsnap-replay
    assert_output --partial "No rule to make target 'acpsnap-replay'"
}

@test "make-fragment: list, guard and replay run for real; the hint names a target that exists and works" {
    need_agent
    run -0 make -s list
    assert_output $'text-turn\nhandshake'
    run -0 make -s list SCENARIO='hand*'
    assert_output handshake
    run -0 make -s guard
    run -0 make -s replay
    assert_line --regexp '^replay: 2 scenarios: 2 passed'
    sed -i 's/"id":2/"id":3/' snap/handshake/stdout.expected.jsonl
    run -2 make -s replay
    assert_line '    to accept this output: make refresh SCENARIO=handshake'
    assert_line "    pending: $BATS_TEST_TMPDIR/.acpsnap/pending/handshake; to review it: make review SCENARIO=handshake"
    run -0 make -s review SCENARIO=handshake <<<r
    run -0 make -s refresh SCENARIO=handshake
    assert_line --regexp '^refreshed +handshake .*\(wrote stdout.expected.jsonl\)$'
    run -0 make -s replay
}

@test "make-fragment: ACPSNAP_TARGET_PREFIX names every target, and the hints name the prefixed ones" {
    need_agent
    project acpsnap-
    local t
    for t in $TARGETS; do
        run -0 make -s -n "acpsnap-$t"
        run -2 make -s -n "$t"
        assert_output --partial "No rule to make target '$t'"
    done
    run -0 make -s acpsnap-list
    assert_output $'text-turn\nhandshake'
    sed -i 's/"id":2/"id":3/' snap/handshake/stdout.expected.jsonl
    run -2 make -s acpsnap-replay
    assert_line '    to accept this output: make acpsnap-refresh SCENARIO=handshake'
    assert_line "    pending: $BATS_TEST_TMPDIR/.acpsnap/pending/handshake; to review it: make acpsnap-review SCENARIO=handshake"
    run -0 make -s acpsnap-refresh SCENARIO=handshake
    assert_line --regexp '^refreshed +handshake '
    # the prefix stays in make: a direct run's hints name the plain targets
    sed -i 's/"id":2/"id":3/' snap/handshake/stdout.expected.jsonl
    ACPSNAP_PENDING=none run -1 acpsnap-replay -d snap handshake
    assert_line '    to accept this output: make refresh SCENARIO=handshake'
}

@test "make-fragment: the session-fixture hint of update names the project's targets" {
    need_agent
    project x-
    # a text-turn run whose log differs: the fixture's user message edited
    sed -i 's/Do not use any tools/Use no tools/' snap/text-turn/session.jsonl
    grep -q 'Use no tools' snap/text-turn/session.jsonl
    run -2 make -s x-update SCENARIO=text-turn
    assert_line '    session fixtures are written only by: make x-refresh SCENARIO=text-turn (or make x-record)'
}

@test "make-fragment: guard fails on a bad fixture tree" {
    run -0 make -s guard
    rm snap/handshake/stdout.expected.jsonl
    run -2 --separate-stderr make -s guard
    [[ $stderr == *"fixture-guard: snap/handshake/stdout.expected.jsonl: missing; every scenario needs its expected stdout"* ]]
    mkdir snap/stray && : > snap/stray/input.json
    run -2 --separate-stderr make -s guard
    [[ $stderr == *"snap/stray: a snapshot directory the table does not name"* ]]
}

@test "make-fragment: ACPSNAP_PREREQS run before every target" {
    printf 'ACPSNAP_SNAPSHOTS := snap\nACPSNAP_BIN := %s\nACPSNAP_PREREQS := prep\ninclude %s\nprep:\n\t@echo prepared\n' \
        "$BIN" "$ROOT/share/acpsnap.mk" > Makefile
    run -0 make -s list
    assert_output $'prepared\ntext-turn\nhandshake'
    run -0 make -s guard
    assert_output prepared
}

@test "make-fragment: this project's own Makefile has the same targets (make list, make -n guard)" {
    run -0 make -s -C "$ROOT" list SCENARIO='text-*'
    assert_output text-turn
    run -0 make -s -n -C "$ROOT" guard
    assert_line --partial 'fixture-guard" "$ACPSNAP_MK_SNAPSHOTS"'
}
