#!/usr/bin/env bats
# replay-derive: derivation rules, overrides, input forms, errors.
bats_require_minimum_version 1.5.0
load helpers/common

HDR='{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}'
MSG_THROWN='ended without a finish chunk (a thrown stream); this scenario needs a replay.override.json sidecar'

# ck TURN STEP CHUNK: one projected assistant/chunk line
ck() { printf '{"type":"assistant/chunk","data":{"turn":%s,"step":%s,"chunk":%s}}\n' "$1" "$2" "$3"; }
BS='{"type":"block-start","index":0,"blockType":"text"}'
TD='{"type":"text-delta","index":0,"text":"hi"}'
BE='{"type":"block-end","index":0,"block":{"type":"text","text":"hi"}}'
FIN='{"type":"finish","reason":{"kind":"stop"}}'

setup() {
    cd "$BATS_TEST_TMPDIR"
    { echo "$HDR"; echo '{"type":"turn/start","data":{"turn":1}}'
      ck 1 1 "$BS"; ck 1 1 "$TD"; ck 1 1 "$BE"; ck 1 1 "$FIN"
      echo '{"type":"turn/end","data":{"turn":1}}'; } > one.jsonl
    ONE='{"kind":"chunks","chunks":['"$BS,$TD,$BE,$FIN"']}'
}

@test "--help and --version exit 0 on stdout" {
    run -0 replay-derive --help
    assert_line --index 0 --partial 'usage: replay-derive'
    run -0 replay-derive --version
    assert_output --regexp '^replay-derive \(acpsnap\) [0-9]'
}

@test "bad usage exits 2 with the usage line" {
    run -2 --separate-stderr replay-derive --bogus one.jsonl
    assert_equal "$output" ''
    [[ "$stderr" == *'usage: replay-derive [-cS] [-o FILE] [session.jsonl]' ]]
    run -2 --separate-stderr replay-derive one.jsonl one.jsonl
    assert_equal "$stderr" 'usage: replay-derive [-cS] [-o FILE] [session.jsonl]'
    run -2 --separate-stderr replay-derive --override
    [[ "$stderr" == *'usage: replay-derive [-cS] [-o FILE] [session.jsonl]' ]]
}

@test "an event type spelled with escapes derives as the plain spelling does" {
    f=$CORPUS/acp-agent/raw/text-turn/session.jsonl
    sed 's|{"type":"assistant/chunk"|{"type":"assistant\\/chunk"|' "$f" > "$BATS_TEST_TMPDIR/esc.jsonl"
    [ "$(grep -c 'assistant\\/chunk' "$BATS_TEST_TMPDIR/esc.jsonl")" -gt 2 ]
    run -0 replay-derive "$f"
    want=$output
    run -0 replay-derive "$BATS_TEST_TMPDIR/esc.jsonl"
    [ "$output" = "$want" ]
    [ -n "$want" ]
}

@test "header-only log gives an empty script" {
    echo "$HDR" > empty.jsonl
    run -0 --separate-stderr replay-derive empty.jsonl
    assert_equal "$output" ''
    assert_equal "$stderr" ''
    run -0 replay-derive --count empty.jsonl
    assert_equal "$output" 0
}

@test "one call: chunks copied through, non-chunk events ignored" {
    run -0 replay-derive one.jsonl
    assert_equal "$output" "$ONE"
    run -0 replay-derive --count one.jsonl
    assert_equal "$output" 1
}

@test "chunk payload bytes are copied verbatim (escapes, number spellings)" {
    c='{"type":"text-delta","index":0,"text":"caf\u00e9 \/ \ud83d\ude00","x":1.0E+2,"y":-0.50}'
    { echo "$HDR"; ck 1 1 "$c"; ck 1 1 "$FIN"; } > v.jsonl
    run -0 replay-derive v.jsonl
    assert_equal "$output" '{"kind":"chunks","chunks":['"$c,$FIN"']}'
}

@test "stdin and - read the log" {
    run -0 bash -c 'replay-derive < one.jsonl'
    assert_equal "$output" "$ONE"
    run -0 bash -c 'cat one.jsonl | replay-derive -'
    assert_equal "$output" "$ONE"
}

@test "retries sharing one (turn, step) are separate calls" {
    { echo "$HDR"; ck 1 1 "$TD"; ck 1 1 '{"type":"finish","reason":{"kind":"error"}}'
      ck 1 1 "$BS"; ck 1 1 "$FIN"; ck 1 2 "$TD"; ck 1 2 "$FIN"; } > r.jsonl
    run -0 replay-derive r.jsonl
    assert_equal "${#lines[@]}" 3
    assert_line --index 0 '{"kind":"chunks","chunks":['"$TD"',{"type":"finish","reason":{"kind":"error"}}]}'
    assert_line --index 1 '{"kind":"chunks","chunks":['"$BS,$FIN"']}'
    assert_line --index 2 '{"kind":"chunks","chunks":['"$TD,$FIN"']}'
    run -0 replay-derive -c r.jsonl
    assert_equal "$output" 3
}

@test "a (turn, step) change with a call open is a thrown stream" {
    { echo "$HDR"; ck 1 1 "$FIN"; ck 2 1 "$BS"; ck 2 1 "$TD"; ck 2 2 "$TD"; ck 2 2 "$FIN"; } > t.jsonl
    run -2 --separate-stderr replay-derive t.jsonl
    assert_equal "$stderr" "replay-derive: t.jsonl:3: model call 2/1 $MSG_THROWN"
    assert_equal "$output" ''
}

@test "end of log with a call open is a thrown stream" {
    { echo "$HDR"; ck 1 1 "$BS"; ck 1 1 "$TD"; } > t.jsonl
    run -2 --separate-stderr replay-derive t.jsonl
    assert_equal "$stderr" "replay-derive: t.jsonl:2: model call 1/1 $MSG_THROWN"
    run -2 --separate-stderr replay-derive --count t.jsonl
    assert_equal "$output" ''
}

@test "string turn and step name the call as written" {
    { echo "$HDR"; ck '"a"' '"b"' "$TD"; } > t.jsonl
    run -2 --separate-stderr replay-derive t.jsonl
    assert_equal "$stderr" "replay-derive: t.jsonl:2: model call a/b $MSG_THROWN"
}

SUMMARY_RAW='[{"type":"text","text":"summary"},{"type":"reasoning","text":"r"}]'

@test "marked compaction summary: rebuilt from rawOutput, with usage" {
    { echo "$HDR"; ck 1 1 "$TD"; ck 1 1 "$FIN"
      echo '{"type":"compaction/summary","data":{"summary":"s","llmStreamCall":true,"rawOutput":'"$SUMMARY_RAW"',"usage":{"inputTokens":7,"outputTokens":2}}}'
      ck 2 1 "$FIN"; } > c.jsonl
    run -0 replay-derive c.jsonl
    assert_equal "${#lines[@]}" 3
    assert_line --index 1 '{"kind":"chunks","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"block-end","index":0,"block":{"type":"text","text":"summary"}},{"type":"block-start","index":1,"blockType":"reasoning"},{"type":"block-end","index":1,"block":{"type":"reasoning","text":"r"}},{"type":"usage","usage":{"inputTokens":7,"outputTokens":2}},{"type":"finish","reason":{"kind":"stop"}}]}'
    assert_line --index 2 '{"kind":"chunks","chunks":['"$FIN"']}'
}

@test "marked compaction summary without usage, and with empty rawOutput" {
    { echo "$HDR"
      echo '{"type":"compaction/summary","data":{"llmStreamCall":true,"rawOutput":[{"type":"text","text":"x"}]}}'
      echo '{"type":"compaction/summary","data":{"llmStreamCall":true,"rawOutput":[]}}'; } > c.jsonl
    run -0 replay-derive c.jsonl
    assert_line --index 0 '{"kind":"chunks","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"block-end","index":0,"block":{"type":"text","text":"x"}},{"type":"finish","reason":{"kind":"stop"}}]}'
    assert_line --index 1 '{"kind":"chunks","chunks":[{"type":"finish","reason":{"kind":"stop"}}]}'
}

@test "unmarked compaction summary contributes nothing" {
    { echo "$HDR"; ck 1 1 "$FIN"
      echo '{"type":"compaction/summary","data":{"summary":"s","rawOutput":'"$SUMMARY_RAW"'}}'
      echo '{"type":"compaction/summary","data":{"llmStreamCall":false,"rawOutput":[]}}'; } > c.jsonl
    run -0 replay-derive c.jsonl
    assert_output '{"kind":"chunks","chunks":['"$FIN"']}'
}

@test "marked compaction summary without rawOutput fails" {
    { echo "$HDR"; echo '{"type":"compaction/summary","data":{"llmStreamCall":true}}'; } > c.jsonl
    run -2 --separate-stderr replay-derive c.jsonl
    assert_equal "$stderr" 'replay-derive: c.jsonl:2: compaction/summary marks an LLM stream call without rawOutput'
}

@test "an unterminated call before a compaction summary is a thrown stream" {
    { echo "$HDR"; ck 3 2 "$BS"; ck 3 2 "$TD"
      echo '{"type":"compaction/summary","data":{"summary":"s"}}'; } > c.jsonl
    run -2 --separate-stderr replay-derive c.jsonl
    assert_equal "$stderr" "replay-derive: c.jsonl:2: model call 3/2 $MSG_THROWN"
}

@test "malformed chunk events fail" {
    { echo "$HDR"; echo '{"type":"assistant/chunk","data":{"turn":1,"step":1}}'; } > m.jsonl
    run -2 --separate-stderr replay-derive m.jsonl
    assert_equal "$stderr" 'replay-derive: m.jsonl:2: assistant/chunk event without a chunk object'
    { echo "$HDR"; echo '{"type":"assistant/chunk","data":3}'; } > m.jsonl
    run -2 --separate-stderr replay-derive m.jsonl
    assert_equal "$stderr" 'replay-derive: m.jsonl:2: assistant/chunk event without a data object'
}

# A child log: seedLength counts decoded events (a packed row counts per member).
child_log() {
    { echo '{"type":"session","id":"c","createdAt":2,"parentSession":"p","seedLength":5,"delegationDepth":1}'
      ck 1 1 '{"type":"block-start","index":0,"blockType":"text"}'
      echo '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}'
      ck 1 1 "$FIN"
      ck 1 1 "$TD"; ck 1 1 "$FIN"; } > child.jsonl
}

@test "child log: seedLength events skipped, packed members counted singly" {
    child_log
    run -0 replay-derive child.jsonl
    assert_output '{"kind":"chunks","chunks":['"$TD,$FIN"']}'
}

@test "child log: --no-seed-skip derives the whole log" {
    child_log
    run -0 replay-derive --no-seed-skip child.jsonl
    assert_line --index 0 '{"kind":"chunks","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"a"},{"type":"text-delta","index":0,"text":"b"},{"type":"text-delta","index":0,"text":"c"},'"$FIN"']}'
    assert_line --index 1 '{"kind":"chunks","chunks":['"$TD,$FIN"']}'
    run -0 replay-derive -S -c child.jsonl
    assert_equal "$output" 2
}

@test "zstd input gives the same script" {
    zstd -q -c one.jsonl > one.jsonl.zst
    run -0 replay-derive one.jsonl.zst
    assert_equal "$output" "$ONE"
}

@test "persisted (enveloped) input gives the same script as projected" {
    { echo "$HDR"; echo '{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}'
      printf '{"type":"assistant/chunk","seq":1,"time":6,"data":{"turn":1,"step":1,"chunk":%s}}\n' "$BS"
      printf '{"type":"assistant/chunk","seq":2,"time":7,"data":{"turn":1,"step":1,"chunk":%s}}\n' "$TD"
      printf '{"type":"assistant/chunk","seq":3,"time":7,"data":{"turn":1,"step":1,"chunk":%s}}\n' "$BE"
      printf '{"type":"assistant/chunk","seq":4,"time":9,"data":{"turn":1,"step":1,"chunk":%s}}\n' "$FIN"
    } > p.jsonl
    run -0 replay-derive p.jsonl
    assert_equal "$output" "$ONE"
}

@test "packed rows expand into their chunks" {
    { echo "$HDR"; ck 1 1 '{"type":"block-start","index":0,"blockType":"tool-call"}'
      echo '{"type":"tool-call-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0,0],"id":"c1","name":"bash","args":["{","\"a\"",":1}"]}}'
      ck 1 1 "$FIN"; } > k.jsonl
    run -0 replay-derive k.jsonl
    assert_output '{"kind":"chunks","chunks":[{"type":"block-start","index":0,"blockType":"tool-call"},{"type":"tool-call-delta","index":0,"id":"c1","name":"bash","argumentsDelta":"{"},{"type":"tool-call-delta","index":0,"id":"c1","name":"bash","argumentsDelta":"\"a\""},{"type":"tool-call-delta","index":0,"id":"c1","name":"bash","argumentsDelta":":1}"},'"$FIN"']}'
}

# ---------------------------------------------------------------- overrides

@test "override: a bare array replaces the script, compacted, even over a thrown stream" {
    { echo "$HDR"; ck 1 1 "$TD"; } > t.jsonl
    printf '[\n  { "kind": "hang", "readyFile": ".ready" },\n  { "kind": "throw", "chunks": [ %s ], "message": "boom", "code": "E" }\n]\n' "$TD" > o.json
    run -0 replay-derive --override o.json t.jsonl
    assert_line --index 0 '{"kind":"hang","readyFile":".ready"}'
    assert_line --index 1 '{"kind":"throw","chunks":['"$TD"'],"message":"boom","code":"E"}'
    run -0 replay-derive -c -o o.json t.jsonl
    assert_equal "$output" 2
}

@test "override: patches swap and append" {
    { echo "$HDR"; ck 1 1 "$TD"; ck 1 1 "$FIN"; ck 1 2 "$FIN"; } > s.jsonl
    echo '{"patches":[{"at":2,"entry":{"kind":"hang"}},{"at":0,"entry":{"kind":"throw","chunks":[],"message":"m","code":"c"}}]}' > o.json
    run -0 replay-derive -o o.json s.jsonl
    assert_equal "${#lines[@]}" 3
    assert_line --index 0 '{"kind":"throw","chunks":[],"message":"m","code":"c"}'
    assert_line --index 1 '{"kind":"chunks","chunks":['"$FIN"']}'
    assert_line --index 2 '{"kind":"hang"}'
    run -0 replay-derive -c -o o.json s.jsonl
    assert_equal "$output" 3
    echo '{"patches":[]}' > e.json
    run -0 replay-derive -o e.json s.jsonl
    assert_equal "${#lines[@]}" 2
}

@test "override: a patches document does not hide a thrown stream" {
    { echo "$HDR"; ck 1 1 "$TD"; } > t.jsonl
    echo '{"patches":[{"at":0,"entry":{"kind":"hang"}}]}' > o.json
    run -2 --separate-stderr replay-derive -o o.json t.jsonl
    assert_equal "$stderr" "replay-derive: t.jsonl:2: model call 1/1 $MSG_THROWN"
}

# ovr_err 'DOCUMENT' 'expected message after "o.json:"'
ovr_err() {
    printf '%s\n' "$1" > o.json
    run -2 --separate-stderr replay-derive -o o.json one.jsonl
    assert_equal "$output" ''
    assert_equal "$stderr" "replay-derive: o.json:$2"
}

@test "override errors: document shape and JSON" {
    printf '[{"kind":"hang"},]\n' > o.json
    run -2 --separate-stderr replay-derive -o o.json one.jsonl
    assert_regex "$stderr" '^replay-derive: o\.json:1:18: invalid JSON: [a-z]'
    printf '' > o.json
    run -2 --separate-stderr replay-derive -o o.json one.jsonl
    assert_regex "$stderr" '^replay-derive: o\.json:1:1: invalid JSON: [a-z]'
    ovr_err '{"patch":[]}' '1:1: document must be a ReplayEntry[] or { patches: [...] }'
    ovr_err '{"patches":[],"x":1}' '1:1: document must be a ReplayEntry[] or { patches: [...] }'
    ovr_err '{"patches":{}}' '1:12: document must be a ReplayEntry[] or { patches: [...] }'
    ovr_err '"x"' '1:1: document must be a ReplayEntry[] or { patches: [...] }'
}

@test "override errors: entries" {
    ovr_err '[3]' '1:2: entry 0 must be an object'
    ovr_err '[{"kind":"hang"},{"kind":"bogus"}]' '1:26: entry 1 has unknown kind "bogus"'
    ovr_err '[{"chunks":[]}]' '1:2: entry 0 has unknown kind undefined'
    ovr_err '[{"kind":7}]' '1:10: entry 0 has unknown kind 7'
    ovr_err '[{"kind":"chunks","chunks":[],"x":1}]' '1:2: entry 0 has invalid chunks-entry fields (want exactly kind, chunks)'
    ovr_err '[{"kind":"chunks"}]' '1:2: entry 0 has invalid chunks-entry fields (want exactly kind, chunks)'
    ovr_err '[{"kind":"throw","chunks":[],"message":"m"}]' '1:2: entry 0 has invalid throw-entry fields (want exactly kind, chunks, message, code)'
    ovr_err '[{"kind":"throw","chunks":[],"message":"","code":"c"}]' '1:40: entry 0 message must be a non-empty string'
    ovr_err '[{"kind":"throw","chunks":[],"message":"m","code":1}]' '1:51: entry 0 code must be a non-empty string'
    ovr_err '[{"kind":"throw","chunks":{},"message":"m","code":"c"}]' '1:27: entry 0 chunks must be an array'
    ovr_err '[{"kind":"hang","x":1}]' '1:2: entry 0 has invalid hang-entry fields (want kind and optional readyFile)'
    ovr_err '[{"kind":"hang","readyFile":""}]' '1:29: entry 0 readyFile must be a non-empty string'
    ovr_err '[{"kind":"hang","readyFile":null}]' '1:29: entry 0 readyFile must be a non-empty string'
}

@test "override errors: chunks" {
    ovr_err '[{"kind":"chunks","chunks":[1]}]' '1:29: entry 0.chunks[0] must have a known StreamChunk type'
    ovr_err '[{"kind":"chunks","chunks":[{"type":"finish"},{"type":"text"}]}]' '1:55: entry 0.chunks[1] must have a known StreamChunk type'
    ovr_err '[{"kind":"chunks","chunks":[{"index":0}]}]' '1:29: entry 0.chunks[0] must have a known StreamChunk type'
    ovr_err '[{"kind":"chunks","chunks":[{"type":1}]}]' '1:37: entry 0.chunks[0] must have a known StreamChunk type'
}

@test "override errors: patches" {
    ovr_err '{"patches":[{"at":0}]}' '1:13: patch 0 must contain exactly at and entry'
    ovr_err '{"patches":[{"at":0,"entry":{"kind":"hang"},"x":1}]}' '1:13: patch 0 must contain exactly at and entry'
    ovr_err '{"patches":[7]}' '1:13: patch 0 must contain exactly at and entry'
    ovr_err '{"patches":[{"at":1.5,"entry":{"kind":"hang"}}]}' '1:19: patch 0 at must be a non-negative safe integer'
    ovr_err '{"patches":[{"at":-1,"entry":{"kind":"hang"}}]}' '1:19: patch 0 at must be a non-negative safe integer'
    ovr_err '{"patches":[{"at":"0","entry":{"kind":"hang"}}]}' '1:19: patch 0 at must be a non-negative safe integer'
    ovr_err '{"patches":[{"at":9007199254740992,"entry":{"kind":"hang"}}]}' '1:19: patch 0 at must be a non-negative safe integer'
    ovr_err '{"patches":[{"at":0,"entry":{"kind":"x"}}]}' '1:37: patch 0.entry has unknown kind "x"'
    ovr_err '{"patches":[{"at":0,"entry":{"kind":"hang"}},{"at":0,"entry":{"kind":"hang"}}]}' '1:46: patch 1: duplicate override patch index 0 (as patch 0)'
    ovr_err '{"patches":[{"at":2,"entry":{"kind":"hang"}}]}' '1:13: patch 0: override patch index 2 out of range (derived script has 1 call(s); == length appends)'
}

@test "override: at spelled 1.0 or 1e0 is an integer, as in the reference" {
    echo '{"patches":[{"at":1e0,"entry":{"kind":"hang"}}]}' > o.json
    run -0 replay-derive -o o.json one.jsonl
    assert_line --index 1 '{"kind":"hang"}'
}

@test "override: positions count lines in a multi-line document" {
    printf '[\n  {"kind":"hang"},\n  {"kind":"nope"}\n]\n' > o.json
    run -2 --separate-stderr replay-derive -o o.json one.jsonl
    assert_equal "$stderr" 'replay-derive: o.json:3:11: entry 1 has unknown kind "nope"'
}

@test "missing log and missing override fail with exit 2" {
    run -2 --separate-stderr replay-derive nope.jsonl
    [[ "$stderr" == 'replay-derive: '*nope.jsonl* ]]
    run -2 --separate-stderr replay-derive -o nope.json one.jsonl
    [[ "$stderr" == 'replay-derive: '*nope.json* ]]
    assert_equal "$output" ''
}

@test "truncated zstd input and a header-less log fail with exit 2" {
    { cat one.jsonl; for i in $(seq 200); do ck 2 1 "$TD"; done; ck 2 1 "$FIN"; } | zstd -q -c > z.zst
    head -c $(( $(stat -c %s z.zst) - 4 )) z.zst > t.zst
    run -2 --separate-stderr replay-derive t.zst
    assert_regex "$stderr" '^replay-derive: t\.zst: truncated zstd frame at byte offset [0-9]+$'
    assert_equal "$output" ''
    printf '{"type":"turn/start","data":{"turn":1}}\n' > h.jsonl
    run -2 --separate-stderr replay-derive h.jsonl
    assert_regex "$stderr" '^replay-derive: h\.jsonl:1: '
}

@test "a failing small log writes nothing; past 1 MiB entries stream" {
    { echo "$HDR"; ck 1 1 "$FIN"; ck 2 1 "$TD"; } > small.jsonl
    run -2 --separate-stderr replay-derive small.jsonl
    assert_equal "$output" ''
    big=$(printf '%0600d' 0)
    { echo "$HDR"
      for i in $(seq 2000); do ck "$i" 1 '{"type":"text-delta","index":0,"text":"'"$big"'"}'; ck "$i" 1 "$FIN"; done
      ck 9999 1 "$TD"; } > big.jsonl
    run -2 --separate-stderr replay-derive big.jsonl
    assert_equal "$stderr" "replay-derive: big.jsonl:4002: model call 9999/1 $MSG_THROWN"
    [ "${#lines[@]}" -gt 0 ] && [ "${#lines[@]}" -lt 2000 ]
}

@test "a negative or fractional seedLength fails unless -S" {
    { echo '{"type":"session","seedLength":-1}'; ck 1 1 "$FIN"; } > n.jsonl
    run -2 --separate-stderr replay-derive n.jsonl
    assert_equal "$stderr" 'replay-derive: n.jsonl:1:32: seedLength must be a non-negative integer'
    { echo '{"type":"session","seedLength":1.5}'; ck 1 1 "$FIN"; } > n.jsonl
    run -2 --separate-stderr replay-derive n.jsonl
    assert_equal "$stderr" 'replay-derive: n.jsonl:1:32: seedLength must be a non-negative integer'
    run -0 replay-derive -S n.jsonl
    assert_output '{"kind":"chunks","chunks":['"$FIN"']}'
    { echo '{"type":"session","seedLength":"3"}'; ck 1 1 "$FIN"; } > n.jsonl
    run -0 replay-derive n.jsonl
    assert_output '{"kind":"chunks","chunks":['"$FIN"']}'
}
