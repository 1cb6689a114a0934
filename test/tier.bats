#!/usr/bin/env bats
# The two scenario tiers (acpsnap-scenarios(5), "sessionLog"): a
# transcript-only scenario is input.json, stdout.expected.jsonl and
# provider.jsonl, replayed by replay-serve to an agent that persists no log
# acpsnap reads, and compared on its stdout alone. The reference agent plays
# such an agent here, in its live mode against replay-serve.
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    pipeline_setup --agent snap/chat snap/hello
    printf '%s\n' "command = $BATS_TEST_TMPDIR/agent" 'provider = replay-serve' \
        'harvest = */session.jsonl */session.jsonl.zstd' 'replay.env = ACPSNAP_SNAPSHOT=live' \
        'replay.env = DEEPSEEK_BASE_URL=${ACPSNAP_PROVIDER_URL}' 'replay.env = DEEPSEEK_API_KEY=unused' > snap/agent.profile
    printf '%s\n' '{"name":"hello","hasModelTurn":false,"recorded":false,"sessionLog":false}' \
        '{"name":"chat","hasModelTurn":true,"recorded":false,"sessionLog":false}' > snap/scenarios.jsonl
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"}]}\n' > snap/hello/input.json
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Run echo HI."}]}\n' > snap/chat/input.json
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"tool-call"},
      {type:"tool-call-delta",index:0,id:"call_1",name:"bash",argumentsDelta:"{\"command\":"},
      {type:"tool-call-delta",index:0,id:"call_1",name:"bash",argumentsDelta:"\"echo HI\"}"},
      {type:"block-end",index:0,block:{type:"tool-call",id:"call_1",name:"bash",arguments:"{\"command\":\"echo HI\"}"}},
      {type:"finish",reason:{kind:"tool-calls"}}]}' > snap/chat/provider.jsonl
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},{type:"text-delta",index:0,text:"HI"},
      {type:"block-end",index:0,block:{type:"text",text:"HI"}},{type:"finish",reason:{kind:"stop"}}]}' >> snap/chat/provider.jsonl
    local s
    for s in hello chat; do     # the transcripts, as an author takes them from a first run
        acp-drive -p snap/agent.profile -o "first/$s" "snap/$s" 2>/dev/null
        scrub --stdout --context "first/$s/run.json" "first/$s/stdout.raw.jsonl" > "snap/$s/stdout.expected.jsonl"
    done
}

tree_sum() { find snap -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; }
# Replaces the first line of FILE that matches ERE with TEXT.
set_line() { # FILE ERE TEXT
    awk -v re="$2" -v t="$3" '!done && $0 ~ re { print t; done = 1; next } { print }' "$1" > "$1.new" && mv "$1.new" "$1"
}

@test "tier: a transcript-only scenario replays three times to the same stdout, harvests nothing, and passes" {
    # the transcript is the agent's: the tool call and the model's answer
    run -0 jq -r 'select(.params.update.sessionUpdate == "agent_message_chunk") | .params.update.content.text' snap/chat/stdout.expected.jsonl
    assert_output HI
    run -0 fixture-guard snap
    for k in 1 2 3; do
        acp-drive -p snap/agent.profile -o run$k snap/chat
        scrub --stdout --context run$k/run.json run$k/stdout.raw.jsonl > stdout$k
        run -0 jq -c '.sessionLogs' run$k/run.json
        assert_output '[]'
        [ -z "$(ls run$k | grep '^session')" ]
        run -0 jq -c '[.entry, .outcome]' run$k/replay-serve.log
        assert_output $'[0,"complete"]\n[1,"complete"]'
    done
    cmp stdout1 stdout2
    cmp stdout2 stdout3
    cmp stdout1 snap/chat/stdout.expected.jsonl
    local before; before=$(tree_sum)
    run -0 acpsnap-replay -d snap
    assert_line --regexp '^ok +hello +[0-9.]+ s$'
    assert_line --regexp '^ok +chat +[0-9.]+ s$'
    assert_line --regexp '^replay: 2 scenarios: 2 passed, 0 failed, 0 skipped \([0-9.]+ s\)$'
    assert_equal "$(tree_sum)" "$before"
}

@test "tier: a changed expected line fails the scenario with its diff" {
    local line; line=$(grep -m1 agent_message_chunk snap/chat/stdout.expected.jsonl)
    set_line snap/chat/stdout.expected.jsonl agent_message_chunk "${line/\"HI\"/\"HO\"}"
    run -1 acpsnap-replay -d snap chat
    assert_line --regexp '^FAIL +chat +[0-9.]+ s$'
    assert_line "    -${line/\"HI\"/\"HO\"}"
    assert_line "    +$line"
    assert_line --partial '$.params.update.content.text: "HO" → "HI"'
    assert_line "    to accept this output: make refresh SCENARIO=chat"
    assert_line --regexp '^replay: 1 scenario: 0 passed, 1 failed'
}

@test "tier: a provider entry the agent never asks for fails the scenario" {
    tail -1 snap/chat/provider.jsonl >> snap/chat/provider.jsonl
    run -0 fixture-guard snap
    run -1 acpsnap-replay -d snap chat
    assert_line --regexp '^FAIL +chat +[0-9.]+ s$'
    assert_line "    acp-drive: chat: replay-serve reported failures:"
    assert_line "    replay-serve: $BATS_TEST_TMPDIR/snap/chat/provider.jsonl: 1 of 3 entries not consumed"
    # acp-drive alone: exit 1, the same message
    run -1 --separate-stderr acp-drive -p snap/agent.profile -o run snap/chat
    assert_equal "$stderr" $'acp-drive: chat: replay-serve reported failures:\nreplay-serve: snap/chat/provider.jsonl: 1 of 3 entries not consumed'
}

@test "tier: fixture-guard reports a stray session log, an override and a log wait" {
    echo '{"type":"session","version":0}' > snap/chat/session.jsonl
    echo '{"type":"session","version":0}' > snap/chat/session.1.jsonl
    jsonl-pack -z snap/chat/session.jsonl > snap/chat/session.jsonl.zst
    echo '[]' > snap/chat/replay.override.json
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"x"},\n{"op":"waitForTurnEnd"}]}\n' > snap/chat/input.json
    run -1 --separate-stderr fixture-guard -n snap
    assert_equal "$stderr" "fixture-guard: snap/chat/session.1.jsonl: stray session log: the row sets \"sessionLog\": false, so nothing reads or compares it; delete it, or drop \"sessionLog\": false and record the scenario
fixture-guard: snap/chat/session.jsonl: stray session log: the row sets \"sessionLog\": false, so nothing reads or compares it; delete it, or drop \"sessionLog\": false and record the scenario
fixture-guard: snap/chat/session.jsonl.zst: stray session log: the row sets \"sessionLog\": false, so nothing reads or compares it; delete it, or drop \"sessionLog\": false and record the scenario
fixture-guard: snap/chat/replay.override.json: present, but a \"sessionLog\": false scenario is replayed from provider.jsonl alone; put its entries there and delete it
fixture-guard: snap/chat/input.json:2: steps[3] (waitForTurnEnd) waits on the session log, which a \"sessionLog\": false scenario does not have; wait on a file (waitForFile) instead"
    # acp-drive refuses the wait before it runs anything
    rm snap/chat/session* snap/chat/replay.override.json
    run -2 --separate-stderr acp-drive -p snap/agent.profile -o run snap/chat
    assert_equal "$stderr" "acp-drive: snap/chat/input.json:2: steps[3] (waitForTurnEnd) waits on the session log, which a \"sessionLog\": false scenario does not have; wait on a file (waitForFile) instead"
}

@test "tier: the session-log fields on a transcript-only row are row errors, and the pipelines refuse the table" {
    printf '%s\n' '{"name":"hello","hasModelTurn":false,"recorded":false,"sessionLog":false}' \
        '{"name":"chat","hasModelTurn":true,"recorded":false,"sessionLog":false,"pinsHeader":true,"headerClass":"x","comparesLog":true,"overridden":false,"systemPromptSource":"hello","toolSchemasSource":"hello","pinsChildSystemPrompts":[1],"pinsChildToolSchemas":[1],"expectedHeaderChanges":0}' > snap/scenarios.jsonl
    local m='does not apply to a "sessionLog": false scenario (no session log, header pins or sidecars); drop it'
    local want="fixture-guard: snap/scenarios.jsonl:2: field \"comparesLog\" $m
fixture-guard: snap/scenarios.jsonl:2: field \"overridden\" $m
fixture-guard: snap/scenarios.jsonl:2: field \"pinsHeader\" $m
fixture-guard: snap/scenarios.jsonl:2: field \"headerClass\" $m
fixture-guard: snap/scenarios.jsonl:2: field \"systemPromptSource\" $m
fixture-guard: snap/scenarios.jsonl:2: field \"toolSchemasSource\" $m
fixture-guard: snap/scenarios.jsonl:2: field \"pinsChildToolSchemas\" $m
fixture-guard: snap/scenarios.jsonl:2: field \"pinsChildSystemPrompts\" $m
fixture-guard: snap/scenarios.jsonl:2: field \"expectedHeaderChanges\" $m"
    run -1 --separate-stderr fixture-guard --table snap
    assert_equal "$stderr" "$want"
    run -2 --separate-stderr acpsnap-replay -d snap
    assert_equal "$stderr" "${want//snap\/scenarios/$BATS_TEST_TMPDIR/snap/scenarios}
acpsnap-replay: $BATS_TEST_TMPDIR/snap/scenarios.jsonl: the scenario table fails fixture-guard's table checks; nothing was run"
    # a row with no model turn and nothing else: no header class, so no pin wanted
    printf '%s\n' '{"name":"hello","hasModelTurn":false,"recorded":false,"sessionLog":false}' > snap/scenarios.jsonl
    run -0 fixture-guard --table snap
    run -0 fixture-guard --list snap
    assert_output $'hello\t-\tno-model,authored,no-session-log'
    # the field itself is a boolean
    printf '%s\n' '{"name":"hello","hasModelTurn":false,"recorded":false,"sessionLog":"no"}' > snap/scenarios.jsonl
    run -1 --separate-stderr fixture-guard --table snap
    assert_equal "$stderr" 'fixture-guard: snap/scenarios.jsonl:1: field "sessionLog" must be a boolean'
}

@test "tier: fixture-guard checks provider.jsonl as replay-serve loads it, with file:line[:col]" {
    jq -cn '{kind:"chunks",chunks:[{type:"text-delta",index:0},{type:"finish",reason:{kind:"stop"}}]}' >> snap/chat/provider.jsonl
    printf '%s\n' '{"kind":"chunks","chunks":[]} x' '{"kind":"chunk"}' >> snap/chat/provider.jsonl
    run -1 --separate-stderr fixture-guard -n snap
    assert_equal "$stderr" 'fixture-guard: snap/chat/provider.jsonl:3: entry 2 chunk 0 (text-delta): "text" must be a string (it is missing)
fixture-guard: snap/chat/provider.jsonl:4:31: invalid JSON: trailing characters after the value
fixture-guard: snap/chat/provider.jsonl:5:9: entry 4 has unknown kind "chunk"'
    # replay-serve says the same of the first, and acp-drive before it runs the agent
    run -2 --separate-stderr replay-serve snap/chat/provider.jsonl
    assert_equal "$stderr" 'replay-serve: snap/chat/provider.jsonl:3: entry 2 chunk 0 (text-delta): "text" must be a string (it is missing)'
    run -2 --separate-stderr acp-drive -p snap/agent.profile -o run snap/chat
    assert_equal "$stderr" 'acp-drive: snap/chat/provider.jsonl:3: entry 2 chunk 0 (text-delta): "text" must be a string (it is missing)'
    # missing, empty, and present without a model turn
    rm snap/chat/provider.jsonl
    : > snap/chat/provider.jsonl
    echo '{"kind":"hang"}' > snap/hello/provider.jsonl
    run -1 --separate-stderr fixture-guard -n snap
    assert_equal "$stderr" 'fixture-guard: snap/hello/provider.jsonl: present, but the row has no model turn ("hasModelTurn": false), so nothing serves it; delete it or set hasModelTurn
fixture-guard: snap/chat/provider.jsonl: empty; the scenario has a model turn, which needs at least one entry'
    rm snap/chat/provider.jsonl snap/hello/provider.jsonl
    run -1 --separate-stderr fixture-guard -n snap
    assert_equal "$stderr" 'fixture-guard: snap/chat/provider.jsonl: missing; a "sessionLog": false scenario with a model turn is replayed from its provider script (acpsnap-replay(5) entries, one a line)'
    run -2 --separate-stderr acp-drive -p snap/agent.profile -o run snap/chat
    assert_equal "$stderr" 'acp-drive: snap/chat/provider.jsonl: missing provider script (a "sessionLog": false scenario with a model turn is replayed from it)'
}

@test "tier: the lint reads a transcript-only scenario's provider.jsonl" {
    sed -i '2s/"HI"/"curl -H \\"Authorization: Bearer abc123def456ghi789\\" x"/' snap/chat/provider.jsonl
    local col; col=$(awk 'NR == 2 { print index($0, "Bearer") }' snap/chat/provider.jsonl)
    run -1 --separate-stderr fixture-guard snap
    assert_equal "$stderr" "fixture-guard: snap/chat/provider.jsonl:2:$col: a bearer token (Bearer abc1…, 25 bytes) in a fixture; remove it (and revoke it)"
}

@test "tier: a transcript-only scenario needs a profile with provider = replay-serve" {
    grep -v '^provider' snap/agent.profile > snap/plain.profile
    run -2 --separate-stderr acp-drive -p snap/plain.profile -o run snap/hello
    assert_equal "$stderr" 'acp-drive: snap/hello: a "sessionLog": false scenario is replayed from provider.jsonl by replay-serve, but the profile snap/plain.profile does not say provider = replay-serve'
    run -2 acpsnap-replay -d snap -p snap/plain.profile hello
    assert_line --regexp '^FAIL +hello +[0-9.]+ s$'
    assert_line '    acp-drive: '"$BATS_TEST_TMPDIR"'/snap/hello: a "sessionLog": false scenario is replayed from provider.jsonl by replay-serve, but the profile '"$BATS_TEST_TMPDIR"'/snap/plain.profile does not say provider = replay-serve'
}

@test "tier: both tiers in one table pass, through one profile" {
    # a session-log scenario beside them: the reference text-turn, its
    # session fixture and header pin, served from the derived script
    cp -r "$ROOT/scenarios/text-turn" snap/
    rm snap/text-turn/provider.jsonl
    echo '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}' >> snap/scenarios.jsonl
    run -0 fixture-guard snap
    run -0 fixture-guard --list snap
    assert_output $'hello\t-\tno-model,authored,no-session-log\nchat\t-\tmodel,authored,no-session-log\ntext-turn\tdefault\tpin,prompt-owner,schemas-owner,model,recorded,compares-log'
    local before; before=$(tree_sum)
    run -0 acpsnap-replay -d snap -j2
    assert_line --regexp '^\[[123]/3\] ok +hello '
    assert_line --regexp '^\[[123]/3\] ok +chat '
    assert_line --regexp '^\[[123]/3\] ok +text-turn '
    assert_line --regexp '^replay: 3 scenarios: 3 passed, 0 failed, 0 skipped'
    assert_equal "$(tree_sum)" "$before"
    # the session-log tier still compares its log: a changed fixture fails it alone
    sed -i '4s/Do not use any tools/Do not use tools/' snap/text-turn/session.jsonl
    run -1 acpsnap-replay -d snap
    assert_line --regexp '^ok +chat '
    assert_line --regexp '^FAIL +text-turn '
}

@test "tier: refresh and update rewrite only stdout.expected.jsonl" {
    local good; good=$(cat snap/chat/stdout.expected.jsonl)
    sed -i 's/"HI"/"HO"/' snap/chat/stdout.expected.jsonl
    local before; before=$(tree_sum | grep -v chat/stdout.expected.jsonl)
    run -0 acpsnap-replay -d snap --mode refresh
    assert_line --regexp '^refreshed +chat +[0-9.]+ s  \(wrote stdout.expected.jsonl\)$'
    assert_line --regexp '^ok +hello +[0-9.]+ s  \(unchanged\)$'
    assert_equal "$(cat snap/chat/stdout.expected.jsonl)" "$good"
    assert_equal "$(tree_sum | grep -v chat/stdout.expected.jsonl)" "$before"
    [ "$(ls snap/chat)" = $'input.json\nprovider.jsonl\nstdout.expected.jsonl' ]
    sed -i 's/"HI"/"HO"/' snap/chat/stdout.expected.jsonl
    run -0 acpsnap-replay -d snap --mode update chat
    assert_line --regexp '^updated +chat +[0-9.]+ s  \(wrote stdout.expected.jsonl\)$'
    assert_equal "$(cat snap/chat/stdout.expected.jsonl)" "$good"
    [ "$(ls snap/chat)" = $'input.json\nprovider.jsonl\nstdout.expected.jsonl' ]
}

@test "tier: record needs the recording proxy (ACPSNAP_UPSTREAM) for provider.jsonl, and refreshes what it can" {
    sed -i 's/"name":"chat","hasModelTurn":true,"recorded":false/"name":"chat","hasModelTurn":true,"recorded":true/' snap/scenarios.jsonl
    sed -i 's/"HI"/"HO"/' snap/chat/stdout.expected.jsonl
    echo '{"jsonrpc":"2.0","method":"x"}' >> snap/hello/stdout.expected.jsonl
    local before; before=$(tree_sum)
    CI= DEEPSEEK_API_KEY=sk-test-not-used run -2 acpsnap-replay -d snap --mode record chat
    assert_line --regexp '^FAIL +chat +[0-9.]+ s$'
    assert_line '    chat is a "sessionLog": false scenario: its provider.jsonl is recorded through replay-serve'"'"'s recording proxy: set ACPSNAP_UPSTREAM to the provider'"'"'s base URL (and ACPSNAP_UPSTREAM_KEY_ENV to the name of the variable holding its key), or author provider.jsonl (acpsnap-replay(5)) and record with ACPSNAP_PROVIDER=replay-serve or refresh the transcript (make refresh SCENARIO=chat)'
    assert_equal "$(tree_sum)" "$before"
    # without a model turn there is nothing to record from: its transcript is refreshed
    CI= DEEPSEEK_API_KEY=sk-test-not-used run -0 acpsnap-replay -d snap --mode record hello
    assert_line --regexp '^refreshed +hello +[0-9.]+ s  \(wrote stdout.expected.jsonl\)$'
    # against replay-serve provider.jsonl is the provider: the transcript is refreshed
    ACPSNAP_PROVIDER=replay-serve run -0 acpsnap-replay -d snap --mode record
    assert_line --regexp '^refreshed +chat +[0-9.]+ s  \(wrote stdout.expected.jsonl\)$'
    assert_line --regexp '^ok +hello +[0-9.]+ s  \(unchanged\)$'
    run -0 grep -c '"HI"' snap/chat/stdout.expected.jsonl
    [ ! -e snap/chat/session.jsonl ]
    # an authored one (recorded: false) is skipped as ever
    sed -i 's/"recorded":true/"recorded":false/' snap/scenarios.jsonl
    ACPSNAP_PROVIDER=replay-serve run -0 acpsnap-replay -d snap --mode record chat
    assert_line --regexp '^skip +chat +[0-9.]+ s  \(authored, not recorded\)$'
}

@test "tier: waitForSessionUpdate waits for a session/update kind on the wire, one already sent included" {
    # the reference agent streams agent_message_chunk updates and no plan
    printf '%s\n' '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Run echo HI."},' \
        '{"op":"waitForSessionUpdate","sessionUpdate":"agent_message_chunk"}]}' > snap/chat/input.json
    run -0 fixture-guard snap
    run -0 acp-drive -p snap/agent.profile -o run snap/chat
    printf '%s\n' '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Run echo HI."},' \
        '{"op":"waitForSessionUpdate","sessionUpdate":"plan","timeoutMs":300}]}' > snap/chat/input.json
    run -1 --separate-stderr acp-drive -p snap/agent.profile -o run2 snap/chat
    assert_equal "${stderr_lines[0]}" 'acp-drive: snap/chat/input.json:2: step 3 (waitForSessionUpdate): no session/update "plan" arrived within 300 ms'
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"waitForSessionUpdate","sessionUpdate":1}]}\n' > snap/chat/input.json
    run -1 --separate-stderr fixture-guard -n snap
    assert_equal "$stderr" 'fixture-guard: snap/chat/input.json:1: steps[2] (waitForSessionUpdate): "sessionUpdate" must be a string'
}
