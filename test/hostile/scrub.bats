#!/usr/bin/env bats
# Hostile rule files for scrub -f: a rule file arrives with scenario data and
# is as untrusted. Each case asserts the exit status, the exact message, that
# every output line is whole (the output stops at a line boundary), and that
# nothing of the victim tree leaks or changes.
bats_require_minimum_version 1.5.0
load ../helpers/common

setup() {
    cd "$BATS_TEST_TMPDIR"
    mkdir -p victim
    printf '{"token":"VICTIM-SECRET-1"}\n' > victim/secret.json
    printf 'def token: "VICTIM-SECRET-2";\n' > victim/secret.jq
    cp victim/secret.jq victim.jq
    cp victim/secret.json victim.json
    before=$(find victim -type f -exec sha256sum {} + | LC_ALL=C sort)
    printf '{"id":1}\n{"id":2}\n' > in
}

teardown() {
    [ "$(find victim -type f -exec sha256sum {} + | LC_ALL=C sort)" = "$before" ]
}

# attack STATUS RULE [scrub options...]: writes RULE to r.jq and runs
# scrub --stdout -f r.jq on `in`; checks the status, then that out is empty or
# ends with LF and holds JSON objects only, and that no secret leaked.
attack() {
    local want=$1 rule=$2
    shift 2
    printf '%s\n' "$rule" > r.jq
    local st=0
    scrub --stdout -f r.jq "$@" in > out 2> err || st=$?
    stderr=$(cat err)
    [ "$st" -eq "$want" ] || { echo "status $st, want $want; stderr: $stderr"; return 1; }
    whole out
    ! grep -q VICTIM-SECRET out err
}

# whole FILE: empty, or LF-terminated lines that are each a JSON object.
whole() {
    [ ! -s "$1" ] && return 0
    [ "$(tail -c 1 "$1" | od -An -tx1 | tr -d ' ')" = 0a ]
    jq -e 'type == "object"' "$1" > /dev/null
}

refused() { # the message for a module directive `kw` on line `line` of r.jq
    echo "scrub: r.jq:$2: $1: module directives (module, import, include) are not supported: a rule file is one self-contained jq program"
}

# ---------------------------------------------------------------- modules

@test "import of a module is refused before compiling (libjq 1.6 aborted)" {
    attack 2 'import "x" as x; .'
    assert_equal "$stderr" "$(refused import 1)"
    assert_equal "$(cat out)" ''
}

@test "include is refused" {
    attack 2 'include "x"; .'
    assert_equal "$stderr" "$(refused include 1)"
}

@test "import of a module beside the rule file is refused too" {
    attack 2 'import "victim" as v; .a = v::token'
    assert_equal "$stderr" "$(refused import 1)"
}

@test "import of a data file through search metadata is refused" {
    attack 2 "import \"secret\" as \$s {search: \"$BATS_TEST_TMPDIR/victim\"}; .a = \$s"
    assert_equal "$stderr" "$(refused import 1)"
}

@test "import \"/etc/passwd\" is refused" {
    attack 2 'import "/etc/passwd" as x; .'
    assert_equal "$stderr" "$(refused import 1)"
    attack 2 'import "/etc/passwd" as $x; .a = $x'
    assert_equal "$stderr" "$(refused import 1)"
}

@test "a module directive after comments and blank lines is refused, naming its line" {
    printf '# innocent\n\n   # more\ninclude "victim"; .\n' > r.jq
    run -2 --separate-stderr scrub --stdout -f r.jq in
    assert_equal "$stderr" "$(refused include 4)"
    assert_equal "$output" ''
}

@test "a module header is refused" {
    attack 2 'module {name: "m"}; .'
    assert_equal "$stderr" "$(refused module 1)"
}

@test "modulemeta finds no module (empty library path)" {
    attack 2 '.a = ("victim" | modulemeta)'
    assert_equal "$stderr" 'scrub: in:1: r.jq: module not found: victim'
    attack 2 '.a = ("/etc/passwd" | modulemeta)'
    assert_equal "$stderr" 'scrub: in:1: r.jq: module not found: /etc/passwd'
}

# ---------------------------------------------------------------- reading files through builtins

@test "input_filename, \$__loc__, get_search_list and the origins name no file" {
    attack 0 '.f = input_filename | .l = $__loc__ | .s = get_search_list | .o = [get_jq_origin, get_prog_origin]'
    assert_equal "$(cat out)" '{"id":1,"f":null,"l":{"file":"<top-level>","line":1},"s":[],"o":[null,null]}
{"id":2,"f":null,"l":{"file":"<top-level>","line":1},"s":[],"o":[null,null]}'
    assert_equal "$stderr" ''
}

@test "input_line_number is an error, not the reader's line" {
    attack 2 '.n = input_line_number'
    assert_equal "$stderr" 'scrub: in:1: r.jq: Unknown input line number'
}

@test "a rule file with a NUL byte is refused (jq would compile the text before it)" {
    printf '.\0 | halt\n' > r.jq
    run -2 --separate-stderr scrub --stdout -f r.jq in
    assert_equal "$stderr" 'scrub: r.jq:1:2: not a text or zstd file (NUL byte at offset 1)'
    assert_equal "$output" ''
}

# ---------------------------------------------------------------- input, inputs, debug, stderr

@test "input finds no further input (it crashed under ASan)" {
    attack 2 'input'
    assert_equal "$stderr" 'scrub: in:1: r.jq: input and inputs are not available: a rule program sees one record at a time'
    assert_equal "$(cat out)" ''
}

@test "inputs finds no further input and consumes no record" {
    attack 2 '.rest = [inputs]'
    assert_equal "$stderr" 'scrub: in:1: r.jq: input and inputs are not available: a rule program sees one record at a time'
    attack 0 '.rest = [try input catch "none"]'
    assert_equal "$(cat out)" '{"id":1,"rest":["none"]}
{"id":2,"rest":["none"]}'
}

@test "debug prints on stderr with the house prefix (it crashed under ASan)" {
    attack 0 'debug'
    assert_equal "$stderr" 'scrub: in:1: r.jq: debug: {"id":1}
scrub: in:2: r.jq: debug: {"id":2}'
    assert_equal "$(cat out)" '{"id":1}
{"id":2}'
}

@test "stderr prints on stderr with the house prefix, escaped, not raw" {
    attack 0 '.x = ("\u001b]0;pwned\u0007" | stderr)'
    assert_equal "$stderr" 'scrub: in:1: r.jq: stderr: "\u001b]0;pwned\u0007"
scrub: in:2: r.jq: stderr: "\u001b]0;pwned\u0007"'
}

# ---------------------------------------------------------------- halt, errors, cardinality

@test "halt is trouble, not a silent exit 0 with records dropped" {
    attack 2 'if .id == 2 then halt else . end'
    assert_equal "$stderr" 'scrub: in:2: r.jq: the program called halt; a rule must give exactly one value per record'
}

@test "halt_error is trouble with its code and message, escaped" {
    attack 2 '"bye\u001b[2J\n" | halt_error(7)'
    assert_equal "$stderr" 'scrub: in:1: r.jq: the program called halt_error (exit code 7): bye\u001b[2J'
    attack 2 '{"a":1} | halt_error'
    assert_equal "$stderr" 'scrub: in:1: r.jq: the program called halt_error (exit code 5): {"a":1}'
}

@test "an error's message is escaped" {
    attack 2 'error("x\u001b[31my")'
    assert_equal "$stderr" 'scrub: in:1: r.jq: x\u001b[31my'
    attack 2 'error({"a":"b"})'
    assert_equal "$stderr" 'scrub: in:1: r.jq: {"a":"b"} (not a string)'
}

@test "zero outputs for a record is trouble" {
    attack 2 'select(.id == 1)'
    assert_equal "$stderr" 'scrub: in:2: r.jq: the program gave no value for this record; a rule must give exactly one'
    attack 2 'empty'
    assert_equal "$stderr" 'scrub: in:1: r.jq: the program gave no value for this record; a rule must give exactly one'
}

@test "several outputs for a record is trouble, even endless ones" {
    attack 2 'range(3) as $i | .'
    assert_equal "$stderr" 'scrub: in:1: r.jq: the program gave more than one value for this record; a rule must give exactly one'
    attack 2 'repeat(.)'
    assert_equal "$stderr" 'scrub: in:1: r.jq: the program gave more than one value for this record; a rule must give exactly one'
}

@test "one value then an error or a halt is trouble" {
    attack 2 '., error("late")'
    assert_equal "$stderr" 'scrub: in:1: r.jq: late'
    attack 2 '., halt'
    assert_equal "$stderr" 'scrub: in:1: r.jq: the program called halt; a rule must give exactly one value per record'
    attack 2 '., halt_error(0)'
    assert_equal "$stderr" 'scrub: in:1: r.jq: the program called halt_error (exit code 0): {"id":1}'
}

@test "a value that is not an object, or nests too deep, is trouble" {
    attack 2 '[.]'
    assert_equal "$stderr" "scrub: in:1: r.jq: the program's value for this record is not a JSON object"
    attack 2 '.a = reduce range(10001) as $i (0; [.])'
    assert_equal "$stderr" "scrub: in:1: r.jq: the program's value for this record nests deeper than 10000 levels"
}

@test "trouble after a rule's line over 128 KiB: that line keeps its LF" {
    attack 2 'if .id == 1 then .pad = ("x" * 140000) else error("second") end'
    assert_equal "$stderr" 'scrub: in:2: r.jq: second'
    [ "$(wc -l < out)" -eq 1 ]
}

@test "trouble after 128 KiB of output: whole lines only" {
    for i in $(seq 300); do printf '{"id":%d,"pad":"%0900d"}\n' "$i" 0; done > in
    attack 2 'if .id == 300 then error("last") else . end'
    assert_equal "$stderr" 'scrub: in:300: r.jq: last'
    [ -s out ]
    [ "$(wc -l < out)" -lt 300 ]
}
