#!/usr/bin/env bats
# acp-drive's fidelity to the reference harness: frames, the spill root, the
# output directory, the table row, the profile's env, failing fast.
bats_require_minimum_version 1.5.0
load helpers/common

load helpers/drive

setup() { drive_setup; }

@test "drive-fidelity: a pretty-printed input.json drives the reference agent like the compact one" {
    [ -x "$BIN/acpsnap-agent" ] || skip "the reference agent is not built"
    for d in compact pretty; do
        mkdir -p "snap-$d"
        cp -r "$ROOT/scenarios/text-turn" "snap-$d/text-turn"
    done
    printf '%s\n' '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"promptContent","content":[{"type":"text","text":"Reply with exactly the word: PONG.\n Do not use any tools.","n":1.50},{"type":"text","text":" \u00e9"}]}]}' \
        > snap-compact/text-turn/input.json
    jq . snap-compact/text-turn/input.json > snap-pretty/text-turn/input.json
    [ "$(wc -l < snap-pretty/text-turn/input.json)" -gt 10 ]
    for d in compact pretty; do
        run -0 --separate-stderr acp-drive -p "$ROOT/scenarios/acpsnap-agent.profile" -o "out-$d" "snap-$d/text-turn"
        scrub --stdout --context "out-$d/run.json" "out-$d/stdout.raw.jsonl" > "$d.jsonl"
    done
    run -0 diff compact.jsonl pretty.jsonl
}

@test "drive-fidelity: values from input.json go out compact, one frame a line, spelled as written" {
    printf '#!/bin/sh\ntee -a "$ACPSNAP_OUT/stdin.log" | exec %s\n' "$ROOT/test/helpers/fake-agent" > tee-agent
    chmod +x tee-agent
    printf 'command = ./tee-agent\nharvest = */*/session.jsonl\n' > tee.profile
    printf '%s\n' '{"steps":[{"op":"initialize"},' '{"op":"newSessionExpectError","additionalDirectories":[' '  "/a b",' '  "/c"' ']},' \
        '{"op":"newSession"},{"op":"promptContent","content":[' '  {"type":"text","text":"x\ty",' '   "n":1.50e+0}' ']}]}' > snap/s/input.json
    run -0 acp-drive -p tee.profile -o out snap/s
    run -0 jq -c 'select(.method != "initialize") | .params | del(.cwd, .sessionId)' out/stdin.log
    assert_output '{"mcpServers":[],"additionalDirectories":["/a b","/c"]}
{"mcpServers":[]}
{"prompt":[{"type":"text","text":"x\ty","n":1.5}]}'
    run -0 grep -c -F '"prompt":[{"type":"text","text":"x\ty","n":1.50e+0}]}' out/stdin.log
    run -0 grep -c -F '"additionalDirectories":["/a b","/c"]}' out/stdin.log
}

@test "drive-fidelity: acpsnap-profile(5) renders the harvest entry's quotes whole" {
    command -v mandoc >/dev/null || skip "mandoc is not installed"
    run -0 bash -c "mandoc -Tascii '$ROOT/share/man/man5/acpsnap-profile.5' | col -b | tr -s ' \t\n' ' '"
    assert_output --partial "(fnmatch(3), where \`*' also matches \`/') matched against"
}

@test "drive-fidelity: -o creates the output directory's parents" {
    input '{"steps":[{"op":"initialize"}]}'
    run -0 acp-drive -p fake.profile -o runs/a//b/x/ snap/s
    [ -f runs/a/b/x/run.json ]
    run -0 acp-drive -p fake.profile -o "$BATS_TEST_TMPDIR/abs/y" snap/s
    [ -f abs/y/run.json ]
    # an existing link on the way is the user's choice
    mkdir elsewhere && ln -s elsewhere linked
    run -0 acp-drive -p fake.profile -o linked/z snap/s
    [ -f elsewhere/z/run.json ]
    : > plain
    run -2 --separate-stderr acp-drive -p fake.profile -o plain/x snap/s
    assert_equal "$stderr" 'acp-drive: unable to create plain: Not a directory'
    run -2 --separate-stderr acp-drive -p fake.profile -o '' snap/s
    assert_equal "$stderr" 'acp-drive: invalid --out: empty'
    [ -z "$(ls -A "$TMPDIR")" ]
}

@test "drive-fidelity: a linked scenario directory keeps its name and its table row" {
    mkdir -p real/elsewhere
    mv snap/s real/elsewhere/s
    ln -s ../real/elsewhere/s snap/link
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"env: FAKE_ROW"},{"op":"prompt","text":"env: ACPSNAP_CONFIG_PATH"},{"op":"prompt","text":"env: ACPSNAP_SCENARIO"}]}\n' > real/elsewhere/s/input.json
    printf 'x = 1\n' > snap/link.conf
    printf '%s\n' '{"name":"link","hasModelTurn":false,"recorded":false,"configPath":"link.conf","env":{"FAKE_ROW":"row of link"}}' > snap/scenarios.jsonl
    run -0 acp-drive -p fake.profile -o out snap/link/
    run -0 jq -r 'select(.method) | .params.update.content.text' out/stdout.raw.jsonl
    assert_output "echo: row of link
echo: $BATS_TEST_TMPDIR/snap/link.conf
echo: link"
    assert_equal "$(jq -r .scenario out/run.json)" link
    # from inside the snapshots directory too
    run -0 bash -c 'cd snap && acp-drive -p ../fake.profile -o ../out2 link'
    assert_equal "$(jq -r 'select(.method) | .params.update.content.text' out2/stdout.raw.jsonl | head -1)" 'echo: row of link'
}

@test "drive-fidelity: a scenario without a row in its table is trouble, linked or not" {
    printf '{"steps":[{"op":"initialize"}]}\n' > snap/s/input.json
    mkdir real && mv snap/s real/s && ln -s ../real/s snap/link
    printf '%s\n' '{"name":"s","hasModelTurn":false,"recorded":false}' > snap/scenarios.jsonl
    run -2 --separate-stderr acp-drive -p fake.profile -o out snap/link
    assert_equal "$stderr" 'acp-drive: snap/link: no row named link in snap/scenarios.jsonl'
    cp -r real/s snap/t
    run -2 --separate-stderr acp-drive -p fake.profile -o out "$BATS_TEST_TMPDIR/snap/t/"
    assert_equal "$stderr" "acp-drive: $BATS_TEST_TMPDIR/snap/t: no row named t in $BATS_TEST_TMPDIR/snap/scenarios.jsonl"
    run -2 --separate-stderr bash -c 'cd snap && acp-drive -p ../fake.profile -o ../out t'
    assert_equal "$stderr" 'acp-drive: t: no row named t in scenarios.jsonl'
    [ -z "$(ls -A "$TMPDIR")" ]
}

@test "drive-fidelity: ?NAME=value leaves NAME out of the agent's environment when the value is empty" {
    printf '#!/bin/sh\nenv > "$ACPSNAP_OUT/env.txt"\nexec %s\n' "$ROOT/test/helpers/fake-agent" > env-agent
    chmod +x env-agent
    printf '%s\n' 'command = ./env-agent' 'harvest = */*/session.jsonl' \
        'env = FAKE_EMPTY=${FAKE_NOT_SET:-}' 'env = ?FAKE_OMITTED=${FAKE_NOT_SET:-}' 'env = ?FAKE_OVERRIDE=${ACPSNAP_OVERRIDE:-}' \
        'env = ?FAKE_KEPT=${FAKE_SET:-}' 'env = ?FAKE_INHERITED=' 'replay.env = ?FAKE_LATER=x' 'record.env = ?FAKE_LATER=' > env.profile
    input '{"steps":[{"op":"initialize"}]}'
    FAKE_SET=yes FAKE_INHERITED=1 FAKE_LATER=0 run -0 acp-drive -p env.profile -o out snap/s
    run -0 bash -c "grep '^FAKE_' out/env.txt | LC_ALL=C sort"
    assert_output - <<'OUT'
FAKE_EMPTY=
FAKE_KEPT=yes
FAKE_LATER=x
FAKE_SET=yes
OUT
    FAKE_LATER=0 run -0 acp-drive --record -p env.profile -o out snap/s
    run -1 grep -c '^FAKE_LATER=' out/env.txt
    assert_output 0
    printf 'command = x\nenv = ?=v\n' > bad.profile
    run -2 --separate-stderr acp-drive -p bad.profile -o out snap/s
    assert_equal "$stderr" 'acp-drive: bad.profile:2: env must be NAME=VALUE or ?NAME=VALUE'
}

# A fake agent for failing fast: answers initialize and session/new, then
# does what $1 says at the first prompt.
quick_agent() {
    cat > quick-agent <<'AGENT'
#!/bin/bash
while IFS= read -r line; do
    id=$(jq -c '.id // empty' <<<"$line")
    case $(jq -r .method <<<"$line") in
    initialize) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}\n' "$id" ;;
    session/new) printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"q"}}\n' "$id" ;;
    session/prompt)
        case $QUICK in
        exit) echo "quick-agent: giving up" >&2; exit 4 ;;
        answer-exit) printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$id"
            echo "quick-agent: done, leaving" >&2; exit 0 ;;
        parse) echo "quick-agent: unreadable line" >&2
            printf '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n' ;;
        null) printf '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}\n' ;;
        esac ;;
    esac
done
exec sleep 100    # killed: the status must not depend on stdin's EOF
AGENT
    chmod +x quick-agent
    printf 'command = ./quick-agent\nharvest = none\nrpc-timeout = 30000\ntimeout = 30000\n' > quick.profile
}
# (bounds are loose: a loaded CI machine; what counts is that no 30 s timeout ran)
ms() { echo $(( $(date +%s%N) / 1000000 )); }

@test "drive-fidelity: an agent that exits mid-step fails the step at once, with its stderr" {
    quick_agent
    input '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"x"}]}'
    t=$(ms)
    QUICK=exit run -1 --separate-stderr acp-drive -p quick.profile -o out snap/s
    (( $(ms) - t < 10000 ))   # at once: the timeouts are 30 s
    assert_equal "$stderr" 'acp-drive: snap/s/input.json:1: step 2 (prompt): the agent exited before answering session/prompt
acp-drive: s: agent exit status 4
acp-drive: agent stderr:
quick-agent: giving up'
    input '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"x"},{"op":"waitForTurnEnd"}]}'
    t=$(ms)
    QUICK=answer-exit run -1 --separate-stderr acp-drive -p quick.profile -o out snap/s
    (( $(ms) - t < 10000 ))   # at once: the timeouts are 30 s
    assert_equal "$stderr" 'acp-drive: snap/s/input.json:1: step 3 (waitForTurnEnd): the agent exited while waiting: the session did not persist turn/end
acp-drive: s: agent exit status 0
acp-drive: agent stderr:
quick-agent: done, leaving'
}

@test "drive-fidelity: a JSON-RPC parse error or an error with a null id fails the step at once" {
    quick_agent
    input '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"x"}]}'
    t=$(ms)
    QUICK=parse run -1 --separate-stderr acp-drive -p quick.profile -o out snap/s
    (( $(ms) - t < 10000 ))   # at once: the timeouts are 30 s
    assert_equal "$stderr" 'acp-drive: snap/s/input.json:1: step 2 (prompt): the agent could not parse what it was sent (error -32700): Parse error
acp-drive: s: agent killed by signal 9 (Killed)
acp-drive: agent stderr:
quick-agent: unreadable line'
    t=$(ms)
    QUICK=null run -1 --separate-stderr acp-drive -p quick.profile -o out snap/s
    (( $(ms) - t < 10000 ))   # at once: the timeouts are 30 s
    assert_equal "${stderr%%$'\n'*}" 'acp-drive: snap/s/input.json:1: step 2 (prompt): the agent answered error -32600 to no request: Invalid request'
}

@test "drive-fidelity: the spill root is spelled as the reference fixtures spell it" {
    mv snap/s snap/bash-spill
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"env: ACPSNAP_SPILL_ROOT"}]}\n' > snap/bash-spill/input.json
    # the reference fixture's literal: /tmp/dsh-acp-snap-<sha256("bash-spill"), 9 hex>
    printf '%s\n' 'echo: /tmp/dsh-acp-snap-ee77dff02' > expected
    printf 'command = %s\nharvest = */*/session.jsonl\n' "$ROOT/test/helpers/fake-agent" > tmp.profile
    run -0 acp-drive -p tmp.profile -o out snap/bash-spill
    run -0 diff expected <(jq -r 'select(.method) | .params.update.content.text' out/stdout.raw.jsonl)
    # spill-root = tmpdir: the same name under TMPDIR
    run -0 acp-drive -p fake.profile -o out snap/bash-spill
    assert_equal "$(jq -r 'select(.method) | .params.update.content.text' out/stdout.raw.jsonl)" "echo: $TMPDIR/dsh-acp-snap-ee77dff02"
    [ -z "$(ls -A "$TMPDIR")" ]
    printf 'command = x\nspill-root = /var/tmp\n' > bad.profile
    run -2 --separate-stderr acp-drive -p bad.profile -o out snap/bash-spill
    assert_equal "$stderr" 'acp-drive: bad.profile:2: spill-root must be tmp or tmpdir'
}

@test "drive-fidelity: two runs of one scenario at once: the second waits for the first's spill root" {
    printf '#!/bin/bash\nls -A "$ACPSNAP_SPILL_ROOT" > "$ACPSNAP_OUT/spill-at-start"\necho "$ACPSNAP_OUT" > "$ACPSNAP_SPILL_ROOT/owner"\nsleep 1\ncat "$ACPSNAP_SPILL_ROOT/owner" > "$ACPSNAP_OUT/spill-at-end"\nexec %s\n' \
        "$ROOT/test/helpers/fake-agent" > spill-agent
    chmod +x spill-agent
    printf 'command = ./spill-agent\nharvest = */*/session.jsonl\nspill-root = tmpdir\n' > spill.profile
    input '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"hi"}]}'
    acp-drive -p spill.profile -o a snap/s 2> a.err & pa=$!
    for ((i = 0; i < 500; i++)); do [ -s a/spill-at-start ] || [ -e "$TMPDIR"/dsh-acp-snap-*/owner ] && break; sleep 0.01; done
    acp-drive -p spill.profile -o b snap/s 2> b.err & pb=$!
    wait "$pa"; wait "$pb"
    assert_equal "$(cat a.err b.err)" ''
    # each run had the spill root to itself, from start to end
    assert_equal "$(cat a/spill-at-start b/spill-at-start)" ''
    assert_equal "$(cat a/spill-at-end)" "$BATS_TEST_TMPDIR/a"
    assert_equal "$(cat b/spill-at-end)" "$BATS_TEST_TMPDIR/b"
    [ -z "$(ls -A "$TMPDIR")" ]
}

@test "drive-fidelity: a spill root a live run holds is trouble after --timeout, untouched; one a killed run left is taken over" {
    spill=$TMPDIR/dsh-acp-snap-$(printf s | sha256sum | cut -c1-9)
    mkdir "$spill"
    : > "$spill/theirs"
    input '{"steps":[{"op":"initialize"}]}'
    # held: another run's lock on the directory
    flock "$spill" sleep 3 &
    local holder=$!
    for _ in $(seq 100); do flock -n "$spill" true || break; sleep 0.02; done
    run -2 --separate-stderr acp-drive -p fake.profile -o out --timeout 300 snap/s
    assert_equal "$stderr" "acp-drive: $spill: spill root of s in use by another run for 300 ms"
    [ -e "$spill/theirs" ]
    kill "$holder"; wait "$holder" || true
    # left behind: no lock; the run empties it, uses it and removes it
    run -0 acp-drive -p fake.profile -o out2 --timeout 3000 snap/s
    [ ! -e "$spill" ]
    # a link in its place is trouble, and its target is untouched
    mkdir victim; : > victim/keep
    ln -s "$PWD/victim" "$spill"
    run -2 --separate-stderr acp-drive -p fake.profile -o out3 --timeout 300 snap/s
    [[ $stderr == "acp-drive: unable to open the spill root $spill (a link or not a directory?): "* ]]
    [ -e victim/keep ] && [ -L "$spill" ]
    rm "$spill"
}
