#!/usr/bin/env bats
# The scanner's levels at and near the layouts some lines take without it
# (acpsnap-session(5)): chunk member lines, their envelopes' numbers, and
# packed rows decode, pack and fail the same on every level this CPU runs
# (a suite of its own: the longest of the level suites, run beside the rest).
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/simd

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
