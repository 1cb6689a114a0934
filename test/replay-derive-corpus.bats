#!/usr/bin/env bats
# replay-derive conformance: every session fixture of the corpus against the
# reference's own derivations (oracle/<scenario>/<fixture>.{derived,replay}.jsonl
# or .error.txt), compared as JSON values entry by entry.
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    cd "$BATS_TEST_TMPDIR"
}

# check FIXTURE ORACLE_PREFIX [replay-derive options…]
# Compares the tool's output with ORACLE_PREFIX.jsonl, or, where the oracle is
# ORACLE_PREFIX.error.txt, expects exit 2 and a message naming the same call.
# Appends a line to $BATS_TEST_TMPDIR/failures on a mismatch.
check() {
    local f=$1 oracle=$2 rc=0
    shift 2
    replay-derive "$@" "$f" > out.jsonl 2> err.txt || rc=$?
    f=${label:-$f}
    if [ -f "$oracle.error.txt" ]; then
        local call
        call=$(grep -o 'model call [^ ]* ended without a finish chunk' "$oracle.error.txt") \
            || { echo "$f: unexpected oracle error $(cat "$oracle.error.txt")" >> failures; return; }
        if [ "$rc" != 2 ] || [ -s out.jsonl ] || ! grep -qF "$call" err.txt; then
            echo "$f $*: want exit 2 naming '$call', got $rc: $(head -c 300 err.txt)" >> failures
        fi
    elif [ "$rc" != 0 ]; then
        echo "$f $*: exit $rc: $(head -c 300 err.txt)" >> failures
    elif cmp -s out.jsonl "$oracle.jsonl"; then
        bytes_equal=$((bytes_equal + 1))
    elif ! json_lines_equal out.jsonl "$oracle.jsonl" > diff.txt; then
        echo "$f $*: differs from $oracle.jsonl: $(head -c 300 diff.txt)" >> failures
    fi
    n=$((n + 1))
}

report() {
    echo "checked $n fixture(s)${bytes_equal:+, $bytes_equal byte-identical to the oracle}"
    [ "$n" -gt 0 ]
    if [ -s failures ]; then cat failures; return 1; fi
}

@test "primary fixtures: derivation equals the .derived oracle" {
    # .derived is derivation over the whole log: no override, no seed skip.
    n=0
    while read -r f; do
        [ "$(basename "$f")" = session.jsonl ] || continue
        check "$f" "$(oracle_of "$f").derived" --no-seed-skip
    done < <(corpus_fixtures)
    report
}

@test "primary fixtures: with the scenario's override, equals the .replay oracle" {
    n=0
    while read -r f; do
        [ "$(basename "$f")" = session.jsonl ] || continue
        o=$(dirname "$f")/replay.override.json
        # The reference never slices a primary log (primaries carry no
        # seedLength in practice); -S says so explicitly.
        if [ -f "$o" ]; then check "$f" "$(oracle_of "$f").replay" --no-seed-skip --override "$o"
        else check "$f" "$(oracle_of "$f").replay" --no-seed-skip; fi
    done < <(corpus_fixtures)
    report
}

@test "child fixtures: seed skipped by default, equals the .replay oracle" {
    n=0
    while read -r f; do
        [ "$(basename "$f")" != session.jsonl ] || continue
        check "$f" "$(oracle_of "$f").replay"
    done < <(corpus_fixtures)
    report
}

@test "child fixtures: --no-seed-skip equals the .derived oracle" {
    n=0
    while read -r f; do
        [ "$(basename "$f")" != session.jsonl ] || continue
        check "$f" "$(oracle_of "$f").derived" --no-seed-skip
    done < <(corpus_fixtures)
    report
}

@test "--count agrees with the oracle's line count" {
    n=0
    while read -r f; do
        o=$(oracle_of "$f").derived.jsonl
        [ -f "$o" ] || continue
        got=$(replay-derive --count --no-seed-skip "$f")
        [ "$got" = "$(wc -l < "$o")" ] || echo "$f: count $got, oracle $(wc -l < "$o")" >> failures
        n=$((n + 1))
    done < <(corpus_fixtures)
    report
}

@test "zstd-compressed fixtures derive the same scripts" {
    n=0
    while read -r f; do
        o=$(oracle_of "$f").replay
        [ -f "$o.jsonl" ] && [ ! -f "$(dirname "$f")/replay.override.json" ] || continue
        zstd -q -c "$f" > in.jsonl.zst
        label="$f (zstd)" check in.jsonl.zst "$o"
    done < <(corpus_fixtures)
    report
}
