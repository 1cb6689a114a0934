#!/usr/bin/env bats
# The secret and volatile lint of fixture-guard (fixture-guard(1), LINT) on a
# copy of the shipped scenarios, and the record pipeline's refusal to write a
# recording that holds the provider key (acpsnap-replay(1), RECORD).
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    unset ACPSNAP_PROVIDER_KEY ACPSNAP_KEY_VAR DEEPSEEK_API_KEY
    cp -r "$ROOT/scenarios" "$BATS_TEST_TMPDIR/s"
    cd "$BATS_TEST_TMPDIR"
}

# plant FILE LINE OLD NEW: replaces the first OLD of line LINE of s/FILE by NEW.
plant() {
    local f=s/$1 ln=$2 old=$3 new=$4
    awk -v ln="$ln" -v old="$old" -v new="$new" 'NR == ln { i = index($0, old); $0 = substr($0, 1, i - 1) new substr($0, i + length(old)) } { print }' "$f" > "$f.tmp"
    mv "$f.tmp" "$f"
}

# col FILE LINE TEXT: the 1-based byte column of the first TEXT in line LINE of s/FILE.
col() { LC_ALL=C awk -v ln="$2" -v t="$3" 'NR == ln { print index($0, t) }' "s/$1"; }

# lint_says MESSAGE...: fixture-guard --lint-only s exits 1 printing exactly these lines.
lint_says() {
    run -1 --separate-stderr fixture-guard --lint-only s
    assert_output ''
    local IFS=$'\n'
    assert_equal "$stderr" "$*"
}

KEY=sk-0123456789abcdefABCDEF0123456789

# ---------------------------------------------------------------- clean trees

@test "lint: the shipped scenarios report nothing" {
    run -0 --separate-stderr fixture-guard --lint-only "$ROOT/scenarios"
    assert_equal "$stderr" ''
    run -0 --separate-stderr fixture-guard "$ROOT/scenarios"
    assert_equal "$stderr" ''
}

@test "lint: every snapshots tree of the corpus reports nothing" {
    local t n=0
    while IFS= read -r t; do
        run -0 --separate-stderr fixture-guard --lint-only "$(dirname "$t")"
        assert_equal "$stderr" ''
        n=$((n + 1))
    done < <(find "$CORPUS" -path '*/snapshots/scenarios.jsonl' | LC_ALL=C sort)
    [ "$n" -ge 3 ]
}

# ---------------------------------------------------------------- each kind

@test "lint: an API key in stdout, at its column, never printed whole" {
    plant text-turn/stdout.expected.jsonl 3 '"PONG"' "\"PONG $KEY\""
    local c
    c=$(col text-turn/stdout.expected.jsonl 3 sk-)
    [ "$c" -eq 168 ]
    lint_says "fixture-guard: s/text-turn/stdout.expected.jsonl:3:168: an API key (sk-0123…, 35 bytes) in a fixture; remove it (and revoke it)"
    refute_output --partial "$KEY"
    # the full guard reports it too, after its own checks
    run -1 --separate-stderr fixture-guard s
    assert_equal "$stderr" "fixture-guard: s/text-turn/stdout.expected.jsonl:3:168: an API key (sk-0123…, 35 bytes) in a fixture; remove it (and revoke it)"
}

@test "lint: a bearer token in a provider script" {
    plant text-turn/provider.jsonl 1 '"PO"' '"curl -H \"Authorization: Bearer abc123def456ghi789\" x"'
    lint_says "fixture-guard: s/text-turn/provider.jsonl:1:$(col text-turn/provider.jsonl 1 Bearer): a bearer token (Bearer abc1…, 25 bytes) in a fixture; remove it (and revoke it)"
}

@test "lint: an api-key member and the other key shapes" {
    printf '%s\n' '{"x-api-key":"0123456789abcdef0123","k":"AKIAIOSFODNN7EXAMPLE"}' \
        '{"t":"ghp_0123456789abcdefghij0123456789abcdef xoxb-1234567890-abcdef AIzaSyA0123456789abcdefghijklmnopqrstuv"}' \
        '{"t":"-----BEGIN OPENSSH PRIVATE KEY-----\nabc","a":"sk-ant-api03-0123456789abcdefghijkl"}' >> s/text-turn/stdout.expected.jsonl
    lint_says \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:5:15: an x-api-key value (0123…, 20 bytes) in a fixture; remove it (and revoke it)' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:5:42: an AWS access key id (AKIAIOSF…, 20 bytes) in a fixture; remove it (and revoke it)' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:6:7: a GitHub token (ghp_0123…, 40 bytes) in a fixture; remove it (and revoke it)' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:6:48: a Slack token (xoxb-1234…, 22 bytes) in a fixture; remove it (and revoke it)' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:6:71: a Google API key (AIzaSyA0…, 39 bytes) in a fixture; remove it (and revoke it)' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:7:7: a private key block (-----BEGIN OPEN…, 35 bytes) in a fixture; remove it (and revoke it)' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:7:54: an Anthropic API key (sk-ant-api0…, 35 bytes) in a fixture; remove it (and revoke it)'
}

@test "lint: a home path in a session fixture's body" {
    plant text-turn/session.jsonl 4 'Reply with' 'In /home/alice/proj reply with'
    lint_says "fixture-guard: s/text-turn/session.jsonl:4:$(col text-turn/session.jsonl 4 /home/): a home path (/home/alice/proj) in a fixture; normalize it, or allow it in .acpsnap-allow"
}

@test "lint: the other home and temp path spellings" {
    printf '%s\n' '{"t":"cd /Users/bob/src; ls /root/.ssh","w":"C:\\Users\\bob\\x","v":"(/private/var/folders/2g/T/x)"}' \
        'tmp=/private/tmp/abc: done' >> s/text-turn/stdout.expected.jsonl
    lint_says \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:5:10: a home path (/Users/bob/src) in a fixture; normalize it, or allow it in .acpsnap-allow' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:5:29: a home path (/root/.ssh) in a fixture; normalize it, or allow it in .acpsnap-allow' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:5:46: a home path (C:\\Users\\bob\\x) in a fixture; normalize it, or allow it in .acpsnap-allow' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:5:71: a temp path (/private/var/folders/2g/T/x) in a fixture; normalize it, or allow it in .acpsnap-allow' \
        'fixture-guard: s/text-turn/stdout.expected.jsonl:6:5: a temp path (/private/tmp/abc) in a fixture; normalize it, or allow it in .acpsnap-allow'
}

@test "lint: a temp path in a sidecar" {
    plant text-turn/system-prompt.expected.md 1 '{{cwd}}' '/tmp/acp-snap-cwd-Xy12Ab'
    lint_says "fixture-guard: s/text-turn/system-prompt.expected.md:1:39: a temp path (/tmp/acp-snap-cwd-Xy12Ab) in a fixture; normalize it, or allow it in .acpsnap-allow"
}

@test "lint: an ISO-8601 timestamp in input.json" {
    plant text-turn/input.json 11 'Reply with' 'At 2026-11-30T23:05:01.123Z reply with'
    lint_says "fixture-guard: s/text-turn/input.json:11:$(col text-turn/input.json 11 2026-): an ISO-8601 timestamp (2026-11-30T23:05:01.123Z) in a fixture; normalize it, or allow it in .acpsnap-allow"
}

@test "lint: a UUID in stdout" {
    plant text-turn/stdout.expected.jsonl 2 '{{sessionId}}' '0f9eb2a7-4ba6-426f-98ed-86715ead0791'
    lint_says "fixture-guard: s/text-turn/stdout.expected.jsonl:2:48: a UUID (0f9eb2a7-4ba6-426f-98ed-86715ead0791) in a fixture; normalize it, or allow it in .acpsnap-allow"
}

@test "lint: epoch times in a session body, in seconds and in milliseconds" {
    plant text-turn/session.jsonl 11 '"PONG"' '"PONG at 1796034691 (1796034691428 ms)"'
    local c
    c=$(col text-turn/session.jsonl 11 1796034691)
    lint_says "fixture-guard: s/text-turn/session.jsonl:11:$c: an epoch time in seconds (1796034691) in a fixture; normalize it, or allow it in .acpsnap-allow" \
        "fixture-guard: s/text-turn/session.jsonl:11:$((c + 12)): an epoch time in milliseconds (1796034691428) in a fixture; normalize it, or allow it in .acpsnap-allow"
}

# ---------------------------------------------------------------- format places

@test "lint: the places the format keeps or tokenizes are not reported" {
    # the header's own fields: its id, createdAt and a literal cwd
    plant text-turn/session.jsonl 1 '{{cwd}}' '/tmp/acp-snap-cwd-Xy12Ab'
    # a session body's ids (scrub --session tokenizes every UUID) and time members
    plant text-turn/session.jsonl 11 '"PONG"' '"PONG","id":"0f9eb2a7-4ba6-426f-98ed-86715ead0791","time":1796034691428'
    plant text-turn/session.jsonl 7 '"dt":[0,0]' '"dt":[1796034691,0]'
    # a snapshot spill path (the comparison tokenizes it as {{spillLocator:…}})
    plant text-turn/session.jsonl 4 'Reply with' 'See /tmp/dsh-acp-snap-0123abcde/session-0123456789ab/0123456789ab-bash.txt and reply with'
    # placeholders
    plant text-turn/stdout.expected.jsonl 3 '"PONG"' '"PONG {{time}} /home/{{user}}/x /tmp/{{tmp}}/y {{cwd}}/home/alice/z"'
    # prose that only looks like it
    plant text-turn/system-prompt.expected.md 1 'Keep answers' 'Use a Bearer token. Set api_key=$KEY. Keep answers'
    run -0 --separate-stderr fixture-guard --lint-only s
    assert_equal "$stderr" ''
}

@test "lint: a temp path the drive script names is the author's, in every file of the scenario" {
    plant text-turn/input.json 11 'Reply with' 'Write /tmp/dsh-escalated.txt, then reply with'
    plant text-turn/stdout.expected.jsonl 3 '"PONG"' '"PONG: wrote /tmp/dsh-escalated.txt"'
    plant reasoning-turn/stdout.expected.jsonl 3 '{{sessionId}}' '/tmp/dsh-escalated.txt'
    lint_says "fixture-guard: s/reasoning-turn/stdout.expected.jsonl:3:$(col reasoning-turn/stdout.expected.jsonl 3 /tmp/): a temp path (/tmp/dsh-escalated.txt) in a fixture; normalize it, or allow it in .acpsnap-allow"
}

@test "lint: the checks' run lints what --lint-only does, each file once, in name order, after the checks" {
    plant text-turn/input.json 11 'Reply with' 'At 2026-11-30T23:05:01.123Z write /tmp/dsh-x.txt, then reply with'
    plant text-turn/session.jsonl 4 'Reply with' 'In /home/alice/proj write /tmp/dsh-x.txt, reply with'
    plant text-turn/stdout.expected.jsonl 2 '{{sessionId}}' '0f9eb2a7-4ba6-426f-98ed-86715ead0791'
    printf '{"t":"/tmp/dsh-x.txt and /tmp/other"}\n' >> s/reasoning-turn/stdout.expected.jsonl
    printf '{"Authorization":"Bearer abcdefghijklmnop0123"}\n' > s/text-turn/replay.override.json
    run -1 --separate-stderr fixture-guard --lint-only s
    local lint=$stderr
    assert_equal "$lint" "fixture-guard: s/text-turn/input.json:11:$(col text-turn/input.json 11 2026-): an ISO-8601 timestamp (2026-11-30T23:05:01.123Z) in a fixture; normalize it, or allow it in .acpsnap-allow
fixture-guard: s/text-turn/replay.override.json:1:19: a bearer token (Bearer abcd…, 27 bytes) in a fixture; remove it (and revoke it)
fixture-guard: s/text-turn/session.jsonl:4:$(col text-turn/session.jsonl 4 /home/): a home path (/home/alice/proj) in a fixture; normalize it, or allow it in .acpsnap-allow
fixture-guard: s/text-turn/stdout.expected.jsonl:2:48: a UUID (0f9eb2a7-4ba6-426f-98ed-86715ead0791) in a fixture; normalize it, or allow it in .acpsnap-allow
fixture-guard: s/reasoning-turn/stdout.expected.jsonl:5:$(col reasoning-turn/stdout.expected.jsonl 5 /tmp/dsh): a temp path (/tmp/dsh-x.txt) in a fixture; normalize it, or allow it in .acpsnap-allow
fixture-guard: s/reasoning-turn/stdout.expected.jsonl:5:$(col reasoning-turn/stdout.expected.jsonl 5 /tmp/other): a temp path (/tmp/other) in a fixture; normalize it, or allow it in .acpsnap-allow"
    run -1 --separate-stderr fixture-guard --no-lint s
    local checks=$stderr
    [ -n "$checks" ]
    run -1 --separate-stderr fixture-guard s
    assert_equal "$stderr" "$checks
$lint"
}

@test "lint: a config the table names is read" {
    printf 'api_key = 0123456789abcdef\n' >> s/terse.conf
    lint_says 'fixture-guard: s/terse.conf:3:11: an api-key value (0123…, 16 bytes) in a fixture; remove it (and revoke it)'
}

# ---------------------------------------------------------------- the allow-list

@test "lint: the allow-list allows by kind, place, line and value, and warns of stale entries" {
    plant text-turn/stdout.expected.jsonl 2 '{{sessionId}}' '0f9eb2a7-4ba6-426f-98ed-86715ead0791'
    plant text-turn/stdout.expected.jsonl 3 '"PONG"' "\"PONG /tmp/acp-snap-cwd-1 $KEY\""
    printf '%s\n' '# fixtures that keep these on purpose' '' \
        'uuid	text-turn/stdout.expected.jsonl:2	0f9eb2a7-4ba6-426f-98ed-86715ead0791' \
        'tmp */stdout.expected.jsonl /tmp/acp-snap-cwd-*' \
        "key text-turn/stdout.expected.jsonl:3 $KEY" \
        'epoch text-turn/*' > s/.acpsnap-allow
    run -0 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: s/.acpsnap-allow:6: warning: stale allow entry: it allows nothing; remove it'
    # a value or a line that does not match allows nothing
    sed -i 's/:2\t/:3\t/' s/.acpsnap-allow
    run -1 --separate-stderr fixture-guard --lint-only s
    assert_equal "${stderr_lines[0]}" 'fixture-guard: s/text-turn/stdout.expected.jsonl:2:48: a UUID (0f9eb2a7-4ba6-426f-98ed-86715ead0791) in a fixture; normalize it, or allow it in .acpsnap-allow'
}

@test "lint: a malformed allow-list is trouble, at its line and column" {
    printf '# ok\nuuid text-turn/x\nsecret text-turn/x\n' > s/.acpsnap-allow
    run -2 --separate-stderr fixture-guard --lint-only s
    assert_equal "$stderr" 'fixture-guard: s/.acpsnap-allow:3:1: unknown kind "secret"; an entry is KIND PLACE [VALUE], KIND one of key, bearer, auth, private-key, home, tmp, time, uuid, epoch'
    printf 'uuid\n' > s/.acpsnap-allow
    run -2 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: s/.acpsnap-allow:1:5: no place (a glob over scenario/file); an entry is KIND PLACE [VALUE], KIND one of key, bearer, auth, private-key, home, tmp, time, uuid, epoch'
    printf 'uuid text-turn/x:0\n' > s/.acpsnap-allow
    run -2 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: s/.acpsnap-allow:1:18: bad line number in place "text-turn/x:0"; an entry is KIND PLACE [VALUE], KIND one of key, bearer, auth, private-key, home, tmp, time, uuid, epoch'
}

@test "lint: --no-lint turns it off; --lint-only with --no-lint is a usage error" {
    plant text-turn/stdout.expected.jsonl 3 '"PONG"' "\"PONG $KEY\""
    run -0 --separate-stderr fixture-guard --no-lint s
    assert_equal "$stderr" ''
    run -2 --separate-stderr fixture-guard --no-lint --lint-only s
    assert_equal "$stderr" 'usage: fixture-guard [--list | --table | --rows | --no-lint | --lint-only] [--unreferenced=MODE] DIR...'
}

@test "lint: a zstd fixture is read decompressed" {
    plant text-turn/stdout.expected.jsonl 3 '"PONG"' "\"PONG $KEY\""
    zstd -q --rm s/text-turn/stdout.expected.jsonl -o s/text-turn/stdout.expected.jsonl.z
    mv s/text-turn/stdout.expected.jsonl.z s/text-turn/stdout.expected.jsonl
    lint_says "fixture-guard: s/text-turn/stdout.expected.jsonl:3:168: an API key (sk-0123…, 35 bytes) in a fixture; remove it (and revoke it)"
}

# ---------------------------------------------------------------- record

# say_key KEY: text-turn's model says KEY before PONG.
say_key() {
    jq -c --arg k "$1" '.chunks |= map(if .type == "text-delta" and .text == "PO" then .text = "PO " + $k
        elif .type == "block-end" then .block.text = "PO " + $k + "NG" else . end)' "$ROOT/scenarios/text-turn/provider.jsonl" > s/text-turn/provider.jsonl
}
tree_sum() { find s -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; }

@test "record: a recording that holds the provider key is refused, and nothing is written" {
    [ -x "$BIN/acpsnap-agent" ] || skip "the reference agent is not built"
    export TMPDIR=$BATS_TEST_TMPDIR/tmp
    mkdir -p "$TMPDIR"
    # the fixtures hold it JSON-escaped: planted\"Key/...
    local key='planted"Key/0123456789' sum
    say_key "$key"
    sum=$(tree_sum)
    DEEPSEEK_API_KEY=$key ACPSNAP_PROVIDER=replay-serve run -1 acpsnap-record -d s text-turn
    assert_line --regexp '^FAIL +text-turn '
    assert_line '    text-turn/session.jsonl: the recording holds the provider key ($DEEPSEEK_API_KEY or ACPSNAP_PROVIDER_KEY); nothing written'
    assert_line '    text-turn/stdout.expected.jsonl: the recording holds the provider key ($DEEPSEEK_API_KEY or ACPSNAP_PROVIDER_KEY); nothing written'
    refute_output --partial 'Key/0123'
    assert_equal "$(tree_sum)" "$sum"
    # the variable ACPSNAP_KEY_VAR names
    ACPSNAP_KEY_VAR=MY_KEY MY_KEY=$key ACPSNAP_PROVIDER=replay-serve run -1 acpsnap-record -d s text-turn
    assert_line '    text-turn/stdout.expected.jsonl: the recording holds the provider key ($MY_KEY or ACPSNAP_PROVIDER_KEY); nothing written'
    assert_equal "$(tree_sum)" "$sum"
    # another key, or one shorter than 8 bytes (not checked), records
    cp "$ROOT/scenarios/text-turn/provider.jsonl" s/text-turn/provider.jsonl
    DEEPSEEK_API_KEY=PONG ACPSNAP_PROVIDER=replay-serve run -0 acpsnap-record -d s text-turn
    assert_line --regexp '^ok +text-turn .*\(recorded; unchanged\)$'
    DEEPSEEK_API_KEY=$key ACPSNAP_PROVIDER=replay-serve run -0 acpsnap-record -d s text-turn
    assert_line --regexp '^ok +text-turn .*\(recorded; unchanged\)$'
}

@test "record: the key is found in each spelling a JSON string gives it" {
    # key_files and its spellings, from the pipeline script itself
    eval "$(sed -n '/^KEY_SPELLINGS=/,/^}/p' "$BIN/acpsnap-replay")"
    local key='sk-ab/cd"é😀12345'
    printf '%s\n' 'x sk-ab/cd"é😀12345 y' > raw
    printf '%s\n' '{"a":"sk-ab/cd\"é😀12345"}' > json
    printf '%s\n' '{"a":"sk-ab\/cd\"\u00e9\ud83d\ude0012345"}' > lower
    printf '%s\n' '{"a":"sk-ab/cd\"\u00E9\uD83D\uDE0012345"}' > upper
    printf '%s\n' 'sk-ab/cd' > none
    DEEPSEEK_API_KEY=$key run -0 key_files raw json lower upper none
    assert_output $'raw\njson\nlower\nupper'
    ACPSNAP_PROVIDER_KEY=$key run -0 key_files none upper
    assert_output upper
    ACPSNAP_PROVIDER_KEY=replay-serve DEEPSEEK_API_KEY=short run -1 key_files raw
}

# ---------------------------------------------------------------- instruction sets

@test "lint: every SIMD level finds the same, hits at each offset across a 64-byte block" {
    # the scan looks at up to five bytes after a trigger and one before: a
    # line of every finding kind, shifted through two block boundaries
    local k pad='' f=s/text-turn/stdout.expected.jsonl l out want=
    for ((k = 0; k < 70; k++)); do
        printf '{"t":"%s 12345678-1234-1234-1234-123456789abc /home/al/x 1700000000123 2024-01-02T03:04:05Z %s Bearer abcdefgh12345678 /tmp/q"}\n' "$pad" "$KEY" >> "$f"
        pad+=x
    done
    for l in avx512 avx2 sse2 scalar; do
        printf '%s\n' '{"type":"session"}' | ACPSNAP_SIMD=$l jsonl-project >/dev/null 2>&1 || continue   # a level this CPU lacks
        run -1 --separate-stderr env ACPSNAP_SIMD=$l fixture-guard --lint-only s
        [ -n "$want" ] || want=$stderr
        assert_equal "$stderr" "$want"
    done
    assert_equal "$(printf '%s\n' "$want" | wc -l)" 490
}
