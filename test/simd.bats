#!/usr/bin/env bats
# The scanner's instruction sets (ACPSNAP_SIMD, acpsnap(7) ENVIRONMENT): an
# unknown or unrunnable level is refused; on every level this CPU runs, the
# two-stage scan agrees with the byte-at-a-time one on the corpus (and on
# mutations of it), and every filter writes the same bytes as on every other
# level. make check-simd runs the parser suites again under each level.
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/simd

@test "ACPSNAP_SIMD: an unknown level is trouble, naming the levels" {
    run -2 --separate-stderr env ACPSNAP_SIMD=avx3 jsonl-project <<<"$HDR"
    assert_equal "$stderr" "jsonl-project: ACPSNAP_SIMD=avx3: unknown level (avx512, avx2, sse2, scalar or auto)"
    assert_equal "$output" ""
}

@test "ACPSNAP_SIMD: a level this CPU lacks is trouble; auto and empty pick one" {
    run -0 env ACPSNAP_SIMD=auto jsonl-project <<<"$HDR"
    run -0 env ACPSNAP_SIMD= jsonl-project <<<"$HDR"
    run -0 env ACPSNAP_SIMD=scalar jsonl-project <<<"$HDR"
    mapfile -t ok < <(levels)
    [ "${#ok[@]}" -ge 1 ]
    for l in avx512 avx2 sse2; do
        [[ " ${ok[*]} " == *" $l "* ]] && continue
        run -2 --separate-stderr env ACPSNAP_SIMD=$l jsonl-project <<<"$HDR"
        assert_equal "$stderr" "jsonl-project: ACPSNAP_SIMD=$l: this CPU cannot run it"
        return 0
    done
    echo "# this CPU runs every level: ${ok[*]}" >&3
}

@test "every level: the two-stage scan agrees with the byte-at-a-time scan on the corpus and its mutations" {
    [ -x "$UNIT" ] || skip "make unit builds $UNIT"
    mapfile -t files < <(find "$CORPUS" -path '*/snapshots/*' -name '*.jsonl' | LC_ALL=C sort | awk 'NR % 3 == 1')
    [ "${#files[@]}" -gt 40 ]
    for l in $(levels); do
        run -0 env ACPSNAP_SIMD=$l "$UNIT" "${files[@]}"
        assert_output --partial "simd_unit: ok ($l;"
    done
}

@test "every level: each filter writes the same bytes on every corpus log and transcript" {
    mapfile -t ok < <(levels)
    n=0
    while read -r f; do
        same_on_levels log_filters "$f"
        n=$((n + 1))
    done < <(find "$CORPUS" -name 'session*.jsonl' | LC_ALL=C sort | awk 'NR % 4 == 1')
    while read -r f; do
        same_on_levels stdout_filters "$f"
        n=$((n + 1))
    done < <(find "$CORPUS" -name 'stdout*.jsonl' | LC_ALL=C sort | awk 'NR % 4 == 1')
    [ "$n" -gt 40 ]
}

@test "every level: errors are named and placed the same (file:line:col)" {
    mapfile -t ok < <(levels)
    bad=$BATS_TEST_TMPDIR/bad.jsonl
    for body in '{"type":"a","seq":1,"time":2,"data":{"x":"\q"}}' '{"type":"a" ,"seq":1}' \
                '{"type":"a","seq":1,"time":2,"data":{"x":"é'$'\xff''"}}' '{"type":"a","seq":01}' \
                '{"type":"a","seq":1,"time":2,"data":[1,2}' '{"type":"a","data":"'$'\x01''"}'; do
        printf '%s\n%s\n' "$HDR" "$body" > "$bad"
        run -2 --separate-stderr env ACPSNAP_SIMD=scalar jsonl-project "$bad"
        want=$stderr
        [[ $want == "jsonl-project: $bad:2:"* ]]
        for l in "${ok[@]}"; do
            run -2 --separate-stderr env ACPSNAP_SIMD=$l jsonl-project "$bad"
            assert_equal "$stderr" "$want"
        done
    done
}

# scrub normalizes a member line from its parts (no tokens); at scalar, the
# walk over its tokens does. Texts that every rule touches.
scrub_filters() {
    each scrub --session "$1"
    each scrub --session --persisted "$1"
    each scrub --session --cwd /tmp/other "$1"
    each scrub --session --cwd-alias /private/tmp/acp-snap-cwd-x "$1"
    each scrub --fixture "$1"
}

@test "every level: scrub finds what its rules touch at every offset of a line" {
    mapfile -t ok < <(levels)
    c=/tmp/acp-snap-cwd-x u=5410e361-ee95-448a-9712-34e65c65617f f=$BATS_TEST_TMPDIR/o.jsonl
    pad=0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789
    { for t in "$c/a" "$u" '/private{{cwd}}/y' 'Session x\n  \"time\": 123,\nend' 'x\u00e9 '"$c" 'x\/ '"$c" \
               '\\'"$c" "-$u-" "$c $u {{cwd}}"; do
          for ((k = 0; k < 70; k++)); do
              echo "{\"jsonrpc\":\"2.0\",\"id\":$k,\"result\":{\"p\":\"${pad:0:k}\",\"t\":\"$t\",\"u\":\"$u\"}}"
          done
      done; } > "$f"
    jq -e . "$f" > /dev/null
    run -0 scrub --stdout --cwd "$c" "$f"
    [[ "$output" == *'{{cwd}}/a'* && "$output" == *'"t":"{{cwd}}/y"'* ]]
    o_filters() { each scrub --stdout --cwd "$c" "$1"; each scrub --session --cwd "$c" "$1"; }
    same_on_levels o_filters "$f"
}

@test "every level: scrub normalizes member lines as the walk over their tokens does" {
    mapfile -t ok < <(levels)
    c=/tmp/acp-snap-cwd-x u=5410e361-ee95-448a-9712-34e65c65617f f=$BATS_TEST_TMPDIR/m.jsonl i=0
    { echo "{\"type\":\"session\",\"version\":0,\"id\":\"$u\",\"createdAt\":1,\"cwd\":\"$c\",\"delegationDepth\":0}"
      for t in "$c" "$c/src/a.c" "see $c/x and $c" "\\\"$c\\\"" "id $u done" "$u" "{{cwd}}/x" "Session $u started" \
               "path\\/with\\u002fslash $c" 'C:\\Users\\x' "/private$c/y" "plain" "$c-not" "x$c" "é $c ü"; do
          for k in 0 1 2; do
              echo "{\"type\":\"assistant/chunk\",\"seq\":$i,\"time\":$((1000 + i)),\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"$t\"}}}"
              i=$((i + 1))
          done
          echo "{\"type\":\"assistant/chunk\",\"seq\":$i,\"time\":$((1000 + i)),\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"$u\",\"name\":\"$c\",\"argumentsDelta\":\"$t\"}}}"
          i=$((i + 1))
      done; } > "$f"
    run -0 scrub --session "$f"
    assert_line --index 1 '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"{{cwd}}"}}}'
    assert_line --index 4 '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"{{sessionId}}","name":"{{cwd}}","argumentsDelta":"{{cwd}}"}}}'
    same_on_levels scrub_filters "$f"
}
