#!/usr/bin/env bats
# acpsnap-jdiff: the JSON-aware line diff of two JSONL files.
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    cd "$BATS_TEST_TMPDIR"
    unset NO_COLOR
    cp "$ROOT/scenarios/text-turn/stdout.expected.jsonl" old.jsonl
}

@test "--help, --version, bad option, bad operands" {
    run -0 acpsnap-jdiff --help
    assert_line --index 0 --partial 'usage: acpsnap-jdiff'
    run -0 acpsnap-jdiff --version
    assert_output --regexp '^acpsnap-jdiff \(acpsnap\) '
    run -2 --separate-stderr acpsnap-jdiff -x old.jsonl old.jsonl
    [[ "$stderr" == *"usage: acpsnap-jdiff"* ]]
    run -2 --separate-stderr acpsnap-jdiff old.jsonl
    [[ "$stderr" == *"usage: acpsnap-jdiff"* ]]
    run -2 --separate-stderr acpsnap-jdiff - -
    assert_equal "$stderr" "acpsnap-jdiff: OLD and NEW cannot both be standard input"
    run -2 --separate-stderr acpsnap-jdiff --color=sometimes old.jsonl old.jsonl
    assert_equal "$stderr" "acpsnap-jdiff: --color: expected auto, always or never, not 'sometimes'"
    run -2 --separate-stderr acpsnap-jdiff --max x old.jsonl old.jsonl
    assert_equal "$stderr" "acpsnap-jdiff: --max: expected a count, not 'x'"
    run -2 --separate-stderr acpsnap-jdiff old.jsonl nonexistent
    assert_equal "$stderr" "acpsnap-jdiff: unable to open nonexistent: No such file or directory"
}

@test "identical files: exit 0, nothing printed; empty files too" {
    run -0 --separate-stderr acpsnap-jdiff old.jsonl old.jsonl
    assert_equal "$output" ""
    assert_equal "$stderr" ""
    : > e1; : > e2
    run -0 acpsnap-jdiff e1 e2
    assert_equal "$output" ""
}

@test "the README tour's patch names the changed member" {
    sed 's/"embeddedContext":false/"embeddedContext":true/' old.jsonl > new.jsonl
    run -1 --separate-stderr acpsnap-jdiff old.jsonl new.jsonl
    assert_equal "$output" 'line 1 $.result.agentCapabilities.promptCapabilities.embeddedContext: false → true'
    assert_equal "$stderr" ""
}

@test "added and removed lines are named by method and sessionUpdate, or response id" {
    # line 3 (a session/update) appears twice, line 1 (the initialize response) is gone
    sed -e '3p' -e '1d' old.jsonl > new.jsonl
    run -1 acpsnap-jdiff old.jsonl new.jsonl
    assert_equal "$output" '- line 1 (response id 1)
+ line 2 (session/update agent_message_chunk)'
    run -1 acpsnap-jdiff new.jsonl old.jsonl
    assert_equal "$output" '+ line 1 (response id 1)
- line 2 (session/update agent_message_chunk)'
}

@test "a changed line beside an inserted one: old and new line numbers" {
    { echo '{"jsonrpc":"2.0","method":"session/prompt","id":3,"params":{}}'
      sed 's/PONG/PING/' old.jsonl; } > new.jsonl
    run -1 acpsnap-jdiff old.jsonl new.jsonl
    assert_equal "$output" '+ line 1 (session/prompt id 3)
line 3 → 4 $.params.update.content.text: "PONG" → "PING"'
}

@test "a line whose label changed, in place of another, is a changed line" {
    sed 's/"id":3,/"id":4,/' old.jsonl > new.jsonl
    run -1 acpsnap-jdiff old.jsonl new.jsonl
    assert_equal "$output" 'line 4 $.id: 3 → 4'
    sed -e 's/"id":3,/"id":4,/' -e '3d' old.jsonl > new.jsonl
    run -1 acpsnap-jdiff old.jsonl new.jsonl
    assert_equal "$output" '- line 3 (session/update agent_message_chunk)
- line 4 (response id 3)
+ line 3 (response id 4)'
}

@test "session log lines are named by type; members added, removed, retyped" {
    cp "$ROOT/scenarios/text-turn/session.jsonl" a.jsonl
    sed '2d' a.jsonl > b.jsonl
    run -1 acpsnap-jdiff a.jsonl b.jsonl
    assert_equal "$output" '- line 2 (turn/start)'
    printf '%s\n' '{"type":"x","a":1,"b":[1,2],"c d":"x","n":null}' > c.jsonl
    printf '%s\n' '{"type":"x","a":"1","b":[1],"c d":"x","n":null,"e":{}}' > d.jsonl
    run -1 acpsnap-jdiff c.jsonl d.jsonl
    assert_equal "$output" 'line 1 $.a: 1 → "1"
line 1 - $.b[1]: 2
line 1 + $.e: {}'
    printf '%s\n' '{"a b":{"x-y":[0,{"k":true}]}}' > e.jsonl
    printf '%s\n' '{"a b":{"x-y":[0,{"k":false}]}}' > f.jsonl
    run -1 acpsnap-jdiff e.jsonl f.jsonl
    assert_equal "$output" 'line 1 $["a b"]["x-y"][1].k: true → false'
}

@test "an element inserted into an array is one addition" {
    echo '{"a":[1,2,3]}' > a.jsonl
    echo '{"a":[0,1,2,3]}' > b.jsonl
    run -1 acpsnap-jdiff a.jsonl b.jsonl
    assert_equal "$output" 'line 1 + $.a[0]: 0'
}

@test "a key-order-only difference is a difference" {
    echo '{"a":1,"b":{"c":2,"d":3}}' > a.jsonl
    echo '{"a":1,"b":{"d":3,"c":2}}' > b.jsonl
    run -1 acpsnap-jdiff a.jsonl b.jsonl
    assert_equal "$output" 'line 1 $.b: key order differs'
    echo '{"a": 1,"b":{"c":2,"d":3}}' > c.jsonl
    run -1 acpsnap-jdiff a.jsonl c.jsonl
    assert_equal "$output" 'line 1 $: white space differs'
    echo '{"a":1.0,"b":{"c":2,"d":3}}' > d.jsonl
    run -1 acpsnap-jdiff a.jsonl d.jsonl
    assert_equal "$output" 'line 1 $.a: 1 → 1.0'
}

@test "long values are shortened; long strings show where they differ" {
    local w
    w=$(printf 'word%.0s ' $(seq 1 40))
    printf '{"t":"%s end"}\n' "$w" > a.jsonl
    printf '{"t":"%s END"}\n' "$w" > b.jsonl
    run -1 acpsnap-jdiff a.jsonl b.jsonl
    assert_output --regexp '^line 1 \$\.t: "…(.*) end" → "…\1 END"$'
    [ "${#output}" -lt 200 ]
    printf '{"o":{"k":"%s"}}\n' "$w" > c.jsonl
    echo '{"o":1}' > d.jsonl
    run -1 acpsnap-jdiff c.jsonl d.jsonl
    assert_output --regexp '^line 1 \$\.o: \{"k":"word.*….*word "\} → 1$'
}

@test "--max limits the differences printed per line" {
    echo '{"a":1,"b":2,"c":3,"d":4}' > a.jsonl
    echo '{"a":0,"b":0,"c":0,"d":0}' > b.jsonl
    run -1 acpsnap-jdiff --max 2 a.jsonl b.jsonl
    assert_equal "$output" 'line 1 $.a: 1 → 0
line 1 $.b: 2 → 0
line 1 … and 2 more'
    run -1 acpsnap-jdiff -m 0 a.jsonl b.jsonl
    assert_equal "${#lines[@]}" 4
}

@test "-u, -U N: the summary, then the unified diff diff -u writes" {
    sed -e 's/PONG/PING/' -e '1d' old.jsonl > new.jsonl
    { cat old.jsonl; cat old.jsonl; } > old2.jsonl
    { cat new.jsonl; echo '{"id":9,"result":{}}'; cat old.jsonl; } > new2.jsonl
    local a b n
    for n in 0 1 3; do
        for a in old.jsonl old2.jsonl; do
            for b in new.jsonl new2.jsonl; do
                run -1 acpsnap-jdiff -U $n "$a" "$b"
                n_summary=$(acpsnap-jdiff "$a" "$b" | wc -l)
                assert_line --index "$n_summary" "--- $a"
                assert_line --index $((n_summary + 1)) "+++ $b"
                diff <(acpsnap-jdiff -U $n "$a" "$b" | tail -n +$((n_summary + 3))) <(diff -U $n "$a" "$b" | tail -n +3)
            done
        done
    done
    run -1 acpsnap-jdiff -u old.jsonl new.jsonl
    assert_line --index 2 '--- old.jsonl'
    assert_line --index 4 '@@ -1,4 +1,3 @@'
    run -0 acpsnap-jdiff -u old.jsonl old.jsonl
    assert_output ''
    run -1 acpsnap-jdiff --unified=1 --color=always old.jsonl new.jsonl
    assert_line --regexp $'^\e\\[31m-\\{"jsonrpc":"2.0","id":1,.*\e\\[m$'
    assert_line --regexp $'^\e\\[32m\\+\\{"jsonrpc":"2.0","method":"session/update",.*"PING".*\e\\[m$'
    assert_line ' {"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}'
}

@test "-q: the status only" {
    sed 's/PONG/PING/' old.jsonl > new.jsonl
    run -1 --separate-stderr acpsnap-jdiff -q old.jsonl new.jsonl
    assert_equal "$output" ""
    assert_equal "$stderr" ""
    run -0 acpsnap-jdiff -q old.jsonl old.jsonl
    assert_equal "$output" ""
}

@test "colour: --color=always, never, auto (not a terminal), NO_COLOR" {
    sed -e 's/PONG/PING/' -e '1d' old.jsonl > new.jsonl
    local red=$'\e[31m' green=$'\e[32m' off=$'\e[m'
    run -1 acpsnap-jdiff --color=always old.jsonl new.jsonl
    assert_equal "$output" "${red}- line 1 (response id 1)${off}
line 3 → 2 \$.params.update.content.text: ${red}\"PONG\"${off} → ${green}\"PING\"${off}"
    NO_COLOR=1 run -1 acpsnap-jdiff --color=always old.jsonl new.jsonl
    assert_output --partial "$red"
    run -1 acpsnap-jdiff --color=never old.jsonl new.jsonl
    refute_output --partial $'\e'
    run -1 acpsnap-jdiff old.jsonl new.jsonl
    refute_output --partial $'\e'
    if command -v script >/dev/null; then
        run script -qec "acpsnap-jdiff old.jsonl new.jsonl" /dev/null
        assert_output --partial "$red"
        NO_COLOR=1 run script -qec "acpsnap-jdiff old.jsonl new.jsonl" /dev/null
        refute_output --partial $'\e'
        NO_COLOR= run script -qec "acpsnap-jdiff old.jsonl new.jsonl" /dev/null
        assert_output --partial "$red"
        NO_COLOR=1 run script -qec "acpsnap-jdiff --color=never old.jsonl new.jsonl" /dev/null
        refute_output --partial $'\e'
    fi
}

@test "stdin as either file; zstd input" {
    sed 's/PONG/PING/' old.jsonl > new.jsonl
    run -1 acpsnap-jdiff - new.jsonl < old.jsonl
    assert_equal "$output" 'line 3 $.params.update.content.text: "PONG" → "PING"'
    run -1 acpsnap-jdiff old.jsonl - < new.jsonl
    assert_equal "$output" 'line 3 $.params.update.content.text: "PONG" → "PING"'
    zstd -q new.jsonl -o new.jsonl.zst
    run -1 acpsnap-jdiff old.jsonl new.jsonl.zst
    assert_equal "$output" 'line 3 $.params.update.content.text: "PONG" → "PING"'
    head -c 20 new.jsonl.zst > cut.zst
    run -2 --separate-stderr acpsnap-jdiff old.jsonl cut.zst
    [[ "$stderr" == "acpsnap-jdiff: "*"cut.zst"* ]]
    assert_equal "$output" ""
}

@test "bad JSON is trouble naming file:line:col, with nothing printed" {
    sed 's/PONG/PING/' old.jsonl > new.jsonl
    printf '%s\n' '{"a":1}' '{"a":1,}' > bad.jsonl
    run -2 --separate-stderr acpsnap-jdiff new.jsonl bad.jsonl
    assert_equal "$stderr" "acpsnap-jdiff: bad.jsonl:2:8: invalid JSON: expected a string key"
    assert_equal "$output" ""
    run -2 --separate-stderr acpsnap-jdiff - old.jsonl < bad.jsonl
    assert_equal "$stderr" "acpsnap-jdiff: <stdin>:2:8: invalid JSON: expected a string key"
    printf '%s\n' '{"a":1}' '' > blank.jsonl
    run -2 --separate-stderr acpsnap-jdiff blank.jsonl old.jsonl
    assert_equal "$stderr" "acpsnap-jdiff: blank.jsonl:2:1: invalid JSON: unexpected end of input"
}

@test "lines that are not objects are shown by their bytes" {
    printf '%s\n' 1 '"a"' > a.jsonl
    printf '%s\n' 1 '[1,2]' '"a"' > b.jsonl
    run -1 acpsnap-jdiff a.jsonl b.jsonl
    assert_equal "$output" '+ line 2: [1,2]'
}

@test "10k lines with one change and one insertion: fast" {
    local i
    for ((i = 1; i <= 10000; i++)); do
        printf '{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk %d"}}}}\n' "$i"
    done > a.jsonl
    sed -e '5000s/chunk 5000/chunk five/' -e '7000i {"jsonrpc":"2.0","id":9,"result":{}}' a.jsonl > b.jsonl
    local t0=$EPOCHREALTIME
    run -1 acpsnap-jdiff a.jsonl b.jsonl
    local ms=$(( (${EPOCHREALTIME/./} - ${t0/./}) / 1000 ))
    assert_equal "$output" 'line 5000 $.params.update.content.text: "chunk 5000" → "chunk five"
+ line 7000 (response id 9)'
    [ "$ms" -lt 2000 ] || fail "took $ms ms"
    # every line different: the alignment gives up at its bound, pairs by position
    shuf -n 10000 --random-source=a.jsonl a.jsonl > c.jsonl
    t0=$EPOCHREALTIME
    run -1 acpsnap-jdiff -q a.jsonl c.jsonl
    ms=$(( (${EPOCHREALTIME/./} - ${t0/./}) / 1000 ))
    [ "$ms" -lt 2000 ] || fail "took $ms ms"
}
