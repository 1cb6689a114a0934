#!/usr/bin/env bats
# A profile's rules (acpsnap-profile(5)): the scrub rule program every
# pipeline applies to the transcripts it normalizes, for an agent whose ACP
# stdout carries volatile values of its own. The agent here is the reference
# agent behind a wrapper that tags every frame of its stdout with one of two
# fresh random msg_ ids (A, B, A, B, ...) and the basename of its cwd, as
# third-party agents do.
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    pipeline_setup --agent snap
    cat > volatile-agent <<EOF
#!/usr/bin/env bash
rnd() { printf 'msg_01J%s' "\$(od -An -N8 -tx1 /dev/urandom | tr -d ' \\n' | tr a-f A-F)"; }
ids=("\$(rnd)" "\$(rnd)") k=0
"$BATS_TEST_TMPDIR/agent" | while IFS= read -r l; do
    printf '{"_meta":{"messageId":"%s","project":"%s"},%s\n' "\${ids[k % 2]}" "\${PWD##*/}" "\${l#\{}"
    k=\$((k + 1))
done
EOF
    chmod +x volatile-agent
    cp -r "$ROOT/scenarios/text-turn" snap/text-turn
    rm snap/text-turn/stdout.expected.jsonl
    echo '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}' > snap/scenarios.jsonl
    sed "s|^command = .*|command = $BATS_TEST_TMPDIR/volatile-agent|" "$ROOT/scenarios/acpsnap-agent.profile" > snap/agent.profile
    # the rules: number the ids, name the cwd's basename
    printf '%s\n' '# volatile-agent'"'"'s ids and project name' \
        'renumber("msg_[0-9A-Za-z]+"; "msgId")' \
        '| ($cwd | split("/") | last) as $base' \
        '| walk(if type == "string" then split($base) | join("{{cwdName}}") else . end)' > snap/volatile.jq
}

with_rules() { echo "rules = ${1:-volatile.jq}" >> snap/agent.profile; }
record() { ACPSNAP_PROVIDER=replay-serve acpsnap-record -d snap "$@"; }

@test "rules: without them the stock pipeline fails on the agent's volatile ids" {
    run -1 record
    assert_line --regexp '^FAIL +text-turn '
    assert_line '    the recording does not replay deterministically; nothing written:'
    [ ! -e snap/text-turn/stdout.expected.jsonl ]
    # with fixtures made by a run, replay fails too
    acp-drive -p snap/agent.profile -o run snap/text-turn 2>/dev/null
    scrub --stdout --context run/run.json run/stdout.raw.jsonl > snap/text-turn/stdout.expected.jsonl
    grep -q '"messageId":"msg_01J' snap/text-turn/stdout.expected.jsonl
    run -1 acpsnap-replay -d snap
    assert_line --regexp '^FAIL +text-turn '
}

@test "rules: record writes the scrubbed transcript, then replay passes three times; distinct ids stay distinct" {
    with_rules
    run -0 record
    assert_line --regexp '^recorded +text-turn .*\(wrote stdout.expected.jsonl\)$'
    run -0 jq -r '._meta | "\(.messageId) \(.project)"' snap/text-turn/stdout.expected.jsonl
    assert_output '{{msgId:1}} {{cwdName}}
{{msgId:2}} {{cwdName}}
{{msgId:1}} {{cwdName}}
{{msgId:2}} {{cwdName}}'
    ! grep -q 'msg_' snap/text-turn/stdout.expected.jsonl
    local k
    for k in 1 2 3; do
        run -0 acpsnap-replay -d snap
        assert_line --regexp '^ok +text-turn +[0-9.]+ s$'
    done
    run -0 record
    assert_line --regexp '^ok +text-turn .*\(recorded; unchanged\)$'
}

@test "rules: refresh and update write the scrubbed form" {
    with_rules
    run -0 record
    cp snap/text-turn/stdout.expected.jsonl want
    sed -i 's/{{msgId:2}}/{{msgId:7}}/' snap/text-turn/stdout.expected.jsonl
    run -0 acpsnap-update -d snap
    assert_line --regexp '^updated +text-turn .*\(wrote stdout.expected.jsonl\)$'
    cmp want snap/text-turn/stdout.expected.jsonl
    sed -i 's/{{cwdName}}/x/' snap/text-turn/stdout.expected.jsonl
    run -0 acpsnap-refresh -d snap
    assert_line --regexp '^refreshed +text-turn .*\(wrote stdout.expected.jsonl\)$'
    cmp want snap/text-turn/stdout.expected.jsonl
    run -0 acpsnap-refresh -d snap
    assert_line --regexp '^ok +text-turn .*\(unchanged\)$'
}

@test "rules: the failure diff and the pending entry show the scrubbed form" {
    with_rules
    run -0 record
    sed -i '3s/{{msgId:1}}/{{msgId:9}}/' snap/text-turn/stdout.expected.jsonl
    ACPSNAP_PENDING=pend run -1 acpsnap-replay -d snap
    assert_line '    line 3 $._meta.messageId: "{{msgId:9}}" → "{{msgId:1}}"'
    assert_line --regexp '^    \+\{"_meta":\{"messageId":"\{\{msgId:1\}\}","project":"\{\{cwdName\}\}"\},"jsonrpc":"2.0","method":"session/update"'
    refute_output --partial 'msg_01J'
    grep -q '{{msgId:1}}' pend/text-turn/files/text-turn/stdout.expected.jsonl
    ! grep -q 'msg_' pend/text-turn/files/text-turn/stdout.expected.jsonl
}

@test "rules: \$cwd, \$scenario and \$sessionIds reach the program" {
    # without the $cwd rule the project name differs between two runs
    printf '%s\n' 'renumber("msg_[0-9A-Za-z]+"; "msgId")' > snap/ids.jq
    with_rules ids.jq
    run -1 record
    assert_line '    the recording does not replay deterministically; nothing written:'
    assert_line --regexp '^    -\{"_meta":\{"messageId":"\{\{msgId:1\}\}","project":"acp-snap-cwd-'
    { cat snap/volatile.jq
      printf '%s\n' '| if .id == 2 then .result.check = [$scenario, ($sessionIds | length), ($sessionIds[0] | test("^[0-9a-f-]{36}$"))] else . end'
    } > snap/ids.jq
    run -0 record
    run -0 jq -c 'select(.id == 2) | .result.check' snap/text-turn/stdout.expected.jsonl
    assert_output '["text-turn",1,true]'
}

@test "rules: a rule file that does not compile stops every pipeline, naming file:line" {
    printf '%s\n' 'renumber("msg_[0-9A-Za-z]+"; "msgId")' '| .x = $nope' > snap/bad.jq
    with_rules bad.jq
    local mode
    for mode in replay record refresh update; do
        ACPSNAP_PROVIDER=replay-serve run -2 --separate-stderr acpsnap-replay -d snap --mode $mode
        assert_equal "$stderr" "scrub: $BATS_TEST_TMPDIR/snap/bad.jq:2: \$nope is not defined
acpsnap-replay: $BATS_TEST_TMPDIR/snap/bad.jq: the profile's rules do not compile; nothing was run"
        assert_equal "$output" ''
    done
}

@test "rules: a rule program that fails on a frame fails its scenario, naming the frame and the rule file" {
    printf '%s\n' 'if .id == 2 then error("no session for \($scenario)") else . end' > snap/boom.jq
    with_rules boom.jq
    cp "$ROOT/scenarios/text-turn/stdout.expected.jsonl" snap/text-turn/
    run -1 acpsnap-replay -d snap
    assert_line --regexp '^FAIL +text-turn '
    assert_line --regexp "^    scrub: .*/stdout\.raw\.jsonl:2: $BATS_TEST_TMPDIR/snap/boom\.jq: no session for text-turn\$"
}

@test "rules: a missing or empty rules value is trouble naming the profile's line" {
    with_rules nope.jq
    local n; n=$(grep -c '' snap/agent.profile)
    run -2 --separate-stderr acpsnap-replay -d snap
    assert_equal "$stderr" "acpsnap-replay: $BATS_TEST_TMPDIR/snap/agent.profile:$n: rules: nope.jq: unable to read the rule file"
    sed -i 's/^rules = .*/rules =  /' snap/agent.profile
    run -2 --separate-stderr acpsnap-replay -d snap
    assert_equal "$stderr" "acpsnap-replay: $BATS_TEST_TMPDIR/snap/agent.profile:$n: empty rules"
    run -2 --separate-stderr acp-drive -p snap/agent.profile -o run snap/text-turn
    assert_equal "$stderr" "acp-drive: snap/agent.profile:$n: empty rules"
}

@test "rules: the last rules line counts, its path relative to the profile; acp-drive accepts the key" {
    mkdir -p conf/rules
    printf '%s\n' '.x = 1' > conf/rules/first.jq
    cp snap/volatile.jq conf/rules/v.jq
    mv snap/agent.profile conf/
    printf '%s\n' 'rules = rules/first.jq' 'rules = rules/v.jq' >> conf/agent.profile
    ACPSNAP_PROVIDER=replay-serve run -0 acpsnap-record -d snap -p conf/agent.profile
    run -0 acpsnap-replay -d snap -p conf/agent.profile
    grep -q '{{msgId:2}}' snap/text-turn/stdout.expected.jsonl
    ! grep -q '"x":1' snap/text-turn/stdout.expected.jsonl
    run -0 acp-drive -p conf/agent.profile -o run snap/text-turn
}

@test "rules: a rules line of an included profile counts, relative to that profile; a later line replaces it" {
    mkdir snap/base
    mv snap/volatile.jq snap/base/volatile.jq
    echo 'rules = volatile.jq' > snap/base/rules.profile
    echo 'include = base/rules.profile' >> snap/agent.profile
    run -0 record
    assert_line --regexp '^recorded +text-turn '
    grep -q '{{msgId:2}}' snap/text-turn/stdout.expected.jsonl
    # a rules line after the include replaces it: here with one that is missing
    echo 'rules = nowhere.jq' >> snap/agent.profile
    run -2 acpsnap-replay -d snap
    assert_output --partial "snap/agent.profile:$(wc -l < snap/agent.profile): rules: nowhere.jq: unable to read the rule file"
}
