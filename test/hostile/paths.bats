#!/usr/bin/env bats
# Hostile scenario data, paths: every case is an attack through a snapshots
# tree a stranger's pull request could carry (test/hostile/README). A victim
# tree outside the snapshots tree is checksummed before and after: it must not
# change, nothing may be written into the snapshots tree (both checked first,
# right after the run), and the pipeline must exit 1 or 2 naming the scenario
# and the file.
bats_require_minimum_version 1.5.0
load ../helpers/common

setup() {
    [ -x "$BIN/acpsnap-agent" ] || skip "the reference agent is not built"
    cd "$BATS_TEST_TMPDIR"
    export TMPDIR=$BATS_TEST_TMPDIR/tmp
    mkdir -p "$TMPDIR" snap victim/dir
    # a private copy: the tree's binary may be relinked while the suite runs
    cp "$BIN/acpsnap-agent" agent
    sed "s|^command = .*|command = $BATS_TEST_TMPDIR/agent|" "$ROOT/scenarios/acpsnap-agent.profile" > snap/agent.profile
    # the header class needs its pin in every tree
    add_scenario text-turn text-turn '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}'
    printf 'precious\n' > victim/file
    printf 'precious too\n' > victim/dir/data
    printf 'ACPSNAP_SNAPSHOTS := snap\nACPSNAP_BIN := %s\nACPSNAP_TARGET_PREFIX := acpsnap-\ninclude %s\n' "$BIN" "$ROOT/share/acpsnap.mk" > Makefile
}

# add_scenario NAME FROM ROW: scenarios/FROM copied to snap/NAME, ROW appended to the table.
add_scenario() {
    cp -r "$ROOT/scenarios/$2" "snap/$1"
    printf '%s\n' "$3" >> snap/scenarios.jsonl
}

# The state of a tree: every entry (type, mode, size) and every file's hash.
tree_state() {
    find "$1" -printf '%p %y %m %s\n' | LC_ALL=C sort
    find "$1" -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum
}
# before: remembers the victim and the snapshots tree; after: both unchanged.
before() { VICTIM_STATE=$(tree_state victim); SNAP_STATE=$(tree_state snap); }
after() {
    assert_equal "$(tree_state victim)" "$VICTIM_STATE"
    assert_equal "$(tree_state snap)" "$SNAP_STATE"
}

# The cancel-hang scenario as NAME, its hang's readyFile set to FILE.
hang_scenario() {
    add_scenario "$1" cancel-hang "{\"name\":\"$1\",\"hasModelTurn\":true,\"recorded\":false,\"overridden\":true}"
    jq --arg f "$2" '.[0].readyFile = $f' "$ROOT/scenarios/cancel-hang/replay.override.json" > "snap/$1/replay.override.json"
    # a short wait: a ready file that never comes fails in 2 s, not 10
    jq '(.steps[] | select(.op == "promptAndCancel") | .waitForFile.timeoutMs) = 2000' \
        "$ROOT/scenarios/cancel-hang/input.json" > "snap/$1/input.json"
}

# The reference agent in its live mode behind replay-serve (acpsnap-profile(5)).
http_profile() {
    printf '%s\n' "command = $BATS_TEST_TMPDIR/agent" 'provider = replay-serve' \
        'harvest = */session.jsonl */session.jsonl.zstd' 'replay.env = ACPSNAP_SNAPSHOT=live' \
        'replay.env = DEEPSEEK_BASE_URL=${ACPSNAP_PROVIDER_URL}' 'replay.env = DEEPSEEK_API_KEY=unused' > http.profile
}

# ---------------------------------------------------------------- readyFile

@test "hostile: a readyFile climbing out of the cwd, for the agent's replay adapter" {
    hang_scenario climb ../../victim/file
    before
    run acpsnap-replay -d snap climb
    after
    assert_equal "$status" 2
    assert_line --regexp '^FAIL +climb '
    assert_line --regexp "^    acp-drive: $BATS_TEST_TMPDIR/snap/climb/replay.override.json:[0-9]+:[0-9]+: entry 0 readyFile \"../../victim/file\" must be a relative path beneath the cwd: a '.' or '..' component in a path$"
}

@test "hostile: a readyFile climbing out of replay-serve's --ready-dir" {
    hang_scenario climb ../../victim/file
    http_profile
    before
    run acpsnap-replay -d snap -p http.profile climb
    after
    assert_equal "$status" 2
    assert_line --regexp '^FAIL +climb '
    assert_line --regexp "^    acp-drive: $BATS_TEST_TMPDIR/snap/climb/replay.override.json:[0-9]+:[0-9]+: entry 0 readyFile \"../../victim/file\" must be a relative path beneath the cwd"
    # replay-serve itself refuses such a script before it listens
    printf '%s\n' '{"kind":"hang","readyFile":"../victim/file"}' > snap/climb/provider.jsonl
    before
    run timeout 10 replay-serve --port-file port --ready-dir "$TMPDIR" snap/climb/provider.jsonl
    after
    assert_equal "$status" 2
    assert_output "replay-serve: snap/climb/provider.jsonl:1:28: entry 0 readyFile \"../victim/file\" must be a relative path beneath the cwd: a '.' or '..' component in a path"
    [ ! -e port ]
}

@test "hostile: a committed workspace/.acpsnap-stream-ready link, outside or inside the workspace" {
    hang_scenario ready-link .acpsnap-stream-ready
    mkdir snap/ready-link/workspace
    ln -s ../../victim/file snap/ready-link/workspace/.acpsnap-stream-ready
    before
    run acpsnap-replay -d snap ready-link
    after
    assert_equal "$status" 2
    assert_line --regexp '^FAIL +ready-link '
    assert_line "    acp-drive: $BATS_TEST_TMPDIR/snap/ready-link/workspace/.acpsnap-stream-ready: a symbolic link that leaves the workspace"
    # a link that stays inside is copied, and the ready file is not written through it
    rm snap/ready-link/workspace/.acpsnap-stream-ready
    printf 'seed\n' > snap/ready-link/workspace/seed.txt
    ln -s seed.txt snap/ready-link/workspace/.acpsnap-stream-ready
    for profile in snap/agent.profile http.profile; do
        [ "$profile" = http.profile ] && http_profile
        before
        run acpsnap-replay -d snap -p "$profile" ready-link
        after
        assert_equal "$status" 1
        assert_line --regexp '^FAIL +ready-link '
        assert_output --regexp 'unable to create (readyFile|ready file) "\.acpsnap-stream-ready" in [^:]*: it exists already'
    done
}

# ---------------------------------------------------------------- the agent's file tools

# two-step-tools (write_file notes.txt, read it back) as NAME, the path the
# model names replaced by PATH in the fixture and the expected stdout.
tools_scenario() {
    add_scenario "$1" two-step-tools "{\"name\":\"$1\",\"hasModelTurn\":true,\"recorded\":true}"
    sed -i "s#notes\\.txt#$2#g" "snap/$1/session.jsonl" "snap/$1/stdout.expected.jsonl"
}

@test "hostile: a seeded workspace link to a victim, and a fixture's write_file through it" {
    tools_scenario seeded notes.txt
    mkdir snap/seeded/workspace
    ln -s ../../victim/file snap/seeded/workspace/notes.txt
    before
    run acpsnap-replay -d snap seeded
    after
    assert_equal "$status" 2
    assert_line --regexp '^FAIL +seeded '
    assert_line "    acp-drive: $BATS_TEST_TMPDIR/snap/seeded/workspace/notes.txt: a symbolic link that leaves the workspace"
}

@test "hostile: a write_file climbing out of the cwd with ../" {
    tools_scenario climb ../../victim/file
    before
    run acpsnap-replay -d snap climb
    after
    assert_equal "$status" 1
    assert_line --regexp '^FAIL +climb '
    assert_line '    --- climb/stdout.expected.jsonl'
    assert_output --partial "error: unable to write ../../victim/file: a '.' or '..' component in a path; the file tools reach only files beneath the working directory"
}

@test "hostile: a write_file to an absolute path outside the cwd" {
    tools_scenario absolute "$BATS_TEST_TMPDIR/victim/file"
    # the guard's lint stops a fixture naming a temp path before any run ...
    run acpsnap-replay -d snap absolute
    assert_equal "$status" 1
    assert_output --partial "snap/absolute/session.jsonl:4:73: a temp path ($BATS_TEST_TMPDIR/victim/file) in a fixture"
    assert_output --partial 'fixture-guard failed; nothing was run'
    # ... and allowed, the agent itself refuses the path
    printf 'tmp absolute/* %s\n' "$BATS_TEST_TMPDIR/victim/file" > snap/.acpsnap-allow
    before
    run acpsnap-replay -d snap absolute
    after
    assert_equal "$status" 1
    assert_line --regexp '^FAIL +absolute '
    assert_line '    --- absolute/stdout.expected.jsonl'
    assert_output --partial "error: unable to write $BATS_TEST_TMPDIR/victim/file: an absolute path outside the working directory"
}

# ---------------------------------------------------------------- table names

# The victim tree dressed as a scenario (what a name climbing to it would
# drive), and CLIMB: a name that reaches it from any directory (enough ../ to
# stop at /, as ../../../../tmp/victim does from a checkout).
victim_scenario() {
    CLIMB=$(printf '../%.0s' {1..40})${BATS_TEST_TMPDIR#/}/victim
    cp "$ROOT/scenarios/handshake/input.json" victim/
    printf '{"stale":"precious"}\n' > victim/stdout.expected.jsonl
    cp "$ROOT/scenarios/handshake/session.jsonl" victim/
}

@test "hostile: a table name climbing out of the snapshots tree, recorded through replay-serve" {
    victim_scenario
    jq -cn --arg n "$CLIMB" '{name: $n, hasModelTurn: false, recorded: false}' >> snap/scenarios.jsonl
    before
    ACPSNAP_PROVIDER=replay-serve run make -s acpsnap-record SCENARIO='*victim*'
    after
    assert_equal "$status" 2
    assert_line "fixture-guard: $BATS_TEST_TMPDIR/snap/scenarios.jsonl:2: scenario name \"$CLIMB\" breaks the name rule: a '/' in the name; see acpsnap-scenarios(5)"
    assert_line "acpsnap-replay: $BATS_TEST_TMPDIR/snap/scenarios.jsonl: the scenario table fails fixture-guard's table checks; nothing was run"
    # replay and the other modes likewise
    for mode in replay update refresh; do
        run acpsnap-replay -d snap --mode $mode
        after
        assert_equal "$status" 2
        assert_line --partial "scenarios.jsonl:2: scenario name \"$CLIMB\" breaks the name rule"
    done
}

@test "hostile: a newline in a table name" {
    victim_scenario
    jq -cn --arg n "x"$'\n'"$CLIMB" '{name: $n, hasModelTurn: false, recorded: false}' >> snap/scenarios.jsonl
    before
    ACPSNAP_PROVIDER=replay-serve run make -s acpsnap-record SCENARIO='*victim*'
    after
    assert_equal "$status" 2
    assert_line "fixture-guard: $BATS_TEST_TMPDIR/snap/scenarios.jsonl:2: scenario name \"x\\n$CLIMB\" breaks the name rule: a '/' in the name; see acpsnap-scenarios(5)"
    assert_line --partial 'nothing was run'
    # without a slash too: the name does not pass the guard and split in the pipeline
    head -1 snap/scenarios.jsonl > t && mv t snap/scenarios.jsonl
    jq -cn '{name: "a\nb", hasModelTurn: false, recorded: false}' >> snap/scenarios.jsonl
    cp -r "$ROOT/scenarios/handshake" "snap/a"$'\n'"b"
    before
    run -1 fixture-guard snap
    assert_output "fixture-guard: snap/scenarios.jsonl:2: scenario name \"a\\nb\" breaks the name rule: a control character in the name; see acpsnap-scenarios(5)
fixture-guard: snap/a
b: a snapshot directory the table does not name"
    run acpsnap-replay -d snap
    after
    assert_equal "$status" 2
    assert_line --partial 'scenarios.jsonl:2: scenario name "a\nb" breaks the name rule'
}

# ---------------------------------------------------------------- make

@test "hostile: make SCENARIO with quotes, \$(...), backquotes and ; runs nothing" {
    # every command it could run would write into the victim tree
    local v=$BATS_TEST_TMPDIR/victim
    local evil="a' ; touch $v/pwned1 ; echo '\"\$(shell touch $v/pwned2)\$(touch $v/pwned3)\`touch $v/pwned4\`;touch $v/pwned5"
    before
    run make -s acpsnap-replay SCENARIO="$evil"
    after
    assert_equal "$status" 2
    assert_line "acpsnap-replay: no scenario matches $evil"
    SCENARIO=$evil run make -s acpsnap-replay
    after
    assert_equal "$status" 2
    assert_line "acpsnap-replay: no scenario matches $evil"
    # the project's own Makefile: make -n shows the recipe and runs no value
    run make -n -s -C "$ROOT" replay SCENARIO="$evil"
    after
    assert_equal "$status" 0
    assert_line --partial '--mode replay -- "$ACPSNAP_MK_SCENARIO"'
}
