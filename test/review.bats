#!/usr/bin/env bats
# acpsnap-review and the pending entries failing replays leave
# (acpsnap-replay(1), PENDING). Each test works on a private copy of the
# reference agent's scenarios, snap/, broken the way the README's tour
# breaks the agent: the committed stdout of some scenarios says
# "embeddedContext":true where the agent says false.
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    pipeline_setup
    unset ACPSNAP_PENDING ACPSNAP_SNAPSHOTS
    cp -a "$ROOT/scenarios" snap
    cp "$BIN/acpsnap-agent" agent
    sed -i "s|^command = .*|command = $BATS_TEST_TMPDIR/agent|" snap/acpsnap-agent.profile
    PENDING=$BATS_TEST_TMPDIR/.acpsnap/pending
}

# break NAME...: their committed stdout no longer matches the agent's
break_stdout() {
    local n
    for n; do sed -i 's/"embeddedContext":false/"embeddedContext":true/' "snap/$n/stdout.expected.jsonl"; done
}
SOME=(handshake reasoning-turn terse-turn text-turn two-step-tools)
replay_some() { acpsnap-replay -d snap "${SOME[@]}"; }
tree_sum() { (cd "$1" && find . -print0 | LC_ALL=C sort -z | xargs -0 stat -c '%n %F' && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); }
pending_names() { ls "$PENDING" | tr '\n' ' '; }

@test "review: a failing replay leaves what refresh would write in .acpsnap/pending, beside the snapshots directory" {
    break_stdout handshake terse-turn text-turn
    local before; before=$(tree_sum snap)
    run -1 replay_some
    assert_line --regexp '^FAIL +text-turn '
    assert_line "    pending: $PENDING/text-turn; to review it: make review SCENARIO=text-turn"
    assert_line --regexp '^ok +reasoning-turn '
    assert_equal "$(tree_sum snap)" "$before"
    assert_equal "$(pending_names)" "handshake terse-turn text-turn "
    # each entry: the files refresh would change, in fixture form, and meta.json
    assert_equal "$(cd "$PENDING/text-turn" && find . -type f | LC_ALL=C sort | tr '\n' ' ')" "./files/text-turn/stdout.expected.jsonl ./meta.json "
    cmp "$PENDING/text-turn/files/text-turn/stdout.expected.jsonl" "$ROOT/scenarios/text-turn/stdout.expected.jsonl"
    run -0 jq -r '.scenario, (.files | keys[])' "$PENDING/text-turn/meta.json"
    assert_output 'text-turn
text-turn/stdout.expected.jsonl'
    [ -z "$(ls -A "$TMPDIR")" ]
    [ -z "$(find "$PENDING" -name '.*')" ]
    run -0 acpsnap-review -d snap --list
    assert_output 'pending   handshake
pending   terse-turn
pending   text-turn'
}

@test "review: ACPSNAP_PENDING moves the entries, none turns them off; never inside the snapshots directory" {
    break_stdout text-turn
    ACPSNAP_PENDING=elsewhere run -1 acpsnap-replay -d snap text-turn
    [ -f elsewhere/text-turn/meta.json ] && [ ! -e .acpsnap ]
    ACPSNAP_PENDING=elsewhere run -0 acpsnap-review -d snap --list
    assert_output 'pending   text-turn'
    ACPSNAP_PENDING=none run -1 acpsnap-replay -d snap text-turn
    refute_output --partial pending
    [ ! -e .acpsnap ]
    ACPSNAP_PENDING=none run -2 --separate-stderr acpsnap-review -d snap --list
    assert_equal "$stderr" 'acpsnap-replay: pending entries are off (ACPSNAP_PENDING=none)'
    ACPSNAP_PENDING=snap/.pending run -2 --separate-stderr acpsnap-replay -d snap text-turn
    assert_equal "$stderr" "acpsnap-replay: $BATS_TEST_TMPDIR/snap/.pending: the pending directory cannot be inside the snapshots directory $BATS_TEST_TMPDIR/snap"
}

@test "review: --accept NAME writes that scenario exactly as refresh would; nothing else changes, the others stay pending" {
    break_stdout handshake terse-turn text-turn
    run -1 replay_some
    cp -a snap want
    ACPSNAP_PENDING=none run -0 acpsnap-refresh -d want text-turn
    assert_line --regexp '^refreshed +text-turn .*\(wrote stdout.expected.jsonl\)$'
    local dir_ino; dir_ino=$(stat -c %i snap/text-turn)
    run -0 --separate-stderr acpsnap-review -d snap --accept text-turn
    assert_output 'text-turn: wrote text-turn/stdout.expected.jsonl'
    assert_equal "$stderr" ''
    assert_equal "$(tree_sum snap)" "$(tree_sum want)"
    [ "$(stat -c %i snap/text-turn)" != "$dir_ino" ]    # swapped in whole
    [ -z "$(find snap -name '*.acpsnap-*')" ]
    assert_equal "$(pending_names)" "handshake terse-turn "
    run -0 acpsnap-replay -d snap text-turn
    run -0 fixture-guard snap
    # a file an entry would write, changed since to something else: stale
    printf '{}\n' > snap/handshake/stdout.expected.jsonl
    run -0 acpsnap-review -d snap --list
    assert_line 'stale     handshake  (the committed files changed since it was written)'
}

@test "review: the failing part of update is pending too, session fixtures included" {
    sed -i 's/Reply with exactly the word: PONG./Reply with exactly the word: PONG, please./' snap/text-turn/input.json
    run -1 acpsnap-update -d snap text-turn
    assert_line "    pending: $PENDING/text-turn; to review it: make review SCENARIO=text-turn"
    assert_equal "$(cd "$PENDING/text-turn/files" && find . -type f | LC_ALL=C sort | tr '\n' ' ')" "./text-turn/session.jsonl "
    cp -a snap want
    ACPSNAP_PENDING=none run -0 acpsnap-refresh -d want text-turn
    assert_line --regexp '^refreshed +text-turn .*\(wrote session.jsonl\)$'
    cp "$PENDING/text-turn/files/text-turn/session.jsonl" pending.jsonl
    run -0 acpsnap-review -d snap --accept text-turn
    assert_output 'text-turn: wrote text-turn/session.jsonl'
    # the pending bytes, written; a fixture's ids and times are its run's, so
    # refresh's own run compares in normalized form
    cmp pending.jsonl snap/text-turn/session.jsonl
    cmp <(scrub --session snap/text-turn/session.jsonl) <(scrub --session want/text-turn/session.jsonl)
    cp want/text-turn/session.jsonl snap/text-turn/session.jsonl
    assert_equal "$(tree_sum snap)" "$(tree_sum want)"
    [ ! -e "$PENDING/text-turn" ]
    run -0 acpsnap-replay -d snap text-turn
}

@test "review: --reject and --reject-all remove entries and change nothing in the tree; a passing replay removes its own" {
    break_stdout handshake terse-turn text-turn
    run -1 replay_some
    local before; before=$(tree_sum snap)
    run -0 acpsnap-review -d snap --reject terse-turn
    assert_output 'terse-turn: rejected'
    assert_equal "$(pending_names)" "handshake text-turn "
    run -0 acpsnap-review -d snap --reject-all
    assert_output 'handshake: rejected
text-turn: rejected'
    assert_equal "$(pending_names)" ""
    assert_equal "$(tree_sum snap)" "$before"
    # an entry whose scenario passes again is removed by that replay
    run -1 acpsnap-replay -d snap text-turn
    cp "$ROOT/scenarios/text-turn/stdout.expected.jsonl" snap/text-turn/
    run -0 acpsnap-replay -d snap text-turn
    assert_equal "$(pending_names)" ""
}

@test "review: stale entries: the committed files changed, or the row is gone; --accept refuses them, --prune removes them" {
    break_stdout handshake terse-turn text-turn
    run -1 replay_some
    printf '\n' >> snap/terse-turn/input.json       # still valid JSON, another input
    jq -c 'select(.name != "handshake")' snap/scenarios.jsonl > t && mv t snap/scenarios.jsonl
    rm -r snap/handshake
    local before; before=$(tree_sum snap)
    run -0 acpsnap-review -d snap --list
    assert_output 'stale     handshake  (the table no longer names it)
stale     terse-turn  (the committed files changed since it was written)
pending   text-turn'
    run -1 --separate-stderr acpsnap-review -d snap --accept terse-turn
    assert_equal "$stderr" 'acpsnap-review: terse-turn: refused: the pending entry is stale: the committed files changed since it was written; replay it again, or --prune'
    run -1 --separate-stderr acpsnap-review -d snap --accept-all
    assert_equal "$output" 'text-turn: wrote text-turn/stdout.expected.jsonl'
    assert_equal "$stderr" 'acpsnap-review: handshake: stale: the table no longer names it (acpsnap-review --prune removes it)
acpsnap-review: terse-turn: stale: the committed files changed since it was written (acpsnap-review --prune removes it)'
    cmp snap/text-turn/stdout.expected.jsonl "$ROOT/scenarios/text-turn/stdout.expected.jsonl"
    run -0 acpsnap-review -d snap --prune
    assert_output 'handshake: pruned (the table no longer names it)
terse-turn: pruned (the committed files changed since it was written)'
    assert_equal "$(pending_names)" ""
    # acpsnap-replay checks again under the lock: an entry gone stale since is not written
    run -1 acpsnap-replay -d snap terse-turn
    printf '\n' >> snap/terse-turn/input.json
    before=$(tree_sum snap)
    run -1 --separate-stderr acpsnap-replay -d snap --apply-pending terse-turn
    assert_equal "$stderr" 'acpsnap-replay: terse-turn: the pending entry is stale: the committed files changed since it was written; nothing written'
    assert_equal "$(tree_sum snap)" "$before"
}

@test "review: interactive, answers from stdin: accept, skip, reject, quit" {
    break_stdout handshake reasoning-turn terse-turn text-turn
    run -1 replay_some
    cp -a snap want
    ACPSNAP_PENDING=none run -0 acpsnap-refresh -d want handshake
    run -0 acpsnap-review -d snap <<<$'a\nwhat\ns\nr\nq'
    assert_line '== handshake'
    assert_line '--- handshake/stdout.expected.jsonl (committed)'
    assert_line '+++ handshake/stdout.expected.jsonl (pending)'
    assert_line --regexp '^\+\{"jsonrpc":"2.0","id":1,.*"embeddedContext":false'
    assert_line 'handshake: [a]ccept, [r]eject, [s]kip, [q]uit? a'
    assert_line 'handshake: wrote handshake/stdout.expected.jsonl'
    assert_line 'reasoning-turn: [a]ccept, [r]eject, [s]kip, [q]uit? what'
    assert_line 'answer a, r, s or q'
    assert_line 'reasoning-turn: [a]ccept, [r]eject, [s]kip, [q]uit? s'
    assert_line 'terse-turn: rejected'
    assert_line 'text-turn: [a]ccept, [r]eject, [s]kip, [q]uit? q'
    assert_equal "$(pending_names)" "reasoning-turn text-turn "
    assert_equal "$(tree_sum snap)" "$(tree_sum want)"
    # end of input quits; a glob selects
    run -0 acpsnap-review -d snap 'text-*' < /dev/null
    refute_line '== reasoning-turn'
    assert_line '== text-turn'
    assert_equal "$(pending_names)" "reasoning-turn text-turn "
}

@test "review: make review (share/acpsnap.mk) asks about the selected scenarios" {
    break_stdout handshake text-turn
    printf 'ACPSNAP_SNAPSHOTS := snap\nACPSNAP_BIN := %s\ninclude %s\n' "$BIN" "$ROOT/share/acpsnap.mk" > Makefile
    run -2 make -s replay SCENARIO='*-turn'
    assert_equal "$(pending_names)" "text-turn "
    run -0 make -s review SCENARIO='text-*' <<<a
    assert_line 'text-turn: wrote text-turn/stdout.expected.jsonl'
    assert_equal "$(pending_names)" ""
    run -0 make -s replay SCENARIO='text-*'
}

@test "review: nothing pending, unknown names, usage" {
    run -0 --separate-stderr acpsnap-review -d snap
    assert_equal "$stderr" 'acpsnap-review: nothing pending'
    run -0 acpsnap-review -d snap --list
    assert_output ''
    run -1 --separate-stderr acpsnap-review -d snap --accept no-such
    assert_equal "$stderr" 'acpsnap-review: no-such: no pending entry'
    run -2 --separate-stderr acpsnap-review -d snap --accept
    assert_equal "${stderr%%$'\n'*}" 'acpsnap-review: --accept needs the names of entries'
    run -2 --separate-stderr acpsnap-review -d snap --list x
    assert_equal "${stderr%%$'\n'*}" 'acpsnap-review: --list takes no names'
    run -2 --separate-stderr acpsnap-review -d snap --accept-all --reject-all
    assert_equal "${stderr%%$'\n'*}" 'acpsnap-review: --reject-all and --accept-all exclude each other'
    run -2 --separate-stderr acpsnap-review -d no-such-dir --list
    assert_equal "$stderr" 'acpsnap-review: no-such-dir: no such snapshots directory'
    run -2 --separate-stderr acpsnap-replay -d snap --apply-pending ../x
    assert_equal "$stderr" 'acpsnap-replay: ../x: not a scenario name (acpsnap-scenarios(5))'
}

@test "review: an entry's sidecars, and a sidecar two entries share: accepting both writes what refresh writes" {
    # the agent with another system prompt: the pins' sidecars change
    sed 's/Keep answers brief and factual/Keep answers short and factual/' agent > prompt-agent
    cmp -s prompt-agent agent && skip "no patchable prompt in this agent build"
    chmod +x prompt-agent
    sed -i "s|^command = .*|command = $BATS_TEST_TMPDIR/prompt-agent|" snap/acpsnap-agent.profile
    break_stdout text-turn pro-model-turn
    run -1 acpsnap-replay -d snap text-turn pro-model-turn
    assert_equal "$(cd "$PENDING" && find . -type f -path '*/files/*' | LC_ALL=C sort | tr '\n' ' ')" \
        "./pro-model-turn/files/pro-model-turn/stdout.expected.jsonl ./pro-model-turn/files/text-turn/system-prompt.expected.md ./text-turn/files/text-turn/stdout.expected.jsonl ./text-turn/files/text-turn/system-prompt.expected.md "
    cp -a snap want
    ACPSNAP_PENDING=none run -0 acpsnap-refresh -d want text-turn pro-model-turn
    # pro-model-turn first writes the prompt they share; text-turn's entry is
    # not stale for it, since the file is already what the entry holds
    run -0 acpsnap-review -d snap --accept-all
    assert_output 'pro-model-turn: wrote pro-model-turn/stdout.expected.jsonl text-turn/system-prompt.expected.md
text-turn: wrote text-turn/stdout.expected.jsonl'
    assert_equal "$(tree_sum snap)" "$(tree_sum want)"
    grep -q 'short and factual' snap/text-turn/system-prompt.expected.md
    run -0 fixture-guard snap
}
