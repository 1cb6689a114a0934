#!/usr/bin/env bats
# The pipelines (acpsnap-replay/-record/-refresh/-update and share/acpsnap.mk
# under its plain target names; test/make-fragment.bats has the fragment itself)
# end to end with the reference agent, on a small snapshots tree built here:
# recorded through replay-serve from authored provider scripts, then replayed.
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    pipeline_setup --agent snap/handshake snap/text-turn snap/tool-turn
    sed "s|^command = .*|command = $BATS_TEST_TMPDIR/agent|" "$ROOT/scenarios/acpsnap-agent.profile" > snap/agent.profile
    printf '%s\n' '{"name":"handshake","hasModelTurn":false,"recorded":false}' \
        '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}' \
        '{"name":"tool-turn","hasModelTurn":true,"recorded":true}' > snap/scenarios.jsonl
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"}]}\n' > snap/handshake/input.json
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Reply with PONG."}]}\n' > snap/text-turn/input.json
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Run echo HI."}]}\n' > snap/tool-turn/input.json
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},{type:"text-delta",index:0,text:"PO"},
      {type:"text-delta",index:0,text:"N"},{type:"text-delta",index:0,text:"G"},
      {type:"block-end",index:0,block:{type:"text",text:"PONG"}},{type:"usage",usage:{inputTokens:10,outputTokens:3}},
      {type:"finish",reason:{kind:"stop"}}]}' > snap/text-turn/provider.jsonl
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"tool-call"},
      {type:"tool-call-delta",index:0,id:"call_1",name:"bash",argumentsDelta:""},
      {type:"tool-call-delta",index:0,id:"call_1",name:"bash",argumentsDelta:"{\"command\":"},
      {type:"tool-call-delta",index:0,id:"call_1",name:"bash",argumentsDelta:"\"echo HI\"}"},
      {type:"block-end",index:0,block:{type:"tool-call",id:"call_1",name:"bash",arguments:"{\"command\":\"echo HI\"}"}},
      {type:"finish",reason:{kind:"tool-calls"}}]}' > snap/tool-turn/provider.jsonl
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},{type:"text-delta",index:0,text:"HI"},
      {type:"block-end",index:0,block:{type:"text",text:"HI"}},{type:"finish",reason:{kind:"stop"}}]}' >> snap/tool-turn/provider.jsonl
    printf 'ACPSNAP_SNAPSHOTS := snap\nACPSNAP_BIN := %s\ninclude %s\n' "$BIN" "$ROOT/share/acpsnap.mk" > Makefile
}

record_all() { ACPSNAP_PROVIDER=replay-serve run -0 make -s record; }
tree_sum() { find snap -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; }

@test "pipelines: record from provider scripts, then replay passes and writes nothing" {
    record_all
    assert_line --regexp '^recorded +handshake .*\(wrote stdout.expected.jsonl session.jsonl\)$'
    assert_line --regexp '^recorded +text-turn .*\(wrote stdout.expected.jsonl session.jsonl text-turn/system-prompt.expected.md text-turn/tool-schemas.expected.json\)$'
    assert_line --regexp '^record: 3 scenarios: 3 passed, 0 failed, 0 skipped, 3 written'
    run -0 fixture-guard snap
    local before; before=$(tree_sum)
    run -0 make -s replay
    assert_line --regexp '^ok +handshake +[0-9.]+ s$'
    assert_line --regexp '^ok +text-turn +[0-9.]+ s$'
    assert_line --regexp '^ok +tool-turn +[0-9.]+ s$'
    assert_line --regexp '^replay: 3 scenarios: 3 passed, 0 failed, 0 skipped \([0-9.]+ s\)$'
    assert_equal "$(tree_sum)" "$before"
    [ -z "$(ls -A "$TMPDIR")" ]
    run -0 make -s -j2 replay
    assert_line --regexp '^replay: 3 scenarios: 3 passed'
}

@test "pipelines: recording again against replay-serve reproduces the fixtures byte for byte" {
    record_all
    local before; before=$(tree_sum)
    record_all
    assert_line --regexp '^ok +text-turn .*\(recorded; unchanged\)$'
    assert_equal "$(tree_sum)" "$before"
}

@test "pipelines: a scenario replays to byte-identical raw-normalized outputs" {
    record_all
    for k in 1 2; do
        acp-drive -p snap/agent.profile -o run$k snap/tool-turn
        scrub --stdout --context run$k/run.json run$k/stdout.raw.jsonl > stdout$k
        scrub --session --context run$k/run.json run$k/session.jsonl > log$k
    done
    cmp stdout1 stdout2
    cmp log1 log2
    cmp stdout1 snap/tool-turn/stdout.expected.jsonl
}

@test "pipelines: a broken agent fails exactly the scenarios it breaks, with a diff" {
    record_all
    # the same agent with one string patched: its tool_call updates change
    sed 's/"status":"pending"/"status":"pendinG"/' agent > broken-agent
    cmp -s broken-agent agent && skip "no patchable string in this agent build"
    chmod +x broken-agent
    sed "s|^command = .*|command = $BATS_TEST_TMPDIR/broken-agent|" snap/agent.profile > broken.profile
    run -1 acpsnap-replay -d snap -p broken.profile
    assert_line --regexp '^ok +handshake '
    assert_line --regexp '^ok +text-turn '
    assert_line --regexp '^FAIL +tool-turn '
    assert_line --regexp '^    \+\+\+ tool-turn/stdout \(this run\)$'
    assert_line --regexp '^    line [0-9]+( → [0-9]+)? \$\.params\.update\.status: "pending" → "pendinG"$'
    assert_line '    to accept this output: make refresh SCENARIO=tool-turn'
    assert_line --regexp '^replay: 3 scenarios: 2 passed, 1 failed, 0 skipped'
}

@test "pipelines: replay checks each header against its class pin's sidecars" {
    record_all
    cp snap/text-turn/system-prompt.expected.md prompt.saved
    sed -i '1s/$/ (edited)/' snap/text-turn/system-prompt.expected.md
    run -0 fixture-guard snap
    run -1 acpsnap-replay -d snap
    assert_line --regexp '^ok +handshake '
    assert_line --regexp '^FAIL +text-turn '
    assert_line --regexp '^    session\.jsonl:[0-9]+: header 1 \(request/header seq [0-9]+\) differs from its pin text-turn/system-prompt\.expected\.md$'
    # tool-turn is of the same class: the same pin
    assert_line --regexp '^FAIL +tool-turn '
    refute_line --partial 'to accept this output'
    cp prompt.saved snap/text-turn/system-prompt.expected.md
    jq '.initial[0].name = "renamed"' snap/text-turn/tool-schemas.expected.json > schemas.json
    [ "$(jq -r '.initial[0].name' schemas.json)" = renamed ]
    cp schemas.json snap/text-turn/tool-schemas.expected.json
    run -1 acpsnap-replay -d snap text-turn
    assert_line --regexp '^    session\.jsonl:[0-9]+: header 1 \(request/header seq [0-9]+\) differs from its pin text-turn/tool-schemas\.expected\.json$'
}

@test "pipelines: replay fails on UNKNOWN_TOOL in a harvested log and on a changed header the row does not expect" {
    record_all
    # the agent, then one unknown-tool result and a repeat of the first header
    # as a change, appended to each log it persisted
    cat > wrapped-agent <<SH
#!/bin/sh
ACPSNAP_PERSISTENCE=raw "$BATS_TEST_TMPDIR/agent"
rc=\$?
for f in "\$ACPSNAP_SESSIONS_ROOT"/*/session.jsonl; do
    printf '%s\n' '{"type":"tool/result","seq":90,"data":{"message":{"source":{"callId":"call_9"}},"error":{"code":"UNKNOWN_TOOL"}}}' >> "\$f"
    jq -c 'select(.type == "request/header") | .seq = 91 | .data.reason = "change"' "\$f" | head -1 > "\$f.more"
    cat "\$f.more" >> "\$f" && rm "\$f.more"
done
exit \$rc
SH
    chmod +x wrapped-agent
    sed "s|^command = .*|command = $BATS_TEST_TMPDIR/wrapped-agent|" snap/agent.profile > wrapped.profile
    run -1 acpsnap-replay -d snap -p wrapped.profile
    assert_line --regexp '^FAIL +handshake '
    assert_line --regexp '^FAIL +text-turn '
    assert_line --regexp '^    session\.jsonl:[0-9]+: UNKNOWN_TOOL: a tool result names a tool the agent does not have; a snapshot scenario must not accept one$'
    assert_line '    session.jsonl: 1 header changed; the row expects 0'
    # the checks alone, on one run: a pin that declares the change has no
    # second header, nor a second section for it
    acp-drive -p wrapped.profile -o run snap/text-turn
    run -1 sidecar-dedupe --verify run snap text-turn
    assert_output --regexp '^session\.jsonl:[0-9]+: UNKNOWN_TOOL: a tool result names a tool the agent does not have; a snapshot scenario must not accept one
session\.jsonl: 1 header changed; the row expects 0$'
    cp -r snap snap2
    jq -c 'if .name == "text-turn" then .expectedHeaderChanges = 1 else . end' snap/scenarios.jsonl > snap2/scenarios.jsonl
    run -1 sidecar-dedupe --verify run snap2 text-turn
    assert_output --regexp '^session\.jsonl:[0-9]+: UNKNOWN_TOOL: a tool result names a tool the agent does not have; a snapshot scenario must not accept one
session\.jsonl:[0-9]+: header 2 \(request/header seq 91\) differs from its pin text-turn/session\.jsonl
session\.jsonl:[0-9]+: header 2 \(request/header seq 91\) differs from its pin text-turn/system-prompt\.expected\.md
session\.jsonl:[0-9]+: header 2 \(request/header seq 91\) differs from its pin text-turn/tool-schemas\.expected\.json$'
    run -1 sidecar-dedupe --verify run snap2 handshake
    assert_output --regexp '^session\.jsonl:[0-9]+: UNKNOWN_TOOL: .*$'
    run -2 sidecar-dedupe --verify run snap2 nosuch
    run -0 sidecar-dedupe --verify "$BATS_TEST_TMPDIR/empty" snap text-turn
}

@test "pipelines: a row with prepareWorkspace runs the profile's prepare hook, in record and replay" {
    jq -c 'if .name == "handshake" then .prepareWorkspace = true else . end' snap/scenarios.jsonl > t && mv t snap/scenarios.jsonl
    printf '#!/bin/sh\ntouch -d @1000000000 prepared && echo "$ACPSNAP_SCENARIO $(basename "$ACPSNAP_SNAPSHOTS")" >> %s/hook.log\n' "$BATS_TEST_TMPDIR" > snap/prep.sh
    chmod +x snap/prep.sh
    cp snap/agent.profile plain.profile
    printf 'prepare = ./prep.sh\n' >> snap/agent.profile
    record_all
    # the recording, then its two checking replays in a staged copy
    assert_equal "$(cat hook.log)" 'handshake snap
handshake stage
handshake stage'
    run -0 acpsnap-replay -d snap
    assert_equal "$(wc -l < hook.log)" 4
    run -2 acpsnap-replay -d snap -p plain.profile handshake
    assert_line --regexp '^FAIL +handshake '
    assert_line "    acp-drive: handshake: the row sets prepareWorkspace, but the profile $BATS_TEST_TMPDIR/plain.profile has no prepare hook"
}

@test "pipelines: refresh rewrites only what changed; update only stdout" {
    record_all
    local stdout_before; stdout_before=$(sha256sum < snap/text-turn/stdout.expected.jsonl)
    sed -i 's/Reply with PONG./Reply with PONG, please./' snap/text-turn/input.json
    run -1 acpsnap-replay -d snap text-turn
    assert_line --regexp '^FAIL +text-turn'
    run -1 acpsnap-update -d snap text-turn
    assert_line '    session fixtures are written only by: make refresh SCENARIO=text-turn (or make record)'
    run -0 make -s refresh
    assert_line --regexp '^refreshed +text-turn .*\(wrote session.jsonl\)$'
    assert_line --regexp '^ok +tool-turn .*\(unchanged\)$'
    assert_equal "$(sha256sum < snap/text-turn/stdout.expected.jsonl)" "$stdout_before"
    grep -q 'PONG, please' snap/text-turn/session.jsonl
    run -0 make -s refresh
    refute_output --partial refreshed
    # update: a stale stdout expectation is rewritten, nothing else
    printf '{"stale":true}\n' > snap/handshake/stdout.expected.jsonl
    local log_before; log_before=$(sha256sum < snap/handshake/session.jsonl)
    run -0 make -s update
    assert_line --regexp '^updated +handshake .*\(wrote stdout.expected.jsonl\)$'
    assert_equal "$(sha256sum < snap/handshake/session.jsonl)" "$log_before"
    run -0 make -s replay
}

@test "pipelines: fixture-guard runs first" {
    record_all
    rm snap/handshake/stdout.expected.jsonl
    run -1 --separate-stderr acpsnap-replay -d snap
    assert_equal "$output" ''
    assert_equal "$stderr" "fixture-guard: $BATS_TEST_TMPDIR/snap/handshake/stdout.expected.jsonl: missing; every scenario needs its expected stdout
acpsnap-replay: fixture-guard failed; nothing was run"
    # what -j1 starts beside the guard (its results directory, its server) is gone
    [ -z "$(ls -A "$TMPDIR")" ]
    run -2 --separate-stderr acpsnap-replay -d snap -j1 no-such
    assert_equal "$stderr" "acpsnap-replay: no scenario matches no-such"
    [ -z "$(ls -A "$TMPDIR")" ]
}

@test "pipelines: trouble outranks failure: a bad profile exits 2, at -j1 and -j2" {
    record_all
    cp snap/agent.profile bad.profile
    echo 'not a key value line' >> bad.profile
    run -2 acpsnap-replay -d snap -p bad.profile
    assert_line --regexp '^FAIL +text-turn '
    assert_line --regexp '^    acp-drive: .*/bad.profile:[0-9]+: expected key = value$'
    assert_line --regexp '^replay: 3 scenarios: 0 passed, 3 failed, 0 skipped'
    run -2 acpsnap-replay -d snap -p bad.profile -j 2
    assert_line --regexp '^replay: 3 scenarios: 0 passed, 3 failed, 0 skipped'
    # the make fragment passes the status on (make itself says 2 for any failure)
    run -2 make -s replay ACPSNAP_PROFILE=bad.profile
    # an agent that cannot be started is trouble too
    sed "s|^command = .*|command = $BATS_TEST_TMPDIR/no-such-agent|" snap/agent.profile > gone.profile
    run -2 acpsnap-replay -d snap -p gone.profile handshake
}

@test "pipelines: record refuses under CI against a live provider, and without a key" {
    CI=1 run -2 --separate-stderr acpsnap-record -d snap
    assert_equal "$stderr" 'acpsnap-replay: record refuses to run under CI against a live provider (set ACPSNAP_PROVIDER=replay-serve to record from provider scripts)'
    CI= DEEPSEEK_API_KEY= run -2 --separate-stderr acpsnap-record -d snap
    assert_equal "$stderr" 'acpsnap-replay: record needs a provider key in $DEEPSEEK_API_KEY'
    [ ! -e snap/text-turn/session.jsonl ]
}

@test "pipelines: a recording that does not consume its provider script writes nothing" {
    record_all
    local before; before=$(tree_sum)
    jq -c . snap/text-turn/provider.jsonl > extra.jsonl     # one call too many
    cat extra.jsonl >> snap/text-turn/provider.jsonl
    ACPSNAP_PROVIDER=replay-serve run -1 acpsnap-record -d snap text-turn
    assert_line --regexp '^FAIL +text-turn'
    assert_line "    replay-serve: $BATS_TEST_TMPDIR/snap/text-turn/provider.jsonl: 1 of 2 entries not consumed"
    head -1 snap/text-turn/provider.jsonl > p && mv p snap/text-turn/provider.jsonl
    assert_equal "$(tree_sum)" "$before"
}

@test "pipelines: interrupting record leaves the committed fixtures untouched" {
    record_all
    local before; before=$(tree_sum)
    printf '%s\n' '{"kind":"hang"}' > snap/text-turn/provider.jsonl
    ACPSNAP_PROVIDER=replay-serve setsid acpsnap-record -d snap text-turn > rec.out 2>&1 &
    local pid=$!
    sleep 1
    kill -TERM -- -"$pid"
    wait "$pid" || true
    sleep 0.2
    assert_equal "$(tree_sum | grep -v provider.jsonl)" "$(grep -v provider.jsonl <<<"$before")"
    [ -z "$(find snap -name '*.acpsnap-*')" ]
    [ -z "$(ls -A "$TMPDIR")" ] || { ls -la "$TMPDIR"; return 1; }
}

@test "pipelines: a write replaces the scenario directory whole; the files it keeps stay the same files" {
    record_all
    sed -i 's/Reply with PONG./Reply with PONG, please./' snap/text-turn/input.json
    local keep; keep=$(stat -c '%i %n' snap/text-turn/input.json snap/text-turn/provider.jsonl snap/text-turn/stdout.expected.jsonl)
    local dir_ino; dir_ino=$(stat -c %i snap/text-turn)
    local old_log; old_log=$(sha256sum < snap/text-turn/session.jsonl)
    # the test hook: staged, not yet swapped
    ACPSNAP_TEST_PAUSE_BEFORE_SWAP=$BATS_TEST_TMPDIR/pause acpsnap-refresh -d snap text-turn > refresh.out 2>&1 &
    local pid=$! i
    for i in $(seq 1000); do [ -e pause ] && break; sleep 0.02; done
    [ -e pause ] || { cat refresh.out; fail "the refresh never paused"; }
    local stage; stage=$(echo snap/.text-turn.acpsnap-new.*)
    [ -d "$stage" ] || fail "no staging directory: $stage"
    grep -q 'PONG, please' "$stage/session.jsonl"
    assert_equal "$(sha256sum < snap/text-turn/session.jsonl)" "$old_log"
    assert_equal "$(stat -c %i "$stage/input.json")" "$(stat -c %i snap/text-turn/input.json)"
    run -1 fixture-guard snap
    assert_line "fixture-guard: $stage: a staging directory left by an interrupted record/refresh; remove it"
    rm pause
    wait "$pid"
    run cat refresh.out
    assert_line --regexp '^refreshed +text-turn .*\(wrote session.jsonl\)$'
    grep -q 'PONG, please' snap/text-turn/session.jsonl
    assert_equal "$(stat -c '%i %n' snap/text-turn/input.json snap/text-turn/provider.jsonl snap/text-turn/stdout.expected.jsonl)" "$keep"
    [ "$(stat -c %i snap/text-turn)" != "$dir_ino" ]
    [ -z "$(find snap -name '*.acpsnap-*')" ]
    run -0 fixture-guard snap
}

@test "pipelines: staging entries an interrupted write left: fixture-guard reports them, replay refuses, the next write run clears them" {
    record_all
    local before; before=$(tree_sum)
    mkdir snap/.tool-turn.acpsnap-new.4242
    printf '{}\n' > snap/.tool-turn.acpsnap-new.4242/stdout.expected.jsonl
    printf '{}\n' > snap/handshake/.stdout.expected.jsonl.acpsnap-new    # as earlier versions left them
    run -1 fixture-guard snap
    assert_output "fixture-guard: snap/.tool-turn.acpsnap-new.4242: a staging directory left by an interrupted record/refresh; remove it
fixture-guard: snap/handshake/.stdout.expected.jsonl.acpsnap-new: a staging file left by an interrupted record/refresh; remove it"
    run -1 --separate-stderr acpsnap-replay -d snap
    assert_equal "$output" ''
    assert_equal "${stderr##*$'\n'}" 'acpsnap-replay: fixture-guard failed; nothing was run'
    run -0 --separate-stderr acpsnap-update -d snap handshake
    assert_equal "$stderr" "acpsnap-replay: $BATS_TEST_TMPDIR/snap/.tool-turn.acpsnap-new.4242: removed a staging entry left by an interrupted record/refresh
acpsnap-replay: $BATS_TEST_TMPDIR/snap/handshake/.stdout.expected.jsonl.acpsnap-new: removed a staging entry left by an interrupted record/refresh"
    assert_equal "$(tree_sum)" "$before"
    run -0 fixture-guard snap
}

@test "pipelines: a scenario left missing between the exchange fallback's renames is restored by the next write run" {
    record_all
    local before; before=$(tree_sum)
    # killed between renames 1 and 2: the old directory aside, the new one staged
    mv snap/text-turn snap/.text-turn.acpsnap-old.4242
    cp -a snap/.text-turn.acpsnap-old.4242 snap/.text-turn.acpsnap-new.4241
    printf '{}\n' > snap/.text-turn.acpsnap-new.4241/stdout.expected.jsonl
    run -1 fixture-guard snap
    assert_line "fixture-guard: snap/.text-turn.acpsnap-new.4241: a staging directory left by an interrupted record/refresh; remove it"
    assert_line "fixture-guard: snap/.text-turn.acpsnap-old.4242: the whole previous text-turn, left by an interrupted record/refresh between two renames; rename it to snap/text-turn (the next record, refresh or update does)"
    assert_line --regexp '^fixture-guard: snap/text-turn: missing scenario directory for table row 2; '
    run -0 --separate-stderr acpsnap-refresh -d snap handshake
    assert_equal "$stderr" "acpsnap-replay: $BATS_TEST_TMPDIR/snap/text-turn: restored from $BATS_TEST_TMPDIR/snap/.text-turn.acpsnap-old.4242, left by an interrupted record/refresh
acpsnap-replay: $BATS_TEST_TMPDIR/snap/.text-turn.acpsnap-new.4241: removed a staging entry left by an interrupted record/refresh"
    assert_equal "$(tree_sum)" "$before"
    # killed between renames 2 and 3: the new directory in place, the old one aside
    cp -a snap/text-turn snap/.text-turn.acpsnap-old.4243
    run -1 fixture-guard snap
    assert_output "fixture-guard: snap/.text-turn.acpsnap-old.4243: a staging directory left by an interrupted record/refresh; remove it"
    ACPSNAP_PROVIDER=replay-serve run -0 acpsnap-record -d snap handshake
    assert_line "acpsnap-replay: $BATS_TEST_TMPDIR/snap/.text-turn.acpsnap-old.4243: removed a staging entry left by an interrupted record/refresh"
    assert_equal "$(tree_sum)" "$before"
    run -0 fixture-guard snap
}
