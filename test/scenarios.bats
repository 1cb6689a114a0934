#!/usr/bin/env bats
# The reference agent's committed scenarios (scenarios/) through the pipelines.
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    pipeline_setup
}

# A private copy of the tree and the agent (the tree's binary may be relinked).
copy_tree() {
    cp -a "$ROOT/scenarios" snap
    cp "$BIN/acpsnap-agent" agent
    sed -i "s|^command = .*|command = $BATS_TEST_TMPDIR/agent|" snap/acpsnap-agent.profile
}
tree_sum() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); }

@test "scenarios: the table passes fixture-guard" {
    run -0 fixture-guard "$ROOT/scenarios"
}

@test "scenarios: make replay passes every scenario and writes nothing in the tree" {
    local before gs; before=$(tree_sum "$ROOT/scenarios")
    gs=$(git -C "$ROOT" status --porcelain --ignored)
    run -0 make -s -C "$ROOT" replay
    local n; n=$(grep -c . "$ROOT/scenarios/scenarios.jsonl")
    [ "$(grep -cE '^ok +[a-z0-9-]+ +[0-9]+\.[0-9]{3} s$' <<<"$output")" = "$n" ]
    assert_line --regexp "^replay: $n scenarios: $n passed, 0 failed, 0 skipped \([0-9.]+ s\)$"
    assert_equal "$(tree_sum "$ROOT/scenarios")" "$before"
    assert_equal "$(git -C "$ROOT" status --porcelain --ignored)" "$gs"
    [ -z "$(ls -A "$TMPDIR")" ]
}

@test "scenarios: replay makes and removes its scratch with bash's loadable mktemp, mkdir and rm where found (no process), else with the commands: the same verdicts" {
    [ -r /usr/lib/bash/mktemp ] || skip "no loadable builtins in /usr/lib/bash (Debian: bash-builtins)"
    copy_tree
    mkdir shim
    local c real
    for c in mktemp mkdir rm; do
        real=$(command -v "$c")
        printf '#!/bin/sh\necho %s >> "%s/shim.log"\nexec %s "$@"\n' "$c" "$PWD" "$real" > "shim/$c"
        chmod +x "shim/$c"
    done
    verdicts() { sed -E 's/ +[0-9]+\.[0-9]{3} s$//; s/ \([0-9.]+ s\)$//; /^slowest: /d' <<<"$output"; }
    PATH=$PWD/shim:$PATH run -0 acpsnap-replay -d snap -p snap/acpsnap-agent.profile
    local with; with=$(verdicts)
    [ ! -e shim.log ]
    [ -z "$(ls -A "$TMPDIR")" ]
    ACPSNAP_BASH_BUILTINS=0 PATH=$PWD/shim:$PATH run -0 acpsnap-replay -d snap -p snap/acpsnap-agent.profile
    assert_equal "$(verdicts)" "$with"
    assert_equal "$(sort -u shim.log)" "$(printf 'mkdir\nmktemp\nrm')"
    [ -z "$(ls -A "$TMPDIR")" ]
    # taken from BASH_LOADABLES_PATH's absolute directories, never a relative one
    mkdir lb; cp /usr/lib/bash/mktemp /usr/lib/bash/mkdir /usr/lib/bash/rm lb/
    rm shim.log
    BASH_LOADABLES_PATH=$PWD/lb PATH=$PWD/shim:$PATH run -0 acpsnap-replay -d snap -p snap/acpsnap-agent.profile
    [ ! -e shim.log ]
    BASH_LOADABLES_PATH=lb PATH=$PWD/shim:$PATH run -0 acpsnap-replay -d snap -p snap/acpsnap-agent.profile
    [ -s shim.log ]
    [ -z "$(ls -A "$TMPDIR")" ]
}

@test "scenarios: make -j2 replay passes" {
    copy_tree
    run -0 make -s -j2 -f "$ROOT/share/acpsnap.mk" ACPSNAP_SNAPSHOTS=snap ACPSNAP_BIN="$BIN" replay
    assert_line --regexp '^replay: [0-9]+ scenarios: [0-9]+ passed, 0 failed'
}

@test "scenarios: every scenario replayed twice gives byte-identical normalized outputs" {
    copy_tree
    local s k f
    for s in $(jq -r .name snap/scenarios.jsonl); do
        for k in 1 2; do
            acp-drive -p snap/acpsnap-agent.profile -o "r$k" "snap/$s" 2>/dev/null
            scrub --stdout --context r$k/run.json r$k/stdout.raw.jsonl > "o$k"
            for f in r$k/session*.jsonl; do scrub --session --context r$k/run.json "$f"; done > "l$k"
        done
        cmp o1 o2 || { echo "$s: stdout differs between two replays"; return 1; }
        cmp l1 l2 || { echo "$s: session logs differ between two replays"; return 1; }
        rm -rf r1 r2
    done
}

@test "scenarios: a broken agent build fails exactly the scenarios that show the broken string" {
    copy_tree
    sed -i 's/"status":"pending"/"status":"pendinG"/' agent
    local expected
    expected=$(grep -l '"status":"pending"' snap/*/stdout.expected.jsonl | xargs -n1 dirname | xargs -n1 basename | sort)
    [ -n "$expected" ]
    run -1 acpsnap-replay -d snap -j 2
    # at -j2 each verdict line starts with its [k/n] completion count
    assert_equal "$(sed -nE 's/^(\[ *[0-9]+\/[0-9]+\] )?FAIL +([a-z0-9-]+) .*/\2/p' <<<"$output" | sort)" "$expected"
    assert_output --partial '"status":"pendinG"'
    # the passing and the failing verdicts count 1 to n between them, once each
    local n; n=$(grep -c . snap/scenarios.jsonl)
    assert_equal "$(grep -oE '^\[ *[0-9]+/' <<<"$output" | tr -dc '0-9\n' | sort -n | tr '\n' ' ')" "$(seq -s ' ' 1 "$n") "
}

@test "scenarios: at -j1 and -j2, an acp-drive --serve that is gone at once or midway: every scenario still runs, once" {
    copy_tree
    local n real; n=$(grep -c . snap/scenarios.jsonl); real=$(command -v acp-drive)
    mkdir wrap
    # GONE=0: the server refuses to start; GONE=3: it stops answering after three
    printf '#!/bin/bash\nif [ "$1" = --serve ]; then\n  [ "$GONE" = 0 ] && exit 2\n  "%s" "$@" | for ((i = 0; i < GONE; i++)); do IFS= read -r l || break; printf "%%s\\n" "$l"; done; exit 0\nfi\nexec "%s" "$@"\n' "$real" "$real" > wrap/acp-drive
    chmod +x wrap/acp-drive
    for j in 1 2; do
        for g in 0 3; do
            GONE=$g PATH=$PWD/wrap:$PATH run -0 acpsnap-replay -d snap -j $j
            [ "$(grep -cE '^(\[ *[0-9]+/[0-9]+\] )?ok +[a-z0-9-]+ ' <<<"$output")" = "$n" ] || { echo "-j $j, gone after $g: $output"; false; }
            assert_line --regexp "^replay: $n scenarios: $n passed, 0 failed, 0 skipped "
        done
    done
}

@test "scenarios: record against replay-serve reproduces the committed fixtures byte for byte" {
    copy_tree
    local before; before=$(tree_sum snap)
    ACPSNAP_PROVIDER=replay-serve run -0 acpsnap-record -d snap -j 2
    refute_output --regexp '^(\[ *[0-9]+/[0-9]+\] )?recorded '
    assert_equal "$(tree_sum snap)" "$before"
}

@test "scenarios: all-row-kinds holds every packed row kind and decodes like its source, event for event" {
    local f=$ROOT/scenarios/all-row-kinds/session.jsonl src=$ROOT/scenarios/mixed-turn/session.jsonl
    for kind in text-chunks reasoning-chunks tool-call-chunks; do
        [ "$(jq -r 'select(.type == "'"$kind"'") | .type' "$f" | head -1)" = "$kind" ] || { echo "no $kind row"; return 1; }
    done
    jsonl-pack --unpack "$f" | tail -n +2 > a
    jsonl-pack --unpack "$src" | tail -n +2 > b
    [ -s a ]
    json_lines_equal a b
    # mechanically derived: the codec reproduces it from the source recording
    jsonl-pack --unpack "$src" | jsonl-project | cmp - "$f"
    run -0 jsonl-pack --check "$f"
}

@test "scenarios: the scenarios of the issue are all there" {
    local t=$ROOT/scenarios/scenarios.jsonl
    # handshake only: no model, a header-only log
    [ "$(grep -c . "$ROOT/scenarios/handshake/session.jsonl")" = 1 ]
    # the default pin and a second class with its own pin sharing a sidecar by source
    [ "$(jq -r 'select(.pinsHeader == true and (.headerClass // "default") == "default") | .name' "$t")" = text-turn ]
    [ -n "$(jq -r 'select(.pinsHeader == true and .headerClass != null and .systemPromptSource != null) | .name' "$t")" ]
    # overrides: a hang with readyFile, a throw before any chunk, a mid-stream throw, patches
    jq -e '.[0].kind == "hang" and .[0].readyFile != null' "$ROOT/scenarios/cancel-hang/replay.override.json"
    jq -e '.[0].kind == "throw" and (.[0].chunks | length) == 0' "$ROOT/scenarios/provider-error/replay.override.json"
    jq -e '.[0].kind == "throw" and (.[0].chunks | length) > 0' "$ROOT/scenarios/mid-stream-failure/replay.override.json"
    jq -e '.patches | length > 0' "$ROOT/scenarios/context-length-retry/replay.override.json"
    # a marked local compaction summary, rebuilt by replay
    grep -q '"type":"compaction/summary".*"llmStreamCall":true' "$ROOT/scenarios/compaction/session.jsonl"
    # workspace seeds
    [ -f "$ROOT/scenarios/workspace-seeds/workspace/seed.txt" ]
}

@test "scenarios: --keep DIR keeps each run and its normalized outputs; -v shows acp-drive's phases" {
    copy_tree
    run -0 acpsnap-replay -d snap --keep kept -v text-turn handshake
    assert_line --regexp '^ok +text-turn +[0-9.]+ s$'
    assert_line --regexp '^    phases: boot [0-9]+ ms, (step [0-9]+ [0-9]+ ms, )+exit [0-9]+ ms, harvest [0-9]+ ms$'
    [ "$(grep -c '^    phases: ' <<<"$output")" = 2 ]
    for f in stdout.raw.jsonl stderr.txt session.jsonl run.json acp-drive.stderr normalized/stdout.expected.jsonl normalized/session.jsonl; do
        [ -f "kept/text-turn/$f" ] || { echo "kept/text-turn/$f is missing"; return 1; }
    done
    cmp kept/text-turn/normalized/stdout.expected.jsonl snap/text-turn/stdout.expected.jsonl
    scrub --session snap/text-turn/session.jsonl | cmp - kept/text-turn/normalized/session.jsonl
    [ "$(jq '.steps | length' snap/text-turn/input.json)" = "$(jq '.timings.steps | length' kept/text-turn/run.json)" ]
    run -0 jq -c '.timings | keys' kept/text-turn/run.json
    assert_output '["boot","exit","harvest","steps"]'
    [ -z "$(ls -A "$TMPDIR")" ]
    # without -v no phases; a failing run keeps its findings and differences, at -j2 too
    sed -i '1s/$/ (edited)/' snap/text-turn/system-prompt.expected.md
    printf '{"edited":true}\n' >> snap/handshake/stdout.expected.jsonl
    run -1 acpsnap-replay -d snap -j2 --keep kept text-turn handshake
    refute_output --partial 'phases:'
    grep -q 'differs from its pin text-turn/system-prompt.expected.md' kept/text-turn/checks.txt
    grep -q '"edited"' kept/handshake/diff.txt
    [ ! -e kept/handshake/checks.txt ]
    run -2 --separate-stderr acpsnap-replay -d snap --keep snap/kept text-turn
    assert_equal "$stderr" "acpsnap-replay: $BATS_TEST_TMPDIR/snap/kept: the keep directory cannot be inside the snapshots directory $BATS_TEST_TMPDIR/snap"
    : > plain
    run -2 --separate-stderr acpsnap-replay -d snap --keep plain/kept text-turn
    assert_equal "${stderr##*$'\n'}" "acpsnap-replay: $BATS_TEST_TMPDIR/plain/kept: unable to create the keep directory"
}

@test "scenarios: a header's other fields (config, model) are checked against the class pin's fixture" {
    copy_tree
    acp-drive -p snap/acpsnap-agent.profile -o run snap/pro-model-turn
    run -0 sidecar-dedupe --verify run snap pro-model-turn
    # the same run as if it were of the default class: its model is not the pin's
    run -1 sidecar-dedupe --verify run snap reasoning-turn
    assert_output --regexp '^session\.jsonl:[0-9]+: header 1 \(request/header seq [0-9]+\) differs from its pin text-turn/session\.jsonl$'
}
