#!/usr/bin/env bats
# jsonl-pack: packing, unpacking, --check, zstd, and every class of bad input.
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/codec

setup() { cd "$BATS_TEST_TMPDIR"; }

# bad NAME BODYLINE MESSAGE: a log with one bad body line fails with exit 2,
# the exact message, and writes nothing.
bad() {
    printf '%s\n' "$HDR" > f.jsonl
    printf "$1\n" >> f.jsonl
    run -2 --separate-stderr jsonl-pack f.jsonl
    assert_equal "$stderr" "jsonl-pack: f.jsonl:2$2"
    assert_equal "$output" ""
}

@test "--help and --version; bad usage exits 2" {
    run -0 jsonl-pack --help
    assert_line --index 0 --partial 'usage: jsonl-pack'
    run -0 jsonl-pack --version
    assert_output --regexp '^jsonl-pack \(acpsnap\) [0-9.]+$'
    run -2 --separate-stderr jsonl-pack --bogus
    [[ "$stderr" == *"unrecognized option '--bogus'"*"usage: jsonl-pack"* ]]
    run -2 --separate-stderr jsonl-pack -u -c x
    assert_equal "$stderr" "jsonl-pack: --unpack and --check exclude each other"
}

@test "a missing file is trouble" {
    run -2 --separate-stderr jsonl-pack nope.jsonl
    assert_equal "$stderr" "jsonl-pack: unable to open nope.jsonl: No such file or directory"
}

@test "packs a run of 3 deltas into one row; 2 stay events; persisted in, persisted out" {
    mklog a.jsonl "$(tdelta 0 10 1 1 0 a)" "$(tdelta 1 15 1 1 0 b)" "$(tdelta 2 12 1 1 0 c)" \
        '{"type":"step/end","seq":3,"time":20,"data":{"turn":1,"step":1}}' \
        "$(tdelta 4 30 1 1 1 x)" "$(tdelta 5 31 1 1 1 y)"
    run -0 jsonl-pack a.jsonl
    assert_line --index 1 '{"type":"text-chunks","seq0":0,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[5,-3],"texts":["a","b","c"]}}'
    assert_line --index 2 '{"type":"step/end","seq":3,"time":20,"data":{"turn":1,"step":1}}'
    assert_line --index 3 "$(tdelta 4 30 1 1 1 x)"
    assert_line --index 4 "$(tdelta 5 31 1 1 1 y)"
    [ "${#lines[@]}" -eq 5 ]
}

@test "runs break on index, turn/step, seq gaps and shape; tool-call rows keep id and name" {
    mklog a.jsonl "$(tdelta 0 0 1 1 0 a)" "$(tdelta 1 0 1 1 0 b)" "$(tdelta 2 0 1 1 1 c)" "$(tdelta 4 0 1 1 1 d)" \
        '{"type":"assistant/chunk","seq":5,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"{"}}}' \
        '{"type":"assistant/chunk","seq":6,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"\"a\""}}}' \
        '{"type":"assistant/chunk","seq":7,"time":2,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"}"}}}' \
        '{"type":"assistant/chunk","seq":8,"time":2,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":3,"text":"e","extra":1}}}'
    run -0 jsonl-pack a.jsonl
    [ "${#lines[@]}" -eq 7 ]
    assert_line --index 5 '{"type":"tool-call-chunks","seq0":5,"time0":0,"data":{"turn":1,"step":1,"index":2,"dt":[1,1],"id":"c1","name":"bash","args":["{","\"a\"","}"]}}'
    run -1 jsonl-pack -c a.jsonl
    jsonl-pack a.jsonl > b.jsonl
    run -0 jsonl-pack -c b.jsonl
}

@test "--check names the first non-canonical line and exits 1" {
    mklog a.jsonl '{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}' "$(tdelta 1 0 1 1 0 a)" "$(tdelta 2 0 1 1 0 b)" "$(tdelta 3 0 1 1 0 c)"
    run -1 --separate-stderr jsonl-pack --check a.jsonl
    assert_equal "$stderr" "jsonl-pack: a.jsonl:3: not in canonical layout (jsonl-pack rewrites it)"
    jsonl-pack a.jsonl > b.jsonl
    run -0 jsonl-pack --check b.jsonl
    # a row of two members decodes but is not canonical
    mklog c.jsonl '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}'
    run -1 --separate-stderr jsonl-pack --check c.jsonl
    assert_equal "$stderr" "jsonl-pack: c.jsonl:2: not in canonical layout (jsonl-pack rewrites it)"
    run -0 jsonl-pack c.jsonl
    assert_line --index 1 '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}}'
}

@test "projected in, projected out; --unpack restores synthetic envelopes" {
    mklog p.jsonl '{"type":"turn/start","data":{"turn":1}}' \
        '{"type":"reasoning-chunks","data":{"turn":1,"step":1,"index":0,"dt":[4,5],"texts":["x","y","z"]}}'
    run -0 jsonl-pack p.jsonl
    assert_output "$(cat p.jsonl)"
    run -0 jsonl-pack --unpack p.jsonl
    assert_line --index 1 '{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}'
    assert_line --index 2 '{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":0,"text":"x"}}}'
    assert_line --index 4 '{"type":"assistant/chunk","seq":3,"time":9,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":0,"text":"z"}}}'
}

@test "stdin, '-', zstd input and --zstd output round-trip" {
    mklog a.jsonl "$(tdelta 0 0 1 1 0 a)" "$(tdelta 1 0 1 1 0 b)" "$(tdelta 2 0 1 1 0 c)"
    jsonl-pack a.jsonl > want
    jsonl-pack --zstd a.jsonl > a.zst
    [ "$(head -c 4 a.zst | od -An -tx1 | tr -d ' \n')" = 28b52ffd ]
    # two frames: the header alone, then the body
    [ "$(zstd -lv a.zst 2>/dev/null | grep -c 'Frame' || true)" -ge 0 ]
    run -0 jsonl-pack - < a.zst
    assert_output "$(cat want)"
    run -0 bash -c 'cat a.jsonl | jsonl-pack'
    assert_output "$(cat want)"
    run -0 zstd -dc a.zst
    assert_output "$(cat want)"
}

@test "refuses to write zstd to a terminal" {
    command -v script >/dev/null || skip "no script(1)"
    mklog a.jsonl
    run script -qec "$BIN/jsonl-pack -z a.jsonl" /dev/null
    assert_output --partial "refusing to write compressed data to a terminal"
}

@test "valid oddities pass through byte for byte" {
    mklog a.jsonl \
        '{"type":"x/nums","seq":0,"time":0,"data":{"a":1.0,"b":1E2,"c":12345678901234567890,"d":-0,"e":1e16}}' \
        '{"type":"x/esc","seq":1,"time":0,"data":{"u":"\u00e9\u4e2d","lone":"\ud83d","del":"","slash":"\/"},"surfaceOp":"append","extra":[1]}' \
        "{\"type\":\"x/deep\",\"seq\":2,\"time\":0,\"data\":$(printf '[%.0s' {1..500})$(printf ']%.0s' {1..500})}"
    run -0 jsonl-pack a.jsonl
    assert_output "$(cat a.jsonl)"
    run -0 jsonl-pack -u a.jsonl
    assert_output "$(cat a.jsonl)"
    jsonl-project a.jsonl | jsonl-project --restore > back.jsonl
    cmp back.jsonl a.jsonl
}

@test "bad JSON: a missing key, a truncated object, a missing colon, a bare word" {
    bad '{"type":"a",}' ':13: invalid JSON: expected a string key'
    bad '{"type":"a"' ':12: invalid JSON: unexpected end of input'
    bad '{"type" "a"}' ":9: invalid JSON: expected ':'"
    bad '{"type":nope}' ':9: invalid JSON: expected a value'
    bad '{"type":"a"]' ":12: invalid JSON: expected ',' or '}'"
    bad '{"type":"a' ':9: invalid JSON: unterminated string'
}

@test "bad JSON: invalid UTF-8 (stray byte, overlong, surrogate)" {
    bad '{"type":"\xff"}' ':10: invalid JSON: invalid UTF-8'
    bad '{"type":"\xc0\xaf"}' ':10: invalid JSON: invalid UTF-8'
    bad '{"type":"\xed\xa0\x80"}' ':10: invalid JSON: invalid UTF-8'
}

@test "bad JSON: invalid escapes" {
    bad '{"type":"a\\x"}' ':11: invalid JSON: invalid escape'
    bad '{"type":"a\\u12"}' ':11: invalid JSON: invalid \u escape'
}

@test "bad JSON: NaN, Infinity, leading zeros, plus sign, bad numbers" {
    bad '{"type":"a","n":NaN}' ':17: invalid JSON: NaN and Infinity are not valid JSON'
    bad '{"type":"a","n":-Infinity}' ':17: invalid JSON: NaN and Infinity are not valid JSON'
    bad '{"type":"a","n":01}' ':17: invalid JSON: leading zeros are not allowed'
    bad '{"type":"a","n":+1}' ":17: invalid JSON: '+' is not allowed before a number"
    bad '{"type":"a","n":1.}' ':19: invalid JSON: invalid number'
    bad '{"type":"a","n":1e}' ':19: invalid JSON: invalid number'
}

@test "bad JSON: raw control character; not an object; two values on a line" {
    bad '{"type":"a\tb"}' ':11: invalid JSON: raw control character in string'
    bad '[1,2]' ': not a JSON object'
    bad '"text"' ': not a JSON object'
    bad '{"type":"a"} {"type":"b"}' ':14: invalid JSON: trailing characters after the value'
}

@test "bad records: missing type, non-string type, empty line, second header" {
    bad '{"a":1}' ': missing "type"'
    bad '{"type":1}' ': "type" must be a string'
    bad '' ': empty line'
    bad '{"type":"session"}' ': a second session header'
    bad '{"type":"a","seq":1}' ': event has "seq" without "time"'
    bad '{"type":"a","time":1}' ': event has "time" without "seq"'
}

@test "malformed packed rows: each class its own message" {
    R='{"type":"text-chunks","seq0":0,"time0":0,"data":'
    bad "$R"'{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b","c"]}}' ': malformed text-chunks row: dt length 1 does not match 3 members'
    bad "$R"'{"turn":1,"step":1,"index":0,"dt":[0,"1"],"texts":["a","b","c"]}}' ': malformed text-chunks row: dt must be an array of safe integers'
    bad "$R"'{"turn":1,"step":1,"index":0,"dt":[0,1],"texts":["a",2,"c"]}}' ': malformed text-chunks row: texts must be a non-empty string array'
    bad "$R"'{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}' ': malformed text-chunks row: texts must be a non-empty string array'
    bad "$R"'{"turn":1,"step":1,"index":0,"dt":[0,1],"texts":["a","b","c"],"x":1}}' ': malformed text-chunks row: data must be exactly {turn, step, index, dt, texts}'
    bad "$R"'{"turn":"1","step":1,"index":0,"dt":[0,1],"texts":["a","b","c"]}}' ': malformed text-chunks row: turn/step/index must be numbers'
    bad "$R"'[]}' ': malformed text-chunks row: data must be an object'
    bad '{"type":"reasoning-chunks","seq0":-1,"time0":0,"data":{}}' ': malformed reasoning-chunks row: seq0 must be a non-negative safe integer'
    bad '{"type":"reasoning-chunks","seq0":0,"time0":1.5,"data":{}}' ': malformed reasoning-chunks row: time0 must be a safe integer'
    bad '{"type":"reasoning-chunks","seq0":0,"data":{}}' ': malformed reasoning-chunks row: seq0 without time0'
    bad '{"type":"reasoning-chunks","seq0":0,"time0":0,"data":{},"x":1}' ': malformed reasoning-chunks row: envelope must be exactly {type, seq0, time0, data}'
    bad '{"type":"reasoning-chunks","data":{},"x":1}' ': malformed reasoning-chunks row: envelope must be exactly {type, data}'
    T='{"type":"tool-call-chunks","seq0":0,"time0":0,"data":'
    bad "$T"'{"turn":1,"step":1,"index":0,"dt":[0,1],"args":["a","b","c"]}}' ': malformed tool-call-chunks row: data must be exactly {turn, step, index, id, name?, dt, args}'
    bad "$T"'{"turn":1,"step":1,"index":0,"id":7,"dt":[0,1],"args":["a","b","c"]}}' ': malformed tool-call-chunks row: id (and name when present) must be strings'
    bad "$T"'{"turn":1,"step":1,"index":0,"id":"c","dt":[0,1],"args":"abc"}}' ': malformed tool-call-chunks row: args must be a non-empty string array'
    bad '{"type":"text-chunks","seq0":9007199254740990,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,1],"texts":["a","b","c"]}}' ': malformed text-chunks row: member seqs must stay safe integers'
    bad '{"type":"text-chunks","seq0":0,"time0":9007199254740990,"data":{"turn":1,"step":1,"index":0,"dt":[0,9],"texts":["a","b","c"]}}' ': malformed text-chunks row: member times must stay safe integers'
}

@test "projected and persisted body lines mixed in one file" {
    mklog f.jsonl '{"type":"a","seq":0,"time":0}' '{"type":"b"}'
    run -2 --separate-stderr jsonl-pack f.jsonl
    assert_equal "$stderr" "jsonl-pack: f.jsonl:3: projected and persisted lines are mixed: this line lacks an envelope, line 2 has one"
    mklog g.jsonl '{"type":"b"}' '{"type":"text-chunks","seq0":1,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,1],"texts":["a","b","c"]}}'
    run -2 --separate-stderr jsonl-pack g.jsonl
    assert_equal "$stderr" "jsonl-pack: g.jsonl:3: projected and persisted lines are mixed: this line has an envelope, line 2 does not"
}

@test "a truncated zstd frame, a non-zstd binary file, an empty file, a header-less file" {
    mklog a.jsonl '{"type":"a"}' '{"type":"b"}'
    jsonl-pack -z a.jsonl > a.zst
    size=$(stat -c %s a.zst)
    head -c $((size - 3)) a.zst > t.zst
    run -2 --separate-stderr jsonl-pack t.zst
    assert_stderr_regex() { [[ "$stderr" =~ $1 ]]; }
    assert_stderr_regex '^jsonl-pack: t\.zst: truncated zstd frame at byte offset [1-9][0-9]*$'
    printf 'ab\0cd\n' > bin.dat
    run -2 --separate-stderr jsonl-pack bin.dat
    assert_equal "$stderr" "jsonl-pack: bin.dat:1:3: not a text or zstd file (NUL byte at offset 2)"
    : > empty.jsonl
    run -2 --separate-stderr jsonl-pack empty.jsonl
    assert_equal "$stderr" "jsonl-pack: empty.jsonl: empty file: a session log starts with a header line"
    printf '{"type":"turn/start"}\n' > nh.jsonl
    run -2 --separate-stderr jsonl-pack nh.jsonl
    assert_equal "$stderr" 'jsonl-pack: nh.jsonl:1: not a session log: line 1 is not a header ({"type":"session",…})'
    printf '{"type":"session"\n' > badh.jsonl
    run -2 --separate-stderr jsonl-pack badh.jsonl
    assert_equal "$stderr" 'jsonl-pack: badh.jsonl:1:18: invalid JSON: unexpected end of input'
}

@test "header-only log, CRLF input and a final line without LF" {
    printf '%s\n' "$HDR" > h.jsonl
    run -0 jsonl-pack h.jsonl
    assert_output "$HDR"
    printf '%s\r\n{"type":"a","seq":0,"time":0}' "$HDR" > c.jsonl
    run -0 jsonl-pack c.jsonl
    assert_line --index 1 '{"type":"a","seq":0,"time":0}'
}

# ---------------------------------------------------------------- the reader and the writer

@test "a NUL byte names file:line:col, in plain text and in decompressed text" {
    mklog n.jsonl '{"type":"a","seq":0,"time":0}'
    printf '{"type":"b\0"}\n' >> n.jsonl
    run -2 --separate-stderr jsonl-pack n.jsonl
    assert_equal "$stderr" "jsonl-pack: n.jsonl:3:11: not a text or zstd file (NUL byte at offset 114)"
    assert_equal "$output" ''
    zstd -q n.jsonl -o n.zst
    run -2 --separate-stderr jsonl-pack n.zst
    assert_equal "$stderr" "jsonl-pack: n.zst:3:11: NUL byte in the decompressed text"
}

@test "a CR anywhere but right before the LF is trouble; CRLF and a final CR are line ends" {
    printf '%s\r\r\n{"type":"a"}\n' "$HDR" > cr.jsonl
    run -2 --separate-stderr jsonl-pack cr.jsonl
    assert_equal "$stderr" "jsonl-pack: cr.jsonl:1:74: carriage return inside a line (only a CRLF line end is accepted)"
    assert_equal "$output" ''
    printf '%s\n{"type":\r"a"}\n' "$HDR" > cr2.jsonl
    run -2 --separate-stderr jsonl-pack cr2.jsonl
    assert_equal "$stderr" "jsonl-pack: cr2.jsonl:2:9: carriage return inside a line (only a CRLF line end is accepted)"
    printf '%s\r\n{"type":"a"}\r' "$HDR" > ok.jsonl
    jsonl-pack ok.jsonl > out
    run -0 od -c out
    refute_output --partial '\r'
}

@test "a zstd stream starting with a skippable frame is zstd; skippable frames are skipped" {
    mklog a.jsonl '{"type":"a"}' '{"type":"b"}'
    zstd -q -c a.jsonl > a.zst
    skip() { printf '\x5a\x2a\x4d\x18\x03\x00\x00\x00abc'; }
    { skip; cat a.zst; skip; } > s.zst
    run -0 jsonl-pack s.zst
    assert_output "$(cat a.jsonl)"
    skip | head -c 9 > cut.zst
    run -2 --separate-stderr jsonl-pack cut.zst
    assert_equal "$stderr" "jsonl-pack: cut.zst: truncated zstd frame at byte offset 0"
}

@test "on trouble -z writes nothing for a small output: no header frame" {
    printf '%s\nbad\n' "$HDR" > b.jsonl
    jsonl-pack -z b.jsonl > out.zst && false || [ $? -eq 2 ]
    [ ! -s out.zst ]
    : > e.jsonl
    jsonl-pack -z e.jsonl > out.zst && false || [ $? -eq 2 ]
    [ ! -s out.zst ]
}

@test "on trouble after a large output: whole lines only, and with -z only complete frames" {
    {
        printf '%s\n' "$HDR"
        for i in $(seq 0 299); do
            printf '{"type":"x","seq":%d,"time":0,"data":"%s"}\n' "$i" "$(head -c 700 /dev/urandom | od -An -tx1 | tr -d ' \n')"
        done
        printf 'bad\n'
    } > big.jsonl
    jsonl-pack big.jsonl > out && false || [ $? -eq 2 ]
    [ -s out ]
    [ "$(tail -c 1 out | od -An -c | tr -d ' ')" = '\n' ]
    jsonl-pack -z big.jsonl > out.zst && false || [ $? -eq 2 ]
    [ -s out.zst ]
    zstd -q -t out.zst
    zstd -q -dc out.zst > dec
    [ "$(tail -c 1 dec | od -An -c | tr -d ' ')" = '\n' ]
    cmp dec <(head -n "$(wc -l < dec)" big.jsonl)
}

@test "a line longer than 128 KiB before the trouble keeps its LF" {
    long=$(head -c 140000 /dev/zero | tr '\0' x)
    { printf '%s\n' "$HDR"; printf '{"type":"x","seq":0,"time":0,"data":"%s"}\n' "$long"; printf 'bad\n'; } > long.jsonl
    jsonl-pack long.jsonl > out && false || [ $? -eq 2 ]
    [ "$(wc -l < out)" -eq 2 ]
    [ "$(tail -c 1 out | od -An -c | tr -d ' ')" = '\n' ]
}

@test "--unpack of a projected line with white space around and inside its object: the object alone, envelope after type" {
    printf '%s\n' '{"type":"session","id":"f"}' '  {"a":1, "type" : "x" ,"b":[1, 2]}  ' '{"type":"y"} ' \
        '{"data":{"x":[1]},"type":"z" , "data" : { "k":1 }} ' > "$BATS_TEST_TMPDIR/p.jsonl"
    run -0 jsonl-pack --unpack "$BATS_TEST_TMPDIR/p.jsonl"
    assert_output "$(printf '%s\n' '{"type":"session","id":"f"}' '{"a":1, "type" : "x","seq":0,"time":0 ,"b":[1, 2]}' \
        '{"type":"y","seq":1,"time":0}' '{"data":{"x":[1]},"type":"z","seq":2,"time":0 , "data" : { "k":1 }}')"
    # and the restored events pack back to the same bytes
    jsonl-pack --unpack "$BATS_TEST_TMPDIR/p.jsonl" | jsonl-pack | jsonl-pack --unpack | cmp - <(jsonl-pack --unpack "$BATS_TEST_TMPDIR/p.jsonl")
}

@test "--unpack of projected lines longer than the output buffer: envelope inserted, one LF, plain and zstd" {
    long=$(head -c 140000 /dev/zero | tr '\0' x)
    { printf '%s\n' '{"type":"session","id":"f"}'
      printf '{"type":"tool/result","data":"%s"}\n' "$long" "$long"
      printf '{"type":"turn/end","data":{}}\n'; } > p.jsonl
    { printf '%s\n' '{"type":"session","id":"f"}'
      printf '{"type":"tool/result","seq":0,"time":0,"data":"%s"}\n' "$long"
      printf '{"type":"tool/result","seq":1,"time":0,"data":"%s"}\n' "$long"
      printf '{"type":"turn/end","seq":2,"time":0,"data":{}}\n'; } > want
    jsonl-pack --unpack p.jsonl | cmp - want
    jsonl-pack --unpack -z p.jsonl | zstd -dc | cmp - want
    jsonl-pack --unpack p.jsonl | jsonl-project | cmp - p.jsonl
}
