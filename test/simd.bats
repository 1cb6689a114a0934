#!/usr/bin/env bats
# The scanner's instruction sets (ACPSNAP_SIMD, acpsnap(7) ENVIRONMENT): an
# unknown or unrunnable level is refused; on every level this CPU runs, the
# two-stage scan agrees with the byte-at-a-time one on the corpus (and on
# mutations of it), and every filter writes the same bytes as on every other
# level. make check-simd runs the parser suites again under each level.
bats_require_minimum_version 1.5.0
load helpers/common

UNIT="$ROOT/${ACPSNAP_BUILD:-build/rel}/test/simd_unit"
HDR='{"type":"session","version":0,"id":"x","cwd":"/tmp/x"}'

# The levels this CPU runs (a forced level it lacks exits 2).
levels() {
    local l
    for l in avx512 avx2 sse2 scalar; do
        printf '%s\n' "$HDR" | ACPSNAP_SIMD=$l jsonl-project >/dev/null 2>&1 && echo "$l"
    done
    return 0
}

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

# each CMD…: runs CMD at level $l, then prints its exit status
each() {
    local rc=0
    ACPSNAP_SIMD=$l "$@" || rc=$?
    echo "rc $rc"
}

# log_filters FILE / stdout_filters FILE: every filter of that kind of file,
# at level $l, with its exit status
log_filters() {
    each jsonl-project "$1"
    each jsonl-pack "$1"
    each jsonl-pack --unpack "$1"
    each jsonl-pack --check "$1"
    each replay-derive "$1"
    each scrub --session --cwd /tmp/acp-snap-cwd-x "$1"
}
stdout_filters() { each scrub --stdout "$1"; }

# same_on_levels FN FILE: FN's output on FILE is the same at every level
same_on_levels() {
    local l
    for l in "${ok[@]}"; do "$1" "$2" > "$BATS_TEST_TMPDIR/out.$l" 2>&1; done
    for l in "${ok[@]}"; do
        cmp "$BATS_TEST_TMPDIR/out.${ok[0]}" "$BATS_TEST_TMPDIR/out.$l" || { echo "$2: $l differs from ${ok[0]}"; return 1; }
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

# Chunk member lines skip the scanner when they match the member layout byte
# for byte (acpsnap-session(5)); at ACPSNAP_SIMD=scalar nothing does. Lines
# at and near that layout, three in a row (so they pack), decode, pack and
# fail the same on every level.
@test "every level: lines at and near the member layout decode, pack and fail as the scanner decides" {
    mapfile -t ok < <(levels)
    [[ " ${ok[*]} " == *" scalar "* ]]
    P='{"type":"assistant/chunk","seq":S,"time":T,"data":{"turn":1,"step":2,"chunk":'
    bodies=(
        "$P"'{"type":"text-delta","index":0,"text":"hi"}}}'
        "$P"'{"type":"reasoning-delta","index":10,"text":"a\"b\\c\n\u00e9\ud800 é €😀"}}}'
        "$P"'{"type":"tool-call-delta","index":3,"id":"call_1","name":"bash","argumentsDelta":"{\"c\":1}"}}}'
        "$P"'{"type":"tool-call-delta","index":3,"id":"call_1","argumentsDelta":""}}}'
        "$P"'{"type":"tool-call-delta","index":3,"name":"bash","id":"call_1","argumentsDelta":"x"}}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi","extra":1}}}'
        "$P"'{"type":"text-delta","text":"hi","index":0}}}'
        "$P"'{"type":"text-delta","index":0,"argumentsDelta":"hi"}}}'
        "$P"'{"type":"text-delta","index":0.0,"text":"hi"}}}'
        "$P"'{"type":"text-delta","index":-1,"text":"hi"}}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi"} }}'
        "$P"'{"type":"text-delta","index":0,"text":"hi"}}} '
        "$P"'{"type":"text-delta","index":0,"text":"hi"}}}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi"}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi\q"}}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi\u00g0"}}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi'$'\x01''"}}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi'$'\xc3''"}}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi'$'\xed\xa0\x80''"}}}'
        "$P"'{"type":"text-delta","index":0,"text":"hi}}}'
        "$P"'{"type":"text-delta","index":0,"text":hi}}}'
        "$P"'{"type":"text-delta","index":0,"text":null}}}'
        "$P"'{"type":"text-deltas","index":0,"text":"hi"}}}'
        "$P"'{"type":"tool-call-delta","index":3,"id":7,"argumentsDelta":"x"}}}'
    )
    # envelopes: seq time (the three lines count seq up, but a seq too big
    # or spelled with a leading zero stays)
    envs=('0 1000' '7 -5' '01 1000' '1234567890123456 1' '123456789012345 999999999999999'
          '9007199254740991 1' '5 1e3' '5 -0')
    f=$BATS_TEST_TMPDIR/near.jsonl
    n=0
    for b in "${bodies[@]}"; do
        for e in "${envs[@]}"; do
            read -r s t <<< "$e"
            { printf '%s\n' "$HDR"
              for k in 0 1 2; do
                  q=$((10#$s + k)); [ ${#s} -gt 15 ] || [ "$s" = 01 ] && q=$s
                  l=${b/S/$q}; printf '%s\n' "${l/T/$t}"
              done; } > "$f"
            same_on_levels log_filters "$f"
            n=$((n + 1))
        done
    done
    [ "$n" -ge 150 ]
}

@test "every level: member envelopes of every length of number read the same" {
    mapfile -t ok < <(levels)
    P='{"type":"assistant/chunk","seq":S,"time":T,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"hi"}}}'
    f=$BATS_TEST_TMPDIR/num.jsonl
    { printf '%s\n' "$HDR"
      v=1
      for ((d = 1; d <= 17; d++)); do
          for k in 0 1 2 3; do
              n=$(( (v * 7919 + k * 104729) % 1000000007 ))
              t=$(printf '%s%017d' "$((k + 1))" "$n"); t=${t:0:d}
              s=$(printf '%s%017d' "$((k + 2))" "$((n * 31))"); s=${s:0:d}
              for g in 0 5 9; do   # a run of three: a row when the numbers are safe
                  l=${P/S/$((10#$s + g / 4))}; printf '%s\n' "${l/T/$((10#$t + g))}"
              done
              v=$((v + 1))
          done
      done; } > "$f"
    same_on_levels log_filters "$f"
    run -0 jsonl-pack "$f"
    [ "$(grep -c '"seq0"' <<< "$output")" -ge 56 ]
}

@test "every level: packed rows at and near the packer's layout decode, pack and fail as the scanner decides" {
    mapfile -t ok < <(levels)
    [[ " ${ok[*]} " == *" scalar "* ]]
    # ENV is the envelope after "type" (projected: none), each row in both forms
    T='{"type":"text-chunks"ENV,"data":{"turn":1,"step":2,"index":0,'
    C='{"type":"tool-call-chunks"ENV,"data":{"turn":1,"step":2,"index":3,'
    rows=(
        "$T"'"dt":[3,4],"texts":["a","b","c"]}}'
        "$T"'"dt":[],"texts":["only"]}}'
        "${T/text-chunks/reasoning-chunks}"'"dt":[0,-2,10],"texts":["a\"b","\\c\n","\u00e9\ud800","é €😀"]}}'
        "$C"'"dt":[1],"id":"call_1","name":"bash","args":["{\"c\"",":1}"]}}'
        "$C"'"dt":[1],"id":"call_1","args":["x","y"]}}'
        "$C"'"dt":[1],"name":"bash","id":"call_1","args":["x","y"]}}'
        "$C"'"dt":[1],"id":7,"args":["x","y"]}}'
        "$T"'"dt":[3],"texts":["a","b","c"]}}'
        "$T"'"dt":[3,4],"texts":[]}}'
        "$T"'"dt":[],"texts":[]}}'
        "$T"'"dt":[3,4],"texts":["a","b",3]}}'
        "$T"'"dt":[3.0,4],"texts":["a","b","c"]}}'
        "$T"'"dt":[3,4e0],"texts":["a","b","c"]}}'
        "$T"'"dt":[03,4],"texts":["a","b","c"]}}'
        "$T"'"dt":[-0,4],"texts":["a","b","c"]}}'
        "$T"'"dt":[-,4],"texts":["a","b","c"]}}'
        "$T"'"dt":[9007199254740992,4],"texts":["a","b","c"]}}'
        "$T"'"dt":[3,4,],"texts":["a","b","c"]}}'
        "$T"'"dt":[3 ,4],"texts":["a","b","c"]}}'
        "$T"'"dt":[3,4],"texts":["a","b","c"] }}'
        "$T"'"dt":[3,4],"texts":["a","b","c"]}} '
        "$T"'"dt":[3,4],"texts":["a","b","c"]}}}'
        "$T"'"dt":[3,4],"texts":["a","b","c"]}'
        "$T"'"dt":[3,4],"texts":["a","b","c"],"x":1}}'
        "$T"'"texts":["a","b","c"],"dt":[3,4]}}'
        "$T"'"dt":[3,4],"texts":["a","b\q","c"]}}'
        "$T"'"dt":[3,4],"texts":["a","b'$'\x01''","c"]}}'
        "$T"'"dt":[3,4],"texts":["a","b'$'\xc3''","c"]}}'
        "$T"'"dt":[3,4],"texts":["a","b,"c"]}}'
        "$T"'"dt":[3,4],"args":["a","b","c"]}}'
        '{"type":"text-chunks"ENV,"data":{"turn":1,"step":2,"index":0.5,"dt":[3,4],"texts":["a","b","c"]}}'
        '{"type":"text-chunks"ENV,"data":{"turn":"1","step":2,"index":0,"dt":[3,4],"texts":["a","b","c"]}}'
        '{"type":"text-chunks"ENV,"data":{"turn":1,"step":2,"index":0,"dt":[3,4],"texts":["a","b","c"]},"x":1}'
    )
    envs=('' ',"seq0":0,"time0":1000' ',"seq0":5,"time0":-7' ',"seq0":05,"time0":1' ',"seq0":1,"time0":1.5'
          ',"seq0":9007199254740990,"time0":1' ',"time0":1,"seq0":1' ',"seq0":-1,"time0":1')
    f=$BATS_TEST_TMPDIR/rows.jsonl
    n=0
    for r in "${rows[@]}"; do
        for e in "${envs[@]}"; do
            { printf '%s\n' "$HDR"; l=${r/ENV/$e}; printf '%s\n' "$l" "$l"; } > "$f"
            same_on_levels log_filters "$f"
            n=$((n + 1))
        done
    done
    [ "$n" -ge 250 ]
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
