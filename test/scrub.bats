#!/usr/bin/env bats
# scrub: its own cases (the corpus conformance is scrub-corpus.bats).
bats_require_minimum_version 1.5.0
load helpers/common

setup() {
    cd "$BATS_TEST_TMPDIR"
}

# A one-frame transcript holding the JSON string $1 (already JSON-quoted).
frame() {
    printf '{"jsonrpc":"2.0","method":"session/update","params":{"text":%s}}\n' "$1"
}

# ---------------------------------------------------------------- usage

@test "--help prints the usage on stdout and exits 0; --version names the tool" {
    run -0 scrub --help
    assert_line --index 0 'usage: scrub (--stdout | --session | --fixture) [options] [file...]'
    run -0 scrub --version
    assert_output 'scrub (acpsnap) 0.1.0'
}

@test "usage errors: no mode, two modes, unknown option, missing argument (exit 2)" {
    run -2 --separate-stderr scrub
    assert_equal "$stderr" 'scrub: choose one of --stdout, --session, --fixture'
    run -2 --separate-stderr scrub --stdout --session
    assert_equal "$stderr" 'scrub: choose one of --stdout, --session, --fixture'
    run -2 --separate-stderr scrub --stdout --bogus
    assert_equal "$stderr" "scrub: unknown option '--bogus'
usage: scrub (--stdout | --session | --fixture) [options] [file...]"
    run -2 --separate-stderr scrub --stdout --cwd
    assert_equal "$stderr" "scrub: option '--cwd' needs an argument
usage: scrub (--stdout | --session | --fixture) [options] [file...]"
    run -2 --separate-stderr scrub --fixture --cwd /tmp/x
    assert_equal "$stderr" 'scrub: --fixture takes the cwd from each log'"'"'s header; drop the context options'
    assert_equal "$output" ''
}

@test "an unreadable input file is trouble (exit 2)" {
    run -2 --separate-stderr scrub --stdout nope.jsonl
    assert_equal "$stderr" 'scrub: unable to open nope.jsonl: No such file or directory'
}

# ---------------------------------------------------------------- cwd spellings

@test "UUIDs: every byte of one changed in turn is tokenized exactly where the UUID pattern matches" {
    # the oracle: jq's regex for the UUID rule, on the same strings
    u=5410e361-ee95-448a-9712-34e65c65617f
    : > in.jsonl
    for ((i = 0; i < 36; i++)); do
        for c in g G - 0 F A / ' ' x; do
            for pre in '' a; do
                printf '{"s":"%s%s"}\n' "$pre" "${u:0:i}$c${u:i+1}" >> in.jsonl
            done
        done
    done
    printf '{"s":"%s"}\n' "$u" "${u^^}" "a$u" "${u}ab" "${u:0:35}" "x${u:1}" >> in.jsonl
    run -0 scrub --stdout in.jsonl
    echo "$output" > got.jsonl
    jq -c '.s |= gsub("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"; "{{sessionId}}")' in.jsonl > want.jsonl
    diff want.jsonl got.jsonl
    [ "$(grep -c sessionId got.jsonl)" -gt 100 ]
}

@test "a path that merely shares a prefix with the cwd stays untouched" {
    frame '"/tmp/acp-snap-cwd-ab/x /tmp/acp-snap-cwd-abc/x /tmp/acp-snap-cwd-abc.bak /tmp/acp-snap-cwd-ab."' > in
    run -0 scrub --stdout --cwd /tmp/acp-snap-cwd-ab in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}/x /tmp/acp-snap-cwd-abc/x /tmp/acp-snap-cwd-abc.bak {{cwd}}."}}'
}

@test "the cwd inside a longer string, at text boundaries and in a file URI" {
    frame '"cd /tmp/w && ls; (see /tmp/w) file:///tmp/w/a.txt x/tmp/w"' > in
    run -0 scrub --stdout --cwd /tmp/w in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"cd {{cwd}} && ls; (see {{cwd}}) file://{{cwd}}/a.txt x/tmp/w"}}'
}

@test "the cwd inside a JSON-escaped string is found and the string re-escaped like JSON.stringify" {
    frame '"say \"/tmp/w\"\n\ttab \u00e9 \u2028 /tmp/w\u002fsub"' > in
    run -0 scrub --stdout --cwd /tmp/w in
    # \u00e9 and \u2028 come out as raw UTF-8, / unescaped, \" \n \t kept
    assert_output "$(printf '{"jsonrpc":"2.0","method":"session/update","params":{"text":"say \\"{{cwd}}\\"\\n\\ttab \xc3\xa9 \xe2\x80\xa8 {{cwd}}/sub"}}')"
}

@test "a string without a volatile value keeps its bytes, escapes included" {
    frame '"no cwd here: \u0041\/x"' > in
    run -0 scrub --stdout --cwd /tmp/w in
    assert_output "$(cat in)"
}

@test "a Windows-style cwd: cwd-rooted separators become / (unless --native-paths)" {
    frame '"C:\\Users\\me\\cwd\\src\\a.c and C:\\Users\\me\\cwd"' > in
    run -0 scrub --stdout --cwd 'C:\Users\me\cwd' in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}/src/a.c and {{cwd}}"}}'
    run -0 scrub --stdout --native-paths --cwd 'C:\Users\me\cwd' in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}\\src\\a.c and {{cwd}}"}}'
}

@test "an alias through a symlinked temp root (as macOS /private/tmp) and the implicit /private spelling" {
    mkdir -p real/tmp/acp-x
    ln -s real/tmp tmp
    cwd="$BATS_TEST_TMPDIR/tmp/acp-x"
    alias=$(realpath "$cwd")
    [ "$alias" != "$cwd" ]
    frame "\"$cwd/a $alias/b /private$cwd/c\"" > in
    run -0 scrub --stdout --cwd "$cwd" --cwd-alias "$alias" in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}/a {{cwd}}/b {{cwd}}/c"}}'
    # without the alias, the resolved spelling stays literal
    run -0 scrub --stdout --cwd "$cwd" in
    assert_output "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"text\":\"{{cwd}}/a $alias/b {{cwd}}/c\"}}"
}

@test "the longest spelling wins when one alias is a prefix of another" {
    frame '"/t/a/b/c and /t/a"' > in
    run -0 scrub --stdout --cwd /t/a --cwd-alias /t/a/b in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}/c and {{cwd}}"}}'
}

@test "--cwd and --cwd-alias with trailing separators match like the bare directory" {
    frame '"/tmp/w/x /r/w /tmp/w"' > in
    run -0 scrub --stdout --cwd /tmp/w/ --cwd-alias /r/w// in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}/x {{cwd}} {{cwd}}"}}'
    frame '"C:\\w\\x"' > win
    run -0 scrub --stdout --cwd 'C:\w\' win
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}/x"}}'
}

# ---------------------------------------------------------------- ids

@test "UUIDs in keys stay, UUIDs in values become {{sessionId}}; given session ids too" {
    printf '%s\n' '{"id":7,"result":{"0b7c5a52-1111-4222-8333-444455556666":"0B7C5A52-1111-4222-8333-444455556666","s":"run-42 and x9b7c5a52-1111-4222-8333-444455556666ff"}}' > in
    run -0 scrub --stdout --session-id run-42 in
    assert_output '{"id":1,"result":{"0b7c5a52-1111-4222-8333-444455556666":"{{sessionId}}","s":"{{sessionId}} and x{{sessionId}}ff"}}'
}

@test "lone UUID values at any depth become {{sessionId}}, a UUID id is renumbered, keys stay: the same frame spaced out gives the same bytes" {
    u=dc1cbd91-e169-4cbd-ac5b-70fb4189cb1b
    printf '%s\n' "{\"id\":\"$u\",\"params\":{\"sessionId\":\"$u\",\"$u\":[\"$u\",{\"k\":\"$u\"}],\"q\":\"\\\"$u\",\"z\":\"$u\"}}" \
        "{\"id\":{\"a\":\"$u\"},\"x\":\"$u\"}" "{\"a\":\"$u\",\"id\":\"$u\",\"b\":[\"$u\"]}" > in
    sed 's/,/ , /g; s/":/" : /g' in > spaced
    run -0 scrub --stdout in
    assert_output '{"id":1,"params":{"sessionId":"{{sessionId}}","dc1cbd91-e169-4cbd-ac5b-70fb4189cb1b":["{{sessionId}}",{"k":"{{sessionId}}"}],"q":"\"{{sessionId}}","z":"{{sessionId}}"}}
{"id":2,"x":"{{sessionId}}"}
{"a":"{{sessionId}}","id":1,"b":["{{sessionId}}"]}'
    run -0 scrub --stdout spaced
    assert_output "$(scrub --stdout in)"
}

@test "a cwd and its aliases are found whatever byte follows their first; a lone dash or slash is no trigger" {
    printf '%s\n' '{"a":"/w/x-y/z","b":"/private/w/x-y/z and /Users/w/x-y/z/f","c":"a-b-c-d-e-f /// /w/x-y/z","d":"-0-0-0-0-0-"}' > in
    run -0 scrub --stdout --cwd /w/x-y/z --cwd-alias /Users/w/x-y/z in
    assert_output '{"a":"{{cwd}}","b":"{{cwd}} and {{cwd}}/f","c":"a-b-c-d-e-f /// {{cwd}}","d":"-0-0-0-0-0-"}'
}

@test "JSON-RPC ids are renumbered in first-seen order across frames; null ids stay" {
    printf '%s\n' '{"id":0,"method":"a"}' '{"id":"0","method":"b"}' '{"id":5,"method":"c"}' \
        '{"id":0,"result":{}}' '{"id":null,"error":{}}' '{"method":"n","params":{"id":9}}' > in
    run -0 scrub --stdout in
    assert_output '{"id":1,"method":"a"}
{"id":2,"method":"b"}
{"id":3,"method":"c"}
{"id":1,"result":{}}
{"id":null,"error":{}}
{"method":"n","params":{"id":9}}'
}

@test "an id is known by its value, as JSON.stringify spells it: 7, 7.0 and 0.7e1 are one id, so are \"a\" and \"\\u0061\"" {
    printf '%s\n' '{"id":7,"method":"a"}' '{"id":"a","method":"b"}' '{"id":7.0,"result":{}}' \
        '{"id":"\u0061","result":{}}' '{"id":0.7e1,"result":{}}' '{"id":"7","result":{}}' '{"id":-0,"result":{}}' '{"id":0,"result":{}}' > in
    run -0 scrub --stdout in
    assert_output '{"id":1,"method":"a"}
{"id":2,"method":"b"}
{"id":1,"result":{}}
{"id":2,"result":{}}
{"id":1,"result":{}}
{"id":3,"result":{}}
{"id":4,"result":{}}
{"id":4,"result":{}}'
}

@test "the id map starts over for each input file" {
    printf '{"id":4}\n{"id":8}\n' > a
    printf '{"id":8}\n' > b
    run -0 scrub --stdout a b
    assert_output '{"id":1}
{"id":2}
{"id":1}'
}

# ---------------------------------------------------------------- stdout purity

@test "a non-JSON stdout line is trouble naming file, line and column" {
    printf '{"id":1}\nnot json\n' > in
    run -2 --separate-stderr scrub --stdout in
    assert_equal "$stderr" 'scrub: in:2:1: invalid JSON: expected a value'
}

@test "a stdout line that is valid JSON but not an object is trouble" {
    printf '{"id":1}\n[1,2]\n' > in
    run -2 --separate-stderr scrub --stdout in
    assert_equal "$stderr" 'scrub: in:2: stdout line is not a JSON object'
}

@test "empty input gives empty output; - reads stdin; zstd input is detected" {
    : > empty
    run -0 scrub --stdout empty
    assert_output ''
    frame '"/tmp/w"' > in
    run -0 --separate-stderr bash -c 'scrub --stdout --cwd /tmp/w - < in'
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}"}}'
    zstd -q in -o in.zst
    run -0 scrub --stdout --cwd /tmp/w in.zst
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}"}}'
}

@test "a truncated zstd input is trouble" {
    for i in $(seq 200); do frame "\"line $i /tmp/w\""; done | zstd -q -o in.zst
    head -c 100 in.zst > cut.zst
    run -2 --separate-stderr scrub --stdout cut.zst
    assert_output --partial ''
    [[ "$stderr" == "scrub: cut.zst"* ]]
}

@test "--stdout: an empty or blank line is trouble; an empty input is an empty transcript" {
    printf '{"id":4}\n\n{"id":8}\n' > a
    run -2 --separate-stderr scrub --stdout a
    assert_equal "$stderr" 'scrub: a:2: empty line'
    assert_equal "$output" ''
    printf '{"id":4}\n \t\n' > b
    run -2 --separate-stderr scrub --stdout b
    assert_equal "$stderr" 'scrub: b:2:3: invalid JSON: unexpected end of input'
    printf '\n' > c
    run -2 --separate-stderr scrub --stdout c
    assert_equal "$stderr" 'scrub: c:1: empty line'
    run -0 --separate-stderr scrub --stdout /dev/null
    assert_equal "$output$stderr" ''
}

@test "a NUL byte is trouble naming file:line:col; a CR inside a line is trouble, CRLF is a line end" {
    printf '{"a":1}\n{"a":"\0"}\n' > nul
    run -2 --separate-stderr scrub --stdout nul
    assert_equal "$stderr" 'scrub: nul:2:7: not a text or zstd file (NUL byte at offset 14)'
    # problems come in line order, whatever the sizes of the reads
    printf '{"a":1}\n{"a":"x\r"}\n{"b":"\0"}\n' > mix
    for bs in 1 5 4096; do
        run -2 --separate-stderr bash -c "dd if=mix bs=$bs status=none | scrub --stdout"
        assert_equal "$stderr" 'scrub: <stdin>:2:8: carriage return inside a line (only a CRLF line end is accepted)'
    done
    printf '{"id":1}\r\r\n' > cr
    run -2 --separate-stderr scrub --stdout cr
    assert_equal "$stderr" 'scrub: cr:1:9: carriage return inside a line (only a CRLF line end is accepted)'
    assert_equal "$output" ''
    printf '{"id":1}\r\n{"id":2}\r' > crlf
    scrub --stdout crlf > out
    run -0 cat out
    assert_output '{"id":1}
{"id":2}'
    ! grep -q $'\r' out
}

@test "a zstd stream that starts with a skippable frame is read as zstd" {
    frame '"/tmp/w"' | zstd -q > f.zst
    { printf '\x50\x2a\x4d\x18\x02\x00\x00\x00hi'; cat f.zst; } > s.zst
    run -0 scrub --stdout --cwd /tmp/w s.zst
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{cwd}}"}}'
}

@test "trouble after a line over 128 KiB: the output stops at a line boundary" {
    printf '{"t":"%s"}\nnot json\n' "$(head -c 140000 /dev/zero | tr '\0' x)" > in
    scrub --stdout in > out 2> err && false || [ $? -eq 2 ]
    assert_equal "$(cat err)" 'scrub: in:2:1: invalid JSON: expected a value'
    [ "$(wc -l < out)" -eq 1 ]
    [ "$(tail -c 1 out | od -An -c | tr -d ' ')" = '\n' ]
    cmp out <(head -n 1 in)
}

# ---------------------------------------------------------------- context

@test "--context takes a normalizeContext object or a whole run.json" {
    printf '%s\n' '{"sessionIds":["s-1"],"cwd":"/tmp/w","cwdAliases":["/tmp/w","/r/w"]}' > ctx.json
    printf '%s\n' '{"scenario":"x","cwd":"/nope","normalizeContext":{"sessionIds":["s-1"],"cwd":"/tmp/w","cwdAliases":["/r/w"]}}' > run.json
    frame '"s-1 in /tmp/w and /r/w"' > in
    run -0 scrub --stdout --context ctx.json in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{sessionId}} in {{cwd}} and {{cwd}}"}}'
    run -0 scrub --stdout --context run.json in
    assert_output '{"jsonrpc":"2.0","method":"session/update","params":{"text":"{{sessionId}} in {{cwd}} and {{cwd}}"}}'
}

@test "a malformed context file is trouble" {
    printf '{"cwd":\n' > bad.json
    run -2 --separate-stderr scrub --stdout --context bad.json /dev/null
    assert_equal "$stderr" 'scrub: bad.json:2:1: invalid JSON: unexpected end of input'
    printf '{"cwd":1}\n' > bad.json
    run -2 --separate-stderr scrub --stdout --context bad.json /dev/null
    assert_equal "$stderr" 'scrub: bad.json: context cwd is not a string'
    printf '[]\n' > bad.json
    run -2 --separate-stderr scrub --stdout --context bad.json /dev/null
    assert_equal "$stderr" 'scrub: bad.json: context is not a JSON object'
}

# ---------------------------------------------------------------- jq rules

@test "-f applies a jq program to each record after the built-in rules" {
    printf '%s\n' '{"id":3,"result":{"ms":1234,"dir":"/tmp/w","t":"é\u007f"}}' > in
    printf '%s\n' '.result.ms = 0 | .result.seen = (.result.dir == "{{cwd}}") | .result.u = .result.t + "!"' > r.jq
    run -0 scrub --stdout --cwd /tmp/w -f r.jq in
    assert_output "$(printf '{"id":1,"result":{"ms":0,"dir":"{{cwd}}","t":"\xc3\xa9\\u007f","seen":true,"u":"\xc3\xa9\x7f!"}}')"
}

@test "-f: what the program leaves alone keeps its bytes; only changed values are re-serialized" {
    printf '%s\n' '{"a":1.50,"b":12345678901234567890,"c":"x\u0041","d":[1e2,"\/"],"e":"old","f":2.0}' > in
    printf '%s\n' '.e = "new" | .f += 1 | .g = 1e2' > r.jq
    run -0 scrub --stdout -f r.jq in
    assert_output '{"a":1.50,"b":12345678901234567890,"c":"x\u0041","d":[1e2,"\/"],"e":"new","f":3,"g":100}'
}

@test "a jq rule file that fails to compile: exit 2, file:line: jq's message, no output" {
    frame '"x"' > in
    printf '.a |||\n' > bad.jq
    run -2 --separate-stderr scrub --stdout -f bad.jq in
    assert_equal "$output" ''
    assert_equal "$stderr" "scrub: bad.jq:1: syntax error, unexpected '|' (Unix shell quoting issues?)"
    printf '.\n| $nope\n| $never\n' > vars.jq
    run -2 --separate-stderr scrub --stdout -f vars.jq in
    assert_equal "$stderr" 'scrub: vars.jq:2: $nope is not defined
scrub: vars.jq:3: $never is not defined'
}

@test "-f: the rule variables \$cwd, \$cwdAliases, \$sessionIds, \$scenario come from the context" {
    printf '%s\n' '{"id":1}' > in
    printf '%s\n' '.v = [$cwd, $cwdAliases, $sessionIds, $scenario]' > r.jq
    run -0 scrub --stdout -f r.jq in
    assert_output '{"id":1,"v":[null,[],[],null]}'
    run -0 scrub --stdout --cwd /tmp/w/ -a /private/tmp/w -i s1 -i s2 --scenario text-turn -f r.jq in
    assert_output '{"id":1,"v":["/tmp/w",["/private/tmp/w"],["s1","s2"],"text-turn"]}'
    printf '{"normalizeContext":{"sessionIds":["s3"],"cwd":"/tmp/x","cwdAliases":[]}}\n' > run.json
    run -0 scrub --stdout --context run.json -N a -f r.jq in
    assert_output '{"id":1,"v":["/tmp/x",[],["s3"],"a"]}'
}

@test "-f: \$cwd and \$sessionIds of --session without a context are each log's header's" {
    printf '%s\n' '{"type":"session","version":0,"id":"s-1","createdAt":1,"cwd":"/tmp/a"}' > a.jsonl
    printf '%s\n' '{"type":"session","version":0,"id":"s-2","createdAt":1,"cwd":"/tmp/b"}' > b.jsonl
    printf '%s\n' '.v = [$cwd, $sessionIds]' > r.jq
    run -0 scrub --session -f r.jq a.jsonl b.jsonl
    assert_output '{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0,"cwd":"{{cwd}}","v":["/tmp/a",["s-1"]]}
{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0,"cwd":"{{cwd}}","v":["/tmp/b",["s-2"]]}'
}

@test "-f: renumber(re; name) numbers each distinct match in first-seen order, across the records of a file" {
    {
        printf '%s\n' '{"id":1,"result":{"m":"msg_01AB then msg_02CD, é msg_01AB","prt":"prt_9"}}'
        printf '%s\n' '{"id":2,"result":{"list":["msg_02CD",{"x":"msg_03EF"}],"n":5,"k":{"msg_01AB":true}}}'
    } > in
    printf '%s\n' 'renumber("msg_[0-9A-Z]+"; "msgId") | renumber("prt_[0-9]+"; "partId")' > r.jq
    run -0 scrub --stdout -f r.jq in in
    assert_output '{"id":1,"result":{"m":"{{msgId:1}} then {{msgId:2}}, é {{msgId:1}}","prt":"{{partId:1}}"}}
{"id":2,"result":{"list":["{{msgId:2}}",{"x":"{{msgId:3}}"}],"n":5,"k":{"msg_01AB":true}}}
{"id":1,"result":{"m":"{{msgId:1}} then {{msgId:2}}, é {{msgId:1}}","prt":"{{partId:1}}"}}
{"id":2,"result":{"list":["{{msgId:2}}",{"x":"{{msgId:3}}"}],"n":5,"k":{"msg_01AB":true}}}'
}

@test "-f: renumber on one string; a bad name is trouble naming the record; empty matches are skipped" {
    printf '%s\n' '{"id":1,"a":"x-1 x-2","b":"x-2"}' > in
    printf '%s\n' '.a |= renumber("x-[0-9]"; "x")' > one.jq
    run -0 scrub --stdout -f one.jq in
    assert_output '{"id":1,"a":"{{x:1}} {{x:2}}","b":"x-2"}'
    printf '%s\n' '.a |= renumber("y*"; "y")' > empty.jq
    run -0 scrub --stdout -f empty.jq in
    assert_output '{"id":1,"a":"x-1 x-2","b":"x-2"}'
    printf '%s\n' 'renumber("x"; "a b")' > bad.jq
    run -2 --separate-stderr scrub --stdout -f bad.jq in
    assert_equal "$stderr" 'scrub: in:1: bad.jq: renumber: the name must be a letter, then letters, digits or _'
    assert_equal "$output" ''
    printf '%s\n' 'renumber("x"; "a\n:b")' > nl.jq
    run -2 --separate-stderr scrub --stdout -f nl.jq in
    assert_equal "$stderr" 'scrub: in:1: nl.jq: renumber: the name must be a letter, then letters, digits or _'
}

@test "-f: a record cannot forge renumber's placeholder" {
    printf '%s\n' '{"id":1,"a":"\u0000abc:x:eC0x\u0000","b":"x-1"}' > in
    printf '%s\n' 'renumber("x-[0-9]"; "x")' > r.jq
    run -0 scrub --stdout -f r.jq in
    assert_output '{"id":1,"a":"\u0000abc:x:eC0x\u0000","b":"{{x:1}}"}'
}

@test "a jq runtime error is trouble naming the record" {
    printf '{"a":1}\n{"a":"x"}\n' > in
    printf '.a += 1\n' > r.jq
    run -2 --separate-stderr scrub --stdout -f r.jq in
    assert_equal "$stderr" 'scrub: in:2: r.jq: string ("x") and number (1) cannot be added'
    assert_equal "$output" ''
}

@test "-f: a program must give exactly one object per record (exit 2, no partial output)" {
    printf '{"id":1}\n{"id":2}\n' > in
    printf 'if .id == 2 then empty else . end\n' > none.jq
    run -2 --separate-stderr scrub --stdout -f none.jq in
    assert_equal "$stderr" 'scrub: in:2: none.jq: the program gave no value for this record; a rule must give exactly one'
    assert_equal "$output" ''
    printf '., .\n' > two.jq
    run -2 --separate-stderr scrub --stdout -f two.jq in
    assert_equal "$stderr" 'scrub: in:1: two.jq: the program gave more than one value for this record; a rule must give exactly one'
    printf '.id\n' > num.jq
    run -2 --separate-stderr scrub --stdout -f num.jq in
    assert_equal "$stderr" 'scrub: in:1: num.jq: the program'"'"'s value for this record is not a JSON object'
}

@test "-f: debug and stderr print on stderr, prefixed with the record and the rule file" {
    printf '{"id":1}\n' > in
    printf '.a = (1 | debug) | .b = ("x\\u001b" | stderr)\n' > d.jq
    run -0 --separate-stderr scrub --stdout -f d.jq in
    assert_output '{"id":1,"a":1,"b":"x\u001b"}'
    assert_equal "$stderr" 'scrub: in:1: d.jq: debug: 1
scrub: in:1: d.jq: stderr: "x\u001b"'
}

@test "-f: module directives are refused, naming the rule file's line" {
    printf '{"id":1}\n' > in
    printf '# helpers\n\nimport "lib" as lib; .\n' > imp.jq
    printf 'def x: 1;\n' > lib.jq
    run -2 --separate-stderr scrub --stdout -f imp.jq in
    assert_equal "$stderr" 'scrub: imp.jq:3: import: module directives (module, import, include) are not supported: a rule file is one self-contained jq program'
    assert_equal "$output" ''
}

# ---------------------------------------------------------------- session logs

@test "--session: header volatiles, envelopes, times, dt, durations, request headers, spill paths" {
    id=0b7c5a52-1111-4222-8333-444455556666
    {
        printf '{"type":"session","version":0,"id":"%s","createdAt":1796028374883,"cwd":"/tmp/acp-snap-cwd-q1","delegationDepth":0}\n' $id
        printf '%s\n' '{"type":"turn/start","seq":0,"time":1796028374889,"data":{"turn":1}}'
        printf '%s\n' '{"type":"request/header","seq":1,"time":1796028374890,"data":{"header":{"config":{"model":"m"},"system":"You work in /tmp/acp-snap-cwd-q1.","tools":[{"name":"bash"}]},"reason":"initial"}}'
        printf '%s\n' '{"type":"text-chunks","seq0":2,"time0":1796028374900,"data":{"turn":1,"step":1,"index":0,"dt":[3,-1],"texts":["a","b","c"]}}'
        printf '%s\n' '{"type":"hook/result","seq":5,"time":1796028374950,"data":{"durationMs":17,"path":"/tmp/acp-snap-cwd-q1\\a\\b"}}'
        printf '%s\n' '{"type":"tool/result","seq":6,"time":1796028374960,"data":{"text":"see /tmp/dsh-acp-snap-012345678/session-0123456789ab/0123456789ab-out.txt. Use read with offset/limit"}}'
    } > log
    run -0 scrub --session log
    assert_output '{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0,"cwd":"{{cwd}}","delegationDepth":0}
{"type":"turn/start","data":{"turn":1}}
{"type":"request/header","data":{"header":{"config":{"model":"m"},"system":"{{system}}","tools":"{{tools}}"},"reason":"initial"}}
{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}
{"type":"hook/result","data":{"durationMs":0,"path":"{{cwd}}/a/b"}}
{"type":"tool/result","data":{"text":"see {{spillLocator:out.txt}}. Use read with offset/limit"}}'
    run -0 scrub --session --persisted log
    assert_line --index 1 '{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}'
    assert_line --index 3 '{"type":"text-chunks","seq0":2,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}'
}

@test "--session, --fixture: request-header prefix messages are kept, scrubbed like any value (as dsh does)" {
    id=9d3e21f0-aaaa-4bbb-8ccc-0123456789ab
    {
        printf '{"type":"session","id":"%s","createdAt":3,"cwd":"/tmp/acp-snap-cwd-m7"}\n' $id
        printf '%s\n' '{"type":"request/header","seq":0,"time":4,"data":{"header":{"system":null,"messages":[{"role":"user","content":"open /tmp/acp-snap-cwd-m7/notes.md"},"{{messagePrefix}}"],"messagePrefix":[{"role":"system","content":"run 9d3e21f0-aaaa-4bbb-8ccc-0123456789ab"}]},"reason":"change"}}'
        printf '%s\n' '{"type":"request/header","seq":1,"time":5,"data":{"header":{"tools":[],"messages":[]},"reason":"change"}}'
    } > log
    run -0 scrub --session log
    assert_output '{"type":"session","id":"{{sessionId}}","createdAt":0,"cwd":"{{cwd}}"}
{"type":"request/header","data":{"header":{"system":"{{system}}","messages":[{"role":"user","content":"open {{cwd}}/notes.md"},"{{messagePrefix}}"],"messagePrefix":[{"role":"system","content":"run {{sessionId}}"}]},"reason":"change"}}
{"type":"request/header","data":{"header":{"tools":"{{tools}}","messages":[]},"reason":"change"}}'
    run -0 scrub --fixture log
    assert_line --index 1 '{"type":"request/header","data":{"header":{"system":"{{system}}","messages":[{"role":"user","content":"open {{cwd}}/notes.md"},"{{messagePrefix}}"],"messagePrefix":[{"role":"system","content":"run 9d3e21f0-aaaa-4bbb-8ccc-0123456789ab"}]},"reason":"change"}}'
}

@test "--session: an explicit context replaces the header's own values" {
    printf '%s\n' '{"type":"session","id":"abc","cwd":"/a"}' '{"type":"x","data":{"s":"abc /a /b"}}' > log
    run -0 scrub --session --cwd /b log
    assert_output '{"type":"session","id":"abc","cwd":"/a"}
{"type":"x","data":{"s":"abc /a {{cwd}}"}}'
}

@test "--session: a log whose first record is not a session header is trouble" {
    printf '%s\n' '{"type":"turn/start","data":{"turn":1}}' > log
    run -2 --separate-stderr scrub --session log
    assert_equal "$stderr" 'scrub: log:1: not a session log: line 1 is not a header ({"type":"session",…})'
    printf '%s\n' '{"type":"session"}' '"str"' > log
    run -2 --separate-stderr scrub --session log
    assert_equal "$stderr" 'scrub: log:2: not a JSON object'
}

@test "--session: an empty log, a blank line, a second header, a non-string type, mixed forms (the codec's messages)" {
    : > empty
    run -2 --separate-stderr scrub --session empty
    assert_equal "$stderr" 'scrub: empty: empty file: a session log starts with a header line'
    assert_equal "$output" ''
    h='{"type":"session","id":"s1","cwd":"/w"}'
    printf '%s\n\n' "$h" > blank
    run -2 --separate-stderr scrub --session blank
    assert_equal "$stderr" 'scrub: blank:2: empty line'
    printf '%s\n%s\n' "$h" "$h" > two
    run -2 --separate-stderr scrub --session two
    assert_equal "$stderr" 'scrub: two:2: a second session header'
    printf '%s\n{"type":1}\n' "$h" > num
    run -2 --separate-stderr scrub --session num
    assert_equal "$stderr" 'scrub: num:2: "type" must be a string'
    printf '%s\n{"type":"a","seq":0,"time":5}\n{"type":"b"}\n' "$h" > mixed
    run -2 --separate-stderr scrub --session mixed
    assert_equal "$stderr" 'scrub: mixed:3: projected and persisted lines are mixed: this line lacks an envelope, line 2 has one'
    assert_equal "$output" ''
    printf '%s\n{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a","b"]}}\n' "$h" > row
    run -2 --separate-stderr scrub --session row
    assert_equal "$stderr" 'scrub: row:2: malformed text-chunks row: dt length 0 does not match 2 members'
}

@test "--session: a packed row is one output line; stdin is <stdin>" {
    printf '%s\n' '{"type":"session","id":"s1","cwd":"/w"}' \
        '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[4],"texts":["a","b"]}}' '{"type":"x","data":{}}' > log
    run -0 scrub --session log
    assert_output '{"type":"session","id":"{{sessionId}}","cwd":"{{cwd}}"}
{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}
{"type":"x","data":{}}'
    run -2 --separate-stderr bash -c 'printf "{\"type\":\"x\"}\n" | scrub --session'
    assert_equal "$stderr" 'scrub: <stdin>:1: not a session log: line 1 is not a header ({"type":"session",…})'
}

# ---------------------------------------------------------------- fixtures

@test "--fixture: projects, packs, tokenizes the generated cwd and request headers, keeps ids" {
    {
        printf '%s\n' '{"type":"session","id":"s1","createdAt":5,"cwd":"/tmp/acp-snap-cwd-q1"}'
        printf '%s\n' '{"type":"request/header","seq":0,"time":9,"data":{"header":{"system":"cwd /tmp/acp-snap-cwd-q1","tools":[]},"reason":"initial"}}'
        for i in 1 2 3; do
            printf '{"type":"assistant/chunk","seq":%d,"time":%d,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"t%d"}}}\n' $i $((10 + i)) $i
        done
        printf '%s\n' '{"type":"tool/result","seq":4,"time":20,"data":{"a":"/private/var/acp-snap-cwd-q1/x","b":"/tmp/acp-snap-cwd-q10"}}'
    } > log
    run -0 scrub --fixture log
    assert_output '{"type":"session","id":"s1","createdAt":5,"cwd":"{{cwd}}"}
{"type":"request/header","data":{"header":{"system":"{{system}}","tools":"{{tools}}"},"reason":"initial"}}
{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["t1","t2","t3"]}}
{"type":"tool/result","data":{"a":"{{cwd}}/x","b":"/tmp/acp-snap-cwd-q10"}}'
    run -0 scrub --fixture --keep-cwd log
    assert_line --index 0 '{"type":"session","id":"s1","createdAt":5,"cwd":"/tmp/acp-snap-cwd-q1"}'
    assert_line --index 3 '{"type":"tool/result","data":{"a":"/private/var/acp-snap-cwd-q1/x","b":"/tmp/acp-snap-cwd-q10"}}'
}

@test "--fixture: a header cwd without a basename is trouble" {
    printf '%s\n' '{"type":"session","id":"s1","cwd":"/"}' > log
    run -2 --separate-stderr scrub --fixture log
    assert_equal "$stderr" 'scrub: log:1: the header cwd has no basename to tokenize (see --keep-cwd)'
    run -2 --separate-stderr bash -c 'scrub --fixture < log'
    assert_equal "$stderr" 'scrub: <stdin>:1: the header cwd has no basename to tokenize (see --keep-cwd)'
}
