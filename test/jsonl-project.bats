#!/usr/bin/env bats
# jsonl-project: persisted → projected canonical fixture, and --restore.
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/codec

setup() { cd "$BATS_TEST_TMPDIR"; }

@test "--help, --version, bad option" {
    run -0 jsonl-project --help
    assert_line --index 0 --partial 'usage: jsonl-project'
    run -0 jsonl-project --version
    assert_output --regexp '^jsonl-project \(acpsnap\) '
    run -2 --separate-stderr jsonl-project -x
    [[ "$stderr" == *"usage: jsonl-project"* ]]
}

@test "drops envelopes, packs runs, keeps the header byte for byte" {
    mklog a.jsonl '{"type":"turn/start","seq":0,"time":100,"data":{"turn":1}}' \
        "$(tdelta 1 101 1 1 0 a)" "$(tdelta 2 103 1 1 0 b)" "$(tdelta 3 110 1 1 0 c)" \
        '{"type":"user/message","seq":4,"time":111,"data":{"x":1},"surfaceOp":"append"}'
    run -0 jsonl-project a.jsonl
    assert_line --index 0 "$HDR"
    assert_line --index 1 '{"type":"turn/start","data":{"turn":1}}'
    assert_line --index 2 '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[2,7],"texts":["a","b","c"]}}'
    assert_line --index 3 '{"type":"user/message","data":{"x":1},"surfaceOp":"append"}'
    [ "${#lines[@]}" -eq 4 ]
}

@test "mixed packed and unpacked persisted input becomes maximally packed" {
    mklog a.jsonl '{"type":"text-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}' \
        "$(tdelta 3 8 1 1 0 d)" "$(tdelta 4 9 1 1 0 e)"
    run -0 jsonl-project a.jsonl
    assert_line --index 1 '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[1,1,1,1],"texts":["a","b","c","d","e"]}}'
}

@test "zstd in, zstd out; --restore gives synthetic envelopes and keeps rows" {
    mklog a.jsonl '{"type":"turn/start","seq":0,"time":100,"data":{"turn":1}}' \
        "$(tdelta 1 101 1 1 0 a)" "$(tdelta 2 103 1 1 0 b)" "$(tdelta 3 110 1 1 0 c)"
    zstd -q a.jsonl -o a.zst
    jsonl-project -z a.zst > p.zst
    run -0 jsonl-project --restore p.zst
    assert_line --index 1 '{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}'
    assert_line --index 2 '{"type":"text-chunks","seq0":1,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[2,7],"texts":["a","b","c"]}}'
    jsonl-project --restore p.zst | jsonl-project | cmp - <(zstd -dc p.zst)
}

@test "projected input is already a fixture: projecting it again is the identity" {
    mklog a.jsonl '{"type":"turn/start","seq":0,"time":100,"data":{"turn":1}}' "$(tdelta 1 101 1 1 0 a)" "$(tdelta 2 103 1 1 0 b)" "$(tdelta 3 110 1 1 0 c)"
    jsonl-project a.jsonl > p.jsonl
    jsonl-project p.jsonl | cmp - p.jsonl
}

@test "malformed input is trouble with the codec's message" {
    mklog a.jsonl '{"type":"a","seq":0,"time":0}' 'not json'
    run -2 --separate-stderr jsonl-project a.jsonl
    assert_equal "$stderr" "jsonl-project: a.jsonl:3:1: invalid JSON: expected a value"
    assert_equal "$output" ""
}

@test "the reader's errors: NUL byte and stray CR with file:line:col, an empty file" {
    printf '%s\n{"type":"a"}\0\n' "$HDR" > n.jsonl
    run -2 --separate-stderr jsonl-project n.jsonl
    assert_equal "$stderr" "jsonl-project: n.jsonl:2:13: not a text or zstd file (NUL byte at offset 86)"
    printf '%s\n{"type":"a"}\r \n' "$HDR" > c.jsonl
    run -2 --separate-stderr jsonl-project c.jsonl
    assert_equal "$stderr" "jsonl-project: c.jsonl:2:13: carriage return inside a line (only a CRLF line end is accepted)"
    : > e.jsonl
    run -2 --separate-stderr jsonl-project -z e.jsonl
    assert_equal "$stderr" "jsonl-project: e.jsonl: empty file: a session log starts with a header line"
    assert_equal "$output" ''
}
