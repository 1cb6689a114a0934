#!/usr/bin/env bats
# Recording a transcript-only scenario ("sessionLog": false) through
# replay-serve's recording proxy: acpsnap-replay --mode record with
# ACPSNAP_UPSTREAM (acpsnap-replay(1), TRANSCRIPT-ONLY SCENARIOS). Offline,
# on loopback: the "live provider" is a second replay-serve serving an
# authored script, given a key it never checks; the agent is the reference
# agent in its live mode, talking Chat Completions to the proxy.
bats_require_minimum_version 1.5.0
load helpers/common

KEY=sk-test-123-upstream-5ecret

setup() {
    [ -x "$BIN/acpsnap-agent" ] || skip "the reference agent is not built"
    cd "$BATS_TEST_TMPDIR"
    PIDS=()
    export TMPDIR=$BATS_TEST_TMPDIR/tmp CI= FAKE_KEY=$KEY
    unset ACPSNAP_PROVIDER ACPSNAP_UPSTREAM ACPSNAP_UPSTREAM_KEY_ENV DEEPSEEK_API_KEY
    mkdir -p "$TMPDIR" snap/chat snap/hello
    # a private copy: the tree's binary may be relinked while the suite runs
    cp "$BIN/acpsnap-agent" agent
    printf '%s\n' "command = $BATS_TEST_TMPDIR/agent" 'provider = replay-serve' \
        'harvest = */session.jsonl */session.jsonl.zstd' \
        'record.env = DEEPSEEK_BASE_URL=${ACPSNAP_PROVIDER_URL}' 'record.env = DEEPSEEK_API_KEY=unused-by-the-proxy' \
        'replay.env = ACPSNAP_SNAPSHOT=live' 'replay.env = DEEPSEEK_BASE_URL=${ACPSNAP_PROVIDER_URL}' \
        'replay.env = DEEPSEEK_API_KEY=unused' > snap/agent.profile
    printf '%s\n' '{"name":"hello","hasModelTurn":false,"recorded":true,"sessionLog":false}' \
        '{"name":"chat","hasModelTurn":true,"recorded":true,"sessionLog":false}' > snap/scenarios.jsonl
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"}]}\n' > snap/hello/input.json
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Run echo HI."}]}\n' > snap/chat/input.json
    # the upstream's script: a tool call, then the answer
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"tool-call"},
      {type:"tool-call-delta",index:0,id:"call_1",name:"bash",argumentsDelta:"{\"command\":"},
      {type:"tool-call-delta",index:0,id:"call_1",name:"bash",argumentsDelta:"\"echo HI\"}"},
      {type:"block-end",index:0,block:{type:"tool-call",id:"call_1",name:"bash",arguments:"{\"command\":\"echo HI\"}"}},
      {type:"finish",reason:{kind:"tool-calls"}}]}' > upstream.jsonl
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},{type:"text-delta",index:0,text:"HI"},
      {type:"block-end",index:0,block:{type:"text",text:"HI"}},{type:"finish",reason:{kind:"stop"}}]}' >> upstream.jsonl
    # the scenario before it is recorded: a placeholder exchange and transcript
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},{type:"text-delta",index:0,text:"OLD"},
      {type:"block-end",index:0,block:{type:"text",text:"OLD"}},{type:"finish",reason:{kind:"stop"}}]}' > snap/chat/provider.jsonl
    local s
    for s in hello chat; do
        acp-drive -p snap/agent.profile -o "first/$s" "snap/$s" 2>/dev/null
        scrub --stdout --context "first/$s/run.json" "first/$s/stdout.raw.jsonl" > "snap/$s/stdout.expected.jsonl"
    done
    rm -rf first
}
teardown() { local p; for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done; true; }

# up SCRIPT: the upstream, a replay-serve on SCRIPT; sets UP_URL, UP_PID.
up() {
    local i
    rm -f up.port
    replay-serve --port-file up.port --log up.log "$1" > up.out 2> up.err &
    UP_PID=$!
    PIDS+=($!)
    for i in $(seq 500); do
        [ -s up.port ] && break
        kill -0 "$UP_PID" 2>/dev/null || { cat up.err >&2; return 1; }
        sleep 0.01
    done
    UP_URL=http://127.0.0.1:$(cat up.port)
}
# up_stop: SIGTERM the upstream; sets UP_STATUS (0: every entry served).
up_stop() { kill -TERM "$UP_PID"; UP_STATUS=0; wait "$UP_PID" || UP_STATUS=$?; }
# rec ARGS...: acpsnap-record through the proxy in front of the upstream.
rec() { ACPSNAP_UPSTREAM=$UP_URL ACPSNAP_UPSTREAM_KEY_ENV=FAKE_KEY acpsnap-record -d snap "$@"; }
tree_sum() { find snap -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; }
# no_key DIR...: the key is in no file beneath DIR... (grep: status 1, nothing found)
no_key() {
    run grep -rlaF -e "$KEY" "$@"
    assert_failure 1
    assert_output ''
}

@test "record-proxy: a transcript-only scenario is recorded through the proxy; three replays then pass" {
    up upstream.jsonl
    run -0 rec
    assert_line --regexp '^recorded +chat +[0-9.]+ s  \(wrote stdout.expected.jsonl provider.jsonl\)$'
    assert_line --regexp '^ok +hello +[0-9.]+ s  \(unchanged\)$'
    assert_line --regexp '^record: 2 scenarios: 2 passed, 0 failed, 0 skipped, 1 written \([0-9.]+ s\)$'
    up_stop
    assert_equal "$UP_STATUS" 0                 # the upstream served its whole script
    # the recording is the upstream's script, byte for byte
    cmp upstream.jsonl snap/chat/provider.jsonl
    run -0 jq -r 'select(.params.update.sessionUpdate == "agent_message_chunk") | .params.update.content.text' snap/chat/stdout.expected.jsonl
    assert_output HI
    ! grep -q OLD snap/chat/stdout.expected.jsonl
    [ "$(ls snap/chat)" = $'input.json\nprovider.jsonl\nstdout.expected.jsonl' ]
    run -0 fixture-guard snap
    local before k; before=$(tree_sum)
    for k in 1 2 3; do
        run -0 acpsnap-replay -d snap
        assert_line --regexp '^ok +chat +[0-9.]+ s$'
        assert_line --regexp '^replay: 2 scenarios: 2 passed, 0 failed, 0 skipped \([0-9.]+ s\)$'
        echo "$output" | grep -v -e '^slowest:' -e '^replay:' | sed 's/ [0-9.]* s$//' > verdicts$k
    done
    cmp verdicts1 verdicts2
    cmp verdicts2 verdicts3
    # each replay's transcript, byte for byte the committed one
    for k in 1 2 3; do
        acp-drive -p snap/agent.profile -o run$k snap/chat
        scrub --stdout --context run$k/run.json run$k/stdout.raw.jsonl > stdout$k
        cmp stdout$k snap/chat/stdout.expected.jsonl
    done
    assert_equal "$(tree_sum)" "$before"
    # recorded again from the same upstream: nothing changes
    up upstream.jsonl
    run -0 rec chat
    assert_line --regexp '^ok +chat +[0-9.]+ s  \(recorded; unchanged\)$'
    up_stop
    assert_equal "$(tree_sum)" "$before"
    no_key snap "$TMPDIR"
}

# fail_row NAME: a transcript-only scenario NAME whose one prompt fails.
fail_row() {
    echo "{\"name\":\"$1\",\"hasModelTurn\":true,\"recorded\":true,\"sessionLog\":false}" >> snap/scenarios.jsonl
    mkdir -p "snap/$1"
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"promptExpectError","text":"Say something."}]}\n' > "snap/$1/input.json"
    cp snap/chat/provider.jsonl snap/chat/stdout.expected.jsonl "snap/$1/"
}

@test "record-proxy: an upstream stream cut mid-way is recorded as a throw with its prefix, and replays" {
    fail_row cut
    echo '{"kind":"throw","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Part"}],"message":"cut","code":"TRANSPORT"}' > cut.jsonl
    up cut.jsonl
    run -0 rec cut
    assert_line --regexp '^recorded +cut +[0-9.]+ s  \(wrote stdout.expected.jsonl provider.jsonl\)$'
    up_stop
    assert_equal "$UP_STATUS" 0
    # the recording says what the proxy saw: the prefix, then the cut
    assert_equal "$(cat snap/cut/provider.jsonl)" '{"kind":"throw","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Part"}],"message":"the upstream connection was cut mid-stream","code":"TRANSPORT"}'
    # the agent's error, as its client library words the cut
    run -0 tail -1 snap/cut/stdout.expected.jsonl
    assert_output '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Transferred a partial file"}}'
    run -0 grep -c '"text":"Part"' snap/cut/stdout.expected.jsonl
    assert_output 1
    run -0 acpsnap-replay -d snap cut
    assert_line --regexp '^ok +cut +[0-9.]+ s$'
}

@test "record-proxy: upstream error answers (429, 500) are recorded as throws with their status, and replay" {
    fail_row limited
    fail_row broken
    printf '%s\n' '{"kind":"throw","chunks":[],"message":"Rate Limit Reached","code":"RATE_LIMIT","status":429}' > limited.jsonl
    printf '%s\n' '{"kind":"throw","chunks":[],"message":"model exploded","code":"PROVIDER","status":500}' > broken.jsonl
    up limited.jsonl
    run -0 rec limited
    assert_line --regexp '^recorded +limited +[0-9.]+ s  \(wrote stdout.expected.jsonl provider.jsonl\)$'
    up_stop
    up broken.jsonl
    run -0 rec broken
    assert_line --regexp '^recorded +broken +[0-9.]+ s  \(wrote stdout.expected.jsonl provider.jsonl\)$'
    up_stop
    assert_equal "$(cat snap/limited/provider.jsonl)" '{"kind":"throw","chunks":[],"message":"Rate Limit Reached","code":"RATE_LIMIT","status":429}'
    assert_equal "$(cat snap/broken/provider.jsonl)" '{"kind":"throw","chunks":[],"message":"model exploded","code":"SERVER","status":500}'
    # (the code is the one the status maps to, replay-serve(1) Recording:
    # a wire carries no PROVIDER)
    run -0 tail -1 snap/limited/stdout.expected.jsonl
    assert_output '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"HTTP 429: Rate Limit Reached"}}'
    run -0 tail -1 snap/broken/stdout.expected.jsonl
    assert_output '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"HTTP 500: model exploded"}}'
    run -0 acpsnap-replay -d snap limited broken
    assert_line --regexp '^ok +limited +[0-9.]+ s$'
    assert_line --regexp '^ok +broken +[0-9.]+ s$'
}

# tool_row NAME COMMAND: a transcript-only scenario NAME whose model runs
# COMMAND with bash, then says DONE; its upstream script in NAME.jsonl.
tool_row() {
    echo "{\"name\":\"$1\",\"hasModelTurn\":true,\"recorded\":true,\"sessionLog\":false}" >> snap/scenarios.jsonl
    mkdir -p "snap/$1"
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Run it."}]}\n' > "snap/$1/input.json"
    cp snap/chat/provider.jsonl snap/chat/stdout.expected.jsonl "snap/$1/"
    local args; args=$(jq -cn --arg c "$2" '{command: $c}')
    jq -cn --arg a "$args" '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"tool-call"},
      {type:"tool-call-delta",index:0,id:"call_1",name:"bash",argumentsDelta:$a},
      {type:"block-end",index:0,block:{type:"tool-call",id:"call_1",name:"bash",arguments:$a}},
      {type:"finish",reason:{kind:"tool-calls"}}]}' > "$1.jsonl"
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},{type:"text-delta",index:0,text:"DONE"},
      {type:"block-end",index:0,block:{type:"text",text:"DONE"}},{type:"finish",reason:{kind:"stop"}}]}' >> "$1.jsonl"
}

@test "record-proxy: make record through the make fragment records through the proxy too" {
    printf 'ACPSNAP_SNAPSHOTS := snap\nACPSNAP_BIN := %s\ninclude %s\n' "$BIN" "$ROOT/share/acpsnap.mk" > Makefile
    up upstream.jsonl
    ACPSNAP_UPSTREAM=$UP_URL ACPSNAP_UPSTREAM_KEY_ENV=FAKE_KEY run -0 make -s record SCENARIO=chat
    assert_line --regexp '^recorded +chat +[0-9.]+ s  \(wrote stdout.expected.jsonl provider.jsonl\)$'
    up_stop
    cmp upstream.jsonl snap/chat/provider.jsonl
    run -0 make -s replay
    assert_line --regexp '^replay: 2 scenarios: 2 passed, 0 failed, 0 skipped \([0-9.]+ s\)$'
    # without ACPSNAP_UPSTREAM (nor ACPSNAP_PROVIDER) there is nothing to record it from
    DEEPSEEK_API_KEY=sk-unused-here run -2 make -s record SCENARIO=chat
    assert_line --partial 'chat is a "sessionLog": false scenario: its provider.jsonl is recorded through replay-serve'"'"'s recording proxy: set ACPSNAP_UPSTREAM'
}

@test "record-proxy: the upstream key reaches no file: fixtures, kept runs, reports, pending, temporary files, output" {
    # the agent (a wrapper that dumps its environment into seen/) and the
    # profile's expansions do not see the key: the proxy has it
    mkdir seen
    printf '#!/bin/sh\nenv > "%s/seen/agent.$$"\nexec "%s/agent" "$@"\n' "$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR" > wrap
    chmod +x wrap
    sed -i "s|^command = .*|command = $BATS_TEST_TMPDIR/wrap|" snap/agent.profile
    echo 'record.env = PEEK=${FAKE_KEY:-hidden}' >> snap/agent.profile
    up upstream.jsonl
    run -0 rec --keep kept --report junit:r.xml --report tap:r.tap chat
    assert_line --regexp '^recorded +chat '
    up_stop
    assert_equal "$UP_STATUS" 0
    cmp upstream.jsonl snap/chat/provider.jsonl
    # the recording run and its two replays
    [ "$(ls seen | wc -l)" = 3 ]
    run -0 bash -c "grep -h -e '^PEEK=' -e '^DEEPSEEK_API_KEY=' seen/* | LC_ALL=C sort"
    assert_output $'DEEPSEEK_API_KEY=unused\nDEEPSEEK_API_KEY=unused\nDEEPSEEK_API_KEY=unused-by-the-proxy\nPEEK=hidden'
    # what the proxy left in the kept run: its recording and its log, no key
    [ -s kept/chat/provider.jsonl ] && [ -s kept/chat/replay-serve.log ]
    no_key snap seen kept r.xml r.tap "$TMPDIR"
    refute_output --partial "$KEY"
    # a failing replay's pending entry holds none either
    sed -i 's/"HI"/"HO"/' snap/chat/stdout.expected.jsonl
    run -1 acpsnap-replay -d snap chat
    [ -d .acpsnap/pending/chat ]
    no_key snap .acpsnap "$TMPDIR"
}

@test "record-proxy: a recording that holds the upstream key is refused, and nothing is written" {
    # the upstream's model says the key: it would land in provider.jsonl and the transcript
    jq -c --arg k "$KEY" '.chunks |= map(if .type == "text-delta" then .text = $k elif .type == "block-end" then .block.text = $k else . end)' \
        <(tail -1 upstream.jsonl) > says.jsonl
    head -1 upstream.jsonl | cat - says.jsonl > leak.jsonl
    local before; before=$(tree_sum)
    up leak.jsonl
    run -1 rec chat
    up_stop
    assert_line --regexp '^FAIL +chat +[0-9.]+ s$'
    assert_line '    chat/stdout.expected.jsonl: the recording holds the provider key ($DEEPSEEK_API_KEY, ACPSNAP_PROVIDER_KEY or $FAKE_KEY); nothing written'
    assert_line '    chat/provider.jsonl: the recording holds the provider key ($DEEPSEEK_API_KEY, ACPSNAP_PROVIDER_KEY or $FAKE_KEY); nothing written'
    refute_output --partial "$KEY"
    assert_equal "$(tree_sum)" "$before"
    no_key snap "$TMPDIR"
    # the same variable for both keys is named once
    up leak.jsonl
    ACPSNAP_KEY_VAR=FAKE_KEY run -1 rec chat
    up_stop
    assert_line '    chat/provider.jsonl: the recording holds the provider key ($FAKE_KEY or ACPSNAP_PROVIDER_KEY); nothing written'
    assert_equal "$(tree_sum)" "$before"
}

@test "record-proxy: a record whose replays disagree writes nothing" {
    tool_row noise 'od -An -N8 -tx1 /dev/urandom'
    local before; before=$(tree_sum)
    up noise.jsonl
    run -1 rec noise
    up_stop
    assert_equal "$UP_STATUS" 0
    assert_line --regexp '^FAIL +noise +[0-9.]+ s$'
    assert_line '    the recording does not replay deterministically; nothing written:'
    assert_line '    --- recorded'
    assert_line '    +++ replay'
    assert_equal "$(tree_sum)" "$before"
    [ -z "$(find snap -name '*.acpsnap-*')" ]
    [ -z "$(ls -A "$TMPDIR")" ]
}

@test "record-proxy: a record killed while the agent runs, or once staged, leaves the scenario as it was" {
    local before; before=$(tree_sum)
    # killed mid-call: the upstream hangs
    echo '{"kind":"hang"}' > hang.jsonl
    up hang.jsonl
    ACPSNAP_UPSTREAM=$UP_URL ACPSNAP_UPSTREAM_KEY_ENV=FAKE_KEY setsid acpsnap-record -d snap chat > rec.out 2>&1 &
    local pid=$! i
    sleep 1     # the agent waits on the hanging stream
    kill -TERM -- -"$pid"
    wait "$pid" || true
    sleep 0.2
    kill -9 "$UP_PID"; wait "$UP_PID" || true
    assert_equal "$(tree_sum)" "$before"
    [ -z "$(find snap -name '*.acpsnap-*')" ]
    [ -z "$(ls -A "$TMPDIR")" ] || { ls -la "$TMPDIR"; return 1; }
    # killed once the new directory is staged, before the swap
    up upstream.jsonl
    ACPSNAP_TEST_PAUSE_BEFORE_SWAP=$BATS_TEST_TMPDIR/pause ACPSNAP_UPSTREAM=$UP_URL ACPSNAP_UPSTREAM_KEY_ENV=FAKE_KEY \
        setsid acpsnap-record -d snap chat > rec.out 2>&1 &
    pid=$!
    for i in $(seq 1000); do [ -e pause ] && break; sleep 0.02; done
    [ -e pause ] || { cat rec.out; fail "the record never paused"; }
    local stage; stage=$(echo snap/.chat.acpsnap-new.*)
    [ -d "$stage" ] && cmp upstream.jsonl "$stage/provider.jsonl"
    kill -9 -- -"$pid"
    wait "$pid" || true
    up_stop
    rm pause
    assert_equal "$(tree_sum | grep -v '\.acpsnap-new\.')" "$before"
    # the next write run clears the staging entry, and records
    up upstream.jsonl
    run -0 rec chat
    assert_line "acpsnap-replay: $BATS_TEST_TMPDIR/$stage: removed a staging entry left by an interrupted record/refresh"
    assert_line --regexp '^recorded +chat '
    up_stop
    cmp upstream.jsonl snap/chat/provider.jsonl
    [ -z "$(find snap -name '*.acpsnap-*')" ]
}

@test "record-proxy: bad settings are refused with exact messages, before anything runs" {
    local before; before=$(tree_sum)
    CI= ACPSNAP_UPSTREAM=http://127.0.0.1:9 ACPSNAP_UPSTREAM_KEY_ENV=NO_SUCH_KEY run -2 --separate-stderr acpsnap-record -d snap
    assert_equal "$stderr" 'acpsnap-replay: record needs the upstream key in $NO_SUCH_KEY (ACPSNAP_UPSTREAM_KEY_ENV)'
    CI= ACPSNAP_UPSTREAM=http://127.0.0.1:9 ACPSNAP_UPSTREAM_KEY_ENV='A-B' run -2 --separate-stderr acpsnap-record -d snap
    assert_equal "$stderr" 'acpsnap-replay: ACPSNAP_UPSTREAM_KEY_ENV must name an environment variable'
    CI=1 ACPSNAP_UPSTREAM=http://127.0.0.1:9 ACPSNAP_UPSTREAM_KEY_ENV=FAKE_KEY run -2 --separate-stderr acpsnap-record -d snap
    assert_equal "$stderr" 'acpsnap-replay: record refuses to run under CI against a live provider (set ACPSNAP_PROVIDER=replay-serve to record from provider scripts)'
    # the agent's own key is not needed: the proxy sends the upstream's
    # (here none); a profile that does not say provider = replay-serve runs
    # no proxy, so nothing is run
    sed -i 's/^provider = replay-serve$/provider = agent/' snap/agent.profile
    ACPSNAP_UPSTREAM=http://127.0.0.1:9 run -2 acpsnap-record -d snap chat
    assert_line --regexp '^FAIL +chat +[0-9.]+ s$'
    assert_line "    chat is a \"sessionLog\": false scenario, recorded through replay-serve's recording proxy (ACPSNAP_UPSTREAM), but the profile $BATS_TEST_TMPDIR/snap/agent.profile does not say provider = replay-serve; nothing was run"
    assert_equal "$(tree_sum | grep -v agent.profile)" "$(grep -v agent.profile <<<"$before")"
    # the provider key is read through the profile's includes, the last one counting
    sed 's/^provider = agent$/provider = replay-serve/' snap/agent.profile > base.profile
    printf '%s\n' 'provider = agent' 'include = ../base.profile' > snap/agent.profile
    up upstream.jsonl
    run -0 rec chat
    assert_line --regexp '^recorded +chat '
    up_stop
    cmp upstream.jsonl snap/chat/provider.jsonl
}

@test "record-proxy: replay of the recorded scenario in a namespace with loopback alone passes: replay makes no other connection" {
    command -v unshare >/dev/null && unshare -rn true 2>/dev/null || skip "unshare -rn (a new user and network namespace) is not available here"
    command -v ip >/dev/null || skip "ip(8) is not installed: loopback cannot be brought up in the namespace"
    up upstream.jsonl
    run -0 rec chat
    assert_line --regexp '^recorded +chat '
    up_stop
    local before; before=$(tree_sum)
    # the namespace has no route off the machine (the control), and replay
    # passes in it, with the upstream's address still in the environment
    run unshare -rn bash -c 'ip link set lo up && curl -sS --max-time 5 -o /dev/null http://192.0.2.1/ 2>&1'
    assert_failure
    assert_output --partial 'Failed to connect to 192.0.2.1'
    ACPSNAP_UPSTREAM=$UP_URL run -0 unshare -rn bash -c 'ip link set lo up && acpsnap-replay -d snap'
    assert_line --regexp '^ok +chat +[0-9.]+ s$'
    assert_line --regexp '^ok +hello +[0-9.]+ s$'
    assert_line --regexp '^replay: 2 scenarios: 2 passed, 0 failed, 0 skipped \([0-9.]+ s\)$'
    assert_equal "$(tree_sum)" "$before"
}
