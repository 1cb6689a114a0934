#!/usr/bin/env bats
# scrub conformance: the corpus' raw captures and committed fixtures against
# dsh's own normalized outputs, byte for byte.
bats_require_minimum_version 1.5.0
load helpers/common

# Every raw capture directory of the corpus (any suite).
raw_captures() {
    find "$CORPUS" -path '*/raw/*' -name run.json -printf '%h\n' | LC_ALL=C sort
}

# Table field of a capture's scenario: compares its logs? (comparesLog, default hasModelTurn)
compares_log() { # raw dir
    local suite name
    suite=$(dirname "$(dirname "$1")"); name=$(basename "$1")
    jq -r --arg n "$name" 'select(.name == $n) | if has("comparesLog") then .comparesLog else (.hasModelTurn // false) end' \
        "$suite/snapshots/scenarios.jsonl"
}

@test "corpus: scrub --stdout of every raw capture with its run context equals stdout.expected.jsonl" {
    n=0 fails=()
    while read -r d; do
        suite=$(dirname "$(dirname "$d")"); name=$(basename "$d")
        exp="$suite/snapshots/$name/stdout.expected.jsonl"
        scrub --stdout --context "$d/run.json" "$d/stdout.raw.jsonl" > "$BATS_TEST_TMPDIR/out" || { fails+=("$name: exit $?"); continue; }
        cmp -s "$BATS_TEST_TMPDIR/out" "$exp" || fails+=("$name")
        n=$((n + 1))
    done < <(raw_captures)
    printf 'mismatch: %s\n' "${fails[@]}"
    [ "${#fails[@]}" -eq 0 ]
    [ "$n" -ge 40 ]
}

@test "corpus: scrub --session of every raw log (scenarios that compare logs) equals the oracle .normalized.jsonl" {
    n=0 fails=()
    while read -r d; do
        [ "$(compares_log "$d")" = true ] || continue
        suite=$(dirname "$(dirname "$d")"); name=$(basename "$d")
        for f in "$d"/session*.jsonl; do
            o="$suite/oracle/$name/$(basename "$f").normalized.jsonl"
            scrub --session --context "$d/run.json" "$f" > "$BATS_TEST_TMPDIR/out" || { fails+=("$f: exit $?"); continue; }
            cmp -s "$BATS_TEST_TMPDIR/out" "$o" || fails+=("$f")
            n=$((n + 1))
        done
    done < <(raw_captures)
    printf 'mismatch: %s\n' "${fails[@]}"
    [ "${#fails[@]}" -eq 0 ]
    [ "$n" -ge 40 ]
}

@test "corpus: scrub --session of every committed fixture equals its oracle .normalized.jsonl" {
    n=0 fails=()
    while read -r f; do
        o="$(oracle_of "$f").normalized.jsonl"
        scrub --session "$f" > "$BATS_TEST_TMPDIR/out" || { fails+=("$f: exit $?"); continue; }
        cmp -s "$BATS_TEST_TMPDIR/out" "$o" || fails+=("$f")
        n=$((n + 1))
    done < <(corpus_fixtures)
    printf 'mismatch: %s\n' "${fails[@]}"
    [ "${#fails[@]}" -eq 0 ]
    [ "$n" -ge 50 ]
}

@test "corpus: scrub --fixture of every compared raw log is canonical and normalizes to the oracle" {
    n=0 fails=()
    while read -r d; do
        [ "$(compares_log "$d")" = true ] || continue
        suite=$(dirname "$(dirname "$d")"); name=$(basename "$d")
        keep=()
        wp=$(jq -r --arg n "$name" 'select(.name == $n) | .workspaceParent // ""' "$suite/snapshots/scenarios.jsonl")
        [ -z "$wp" ] || keep=(--keep-cwd)
        for f in "$d"/session*.jsonl; do
            o="$suite/oracle/$name/$(basename "$f").normalized.jsonl"
            scrub --fixture "${keep[@]}" "$f" > "$BATS_TEST_TMPDIR/fx" || { fails+=("$f: exit $?"); continue; }
            jsonl-pack --check "$BATS_TEST_TMPDIR/fx" || fails+=("$f: not canonical")
            # no envelopes, no live request-header bulk, no literal generated cwd
            tail -n +2 "$BATS_TEST_TMPDIR/fx" | jq -se 'all(has("seq") or has("time") or has("seq0") or has("time0") | not)' >/dev/null \
                || fails+=("$f: envelope kept")
            if [ -z "$wp" ]; then
                cwd=$(jq -r .cwd "$d/run.json")
                ! grep -qF "$cwd" "$BATS_TEST_TMPDIR/fx" || fails+=("$f: literal cwd")
            fi
            scrub --session "$BATS_TEST_TMPDIR/fx" | cmp -s - "$o" || fails+=("$f")
            n=$((n + 1))
        done
    done < <(raw_captures)
    printf 'mismatch: %s\n' "${fails[@]}"
    [ "${#fails[@]}" -eq 0 ]
    [ "$n" -ge 40 ]
}

@test "corpus: scrub is idempotent on its own --stdout and --session output" {
    fails=()
    while read -r d; do
        suite=$(dirname "$(dirname "$d")"); name=$(basename "$d")
        exp="$suite/snapshots/$name/stdout.expected.jsonl"
        scrub --stdout "$exp" | cmp -s - "$exp" || fails+=("$exp")
    done < <(raw_captures)
    while read -r f; do
        o="$(oracle_of "$f").normalized.jsonl"
        scrub --session "$o" | cmp -s - "$o" || fails+=("$o")
    done < <(corpus_fixtures)
    printf 'not idempotent: %s\n' "${fails[@]}"
    [ "${#fails[@]}" -eq 0 ]
}
