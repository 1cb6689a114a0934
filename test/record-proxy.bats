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
