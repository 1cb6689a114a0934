#!/usr/bin/env bats
# Conformance of the session codec (jsonl-pack, jsonl-project) on every
# session fixture and raw capture of the corpus.
bats_require_minimum_version 1.5.0
load helpers/common

@test "corpus: every committed session fixture is canonical (jsonl-pack --check exits 0)" {
    n=0
    while read -r f; do
        run -0 jsonl-pack --check "$f"
        n=$((n + 1))
    done < <(corpus_fixtures)
    [ "$n" -gt 50 ]
}

@test "corpus: jsonl-pack --unpack equals the oracle events, line for line as JSON values" {
    fails=()
    while read -r f; do
        o="$(oracle_of "$f").events.jsonl"
        [ -f "$o" ] || { fails+=("$f: no oracle"); continue; }
        jsonl-pack --unpack "$f" | tail -n +2 > "$BATS_TEST_TMPDIR/u"
        json_lines_equal "$BATS_TEST_TMPDIR/u" "$o" >/dev/null || fails+=("$f")
    done < <(corpus_fixtures)
    printf '%s\n' "${fails[@]}"
    [ "${#fails[@]}" -eq 0 ]
}

@test "corpus: pack(unpack(fixture)) projected gives the fixture back byte for byte" {
    fails=()
    while read -r f; do
        jsonl-pack --unpack "$f" | jsonl-pack | jsonl-project | cmp -s - "$f" || fails+=("$f")
        # the persisted round trip too: restore, unpack, pack, project
        jsonl-project --restore "$f" | jsonl-pack -u | jsonl-pack -z | jsonl-project | cmp -s - "$f" || fails+=("$f (restore)")
    done < <(corpus_fixtures)
    printf '%s\n' "${fails[@]}"
    [ "${#fails[@]}" -eq 0 ]
}

@test "corpus: every raw capture projects to a canonical file with the raw events minus envelopes" {
    fails=()
    n=0
    for raw in "$CORPUS"/*/raw/*/session*.jsonl "$CORPUS"/*/*/raw/*/session*.jsonl; do
        [ -f "$raw" ] || continue
        n=$((n + 1))
        p="$BATS_TEST_TMPDIR/p.jsonl"
        jsonl-project "$raw" > "$p" || { fails+=("$raw: project failed"); continue; }
        jsonl-pack --check "$p" || { fails+=("$raw: not canonical"); continue; }
        cmp -s <(head -n 1 "$raw") <(head -n 1 "$p") || fails+=("$raw: header changed")
        diff <(jsonl-pack -u "$p" | tail -n +2 | jq -cS 'del(.seq, .time)') \
             <(jsonl-pack -u "$raw" | tail -n +2 | jq -cS 'del(.seq, .time)') >/dev/null || fails+=("$raw: events differ")
    done
    printf '%s\n' "${fails[@]}"
    [ "$n" -gt 40 ]
    [ "${#fails[@]}" -eq 0 ]
}
