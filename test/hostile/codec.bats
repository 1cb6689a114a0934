#!/usr/bin/env bats
# The session codec against hostile spellings of chunk events: packing may
# lose compression, never bytes. For every log x below,
#     jsonl-pack x | jsonl-pack --unpack   ==   jsonl-pack --unpack x
# byte for byte. Each case writes its variant of a chunk event (a template:
# @S@ seq, @T@ time, @X@ payload) at every place of a run of four: all four
# events, the first, the middle, the last (the others canonical), so that a
# variant that wrongly joins a run shows. Templates without @S@ make
# projected logs.
bats_require_minimum_version 1.5.0
load ../helpers/common
load ../helpers/codec

setup() { cd "$BATS_TEST_TMPDIR"; }

# Canonical members, the neighbours of a variant.
TXT='{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
RSN='{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":0,"text":"@X@"}}}'
TOOL='{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"@X@"}}}'
# inst VAR TEMPLATE SEQ: VAR = the template for event SEQ (time 100 + 3 SEQ,
# payload "p<SEQ>")
inst() {
    local t=${2//@S@/$3}
    t=${t//@T@/$((100 + 3 * $3))}
    printf -v "$1" '%s' "${t//@X@/p$3}"
}
# unenv TEMPLATE: the template projected (no seq/time)
unenv() { printf '%s' "${1//,\"seq\":@S@,\"time\":@T@/}"; }
# runlog FILE NEIGHBOUR VARIANT: a log of four runs of four events, the
# variant at every place of its run in turn (all four, the first, the middle
# one, the last), NEIGHBOUR elsewhere; a step/end event ends each run.
runlog() {
    local f=$1 nb=$2 v=$3 place k line seq=0 sep lines=()
    sep='{"type":"step/end","seq":@S@,"time":@T@,"data":{"turn":1,"step":1}}'
    [[ $v == *@S@* ]] || { nb=$(unenv "$nb"); sep=$(unenv "$sep"); }
    for place in all first middle last; do
        for k in 0 1 2 3; do
            case $place:$k in
                all:*|first:0|middle:1|last:3) inst line "$v" $seq ;;
                *) inst line "$nb" $seq ;;
            esac
            lines+=("$line")
            seq=$((seq + 1))
        done
        inst line "$sep" $seq
        lines+=("$line")
        seq=$((seq + 1))
    done
    mklog "$f" "${lines[@]}"
}
# same_bytes FILE: the codec property on one log; prints the difference.
same_bytes() {
    jsonl-pack --unpack "$1" > "$1.want"
    jsonl-pack "$1" | jsonl-pack --unpack > "$1.got"
    cmp -s "$1.want" "$1.got" || { echo "bytes lost packing $1:"; diff "$1.want" "$1.got"; return 1; }
}
# keeps NEIGHBOUR VARIANT: the property at every place of a run.
keeps() {
    runlog v.jsonl "$1" "$2"
    same_bytes v.jsonl
}
# packs NEIGHBOUR VARIANT: a canonical spelling keeps its compression too:
# each run of four is one row, whatever the variant's place.
packs() {
    keeps "$1" "$2"
    run -0 jsonl-pack v.jsonl
    [ "${#lines[@]}" -eq 9 ] || { echo "not four rows:"; printf '%s\n' "${lines[@]}"; return 1; }
    [ "$(grep -c -- '-chunks"' <<< "$output")" -eq 4 ]
}

# ------------------------------------------------------------ members reordered

@test "root members reordered: seq before type" {
    keeps "$TXT" '{"seq":@S@,"type":"assistant/chunk","time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "root members reordered: time before seq" {
    keeps "$TXT" '{"type":"assistant/chunk","time":@T@,"seq":@S@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "root members reordered: data before the envelope" {
    keeps "$TXT" '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}},"seq":@S@,"time":@T@}'
}
@test "root members reordered: data first" {
    keeps "$TXT" '{"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}},"type":"assistant/chunk","seq":@S@,"time":@T@}'
}
@test "data members reordered: step before turn" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"step":1,"turn":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "data members reordered: chunk first" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"chunk":{"type":"text-delta","index":0,"text":"@X@"},"turn":1,"step":1}}'
}
@test "chunk members reordered: index, type, text" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"index":0,"type":"text-delta","text":"@X@"}}}'
}
@test "chunk members reordered: type, text, index" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"@X@","index":0}}}'
}
@test "chunk members reordered: text, index, type" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"text":"@X@","index":0,"type":"text-delta"}}}'
}
@test "reasoning chunk members reordered" {
    keeps "$RSN" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","text":"@X@","index":0}}}'
}
@test "tool-call chunk: name before id" {
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"name":"bash","id":"c1","argumentsDelta":"@X@"}}}'
}
@test "tool-call chunk: argumentsDelta before id" {
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","argumentsDelta":"@X@","index":2,"id":"c1","name":"bash"}}}'
}

# ------------------------------------------------------------ white space

@test "white space after every colon and comma" {
    keeps "$TXT" '{"type": "assistant/chunk", "seq": @S@, "time": @T@, "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "@X@"}}}'
}
@test "white space inside data only" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{ "turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "white space inside chunk only" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0, "text":"@X@"}}}'
}
@test "white space before a closing brace" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"} }}'
}
@test "a tab after the seq colon" {
    keeps "$TXT" "$(printf '{"type":"assistant/chunk","seq":\t@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}')"
}
@test "white space around the line's object" {
    keeps "$TXT" ' {"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}} '
}
@test "white space in a tool-call chunk" {
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name": "bash","argumentsDelta":"@X@"}}}'
}

# ------------------------------------------------------------ escaped spellings

@test "escaped key: t\\u0079pe" {
    keeps "$TXT" '{"t\u0079pe":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped key: s\\u0065q" {
    keeps "$TXT" '{"type":"assistant/chunk","s\u0065q":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped key: tim\\u0065" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"tim\u0065":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped key: d\\u0061ta" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"d\u0061ta":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped key: t\\u0075rn" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"t\u0075rn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped key: st\\u0065p" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"st\u0065p":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped key: ch\\u0075nk" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"ch\u0075nk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped key: the chunk's \\u0074ype" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"\u0074ype":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped key: ind\\u0065x" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","ind\u0065x":0,"text":"@X@"}}}'
}
@test "escaped key: t\\u0065xt" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"t\u0065xt":"@X@"}}}'
}
@test "escaped key: n\\u0061me and argumentsD\\u0065lta" {
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","n\u0061me":"bash","argumentsDelta":"@X@"}}}'
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsD\u0065lta":"@X@"}}}'
}
@test "escaped type name: assistant\\/chunk" {
    keeps "$TXT" '{"type":"assistant\/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped type name: \\u0061ssistant/chunk" {
    keeps "$TXT" '{"type":"\u0061ssistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "escaped chunk type: text\\u002ddelta, text-delt\\u0061" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text\u002ddelta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delt\u0061","index":0,"text":"@X@"}}}'
}
@test "escaped chunk type: reasoning\\u002ddelta, tool\\u002dcall-delta" {
    keeps "$RSN" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning\u002ddelta","index":0,"text":"@X@"}}}'
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool\u002dcall-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"@X@"}}}'
}

# ------------------------------------------------------------ envelope numbers

@test "time -0" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":-0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "seq -0 at the start of a run" {
    mklog a.jsonl \
        '{"type":"assistant/chunk","seq":-0,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}}' \
        "$(tdelta 1 0 1 1 0 b)" "$(tdelta 2 0 1 1 0 c)" "$(tdelta 3 0 1 1 0 d)"
    same_bytes a.jsonl
    mklog b.jsonl "$(tdelta 0 0 1 1 0 a)" "$(tdelta 1 0 1 1 0 b)" "$(tdelta 2 0 1 1 0 c)" \
        '{"type":"assistant/chunk","seq":3,"time":-0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"d"}}}'
    same_bytes b.jsonl
}
@test "time 1.0 (a fraction)" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@.0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "time 1e2, 1E2 (exponents)" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@e0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":1E2,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "seq 1.0 and 1e0" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@.0,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@e0,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "negative and huge times still pack (plain integers)" {
    packs "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":-@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    mklog a.jsonl "$(tdelta 0 9007199254740991 1 1 0 a)" "$(tdelta 1 -9007199254740991 1 1 0 b)" "$(tdelta 2 0 1 1 0 c)"
    same_bytes a.jsonl
    mklog b.jsonl "$(tdelta 0 -1 1 1 0 a)" "$(tdelta 1 -2 1 1 0 b)" "$(tdelta 2 -3 1 1 0 c)" "$(tdelta 3 0 1 1 0 d)"
    same_bytes b.jsonl
    run -0 jsonl-pack b.jsonl
    assert_line --index 1 '{"type":"text-chunks","seq0":0,"time0":-1,"data":{"turn":1,"step":1,"index":0,"dt":[-1,-1,3],"texts":["a","b","c","d"]}}'
}
@test "turn, step and index spelled 1.0, 1e0, -0 keep their spelling in a row" {
    packs '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1.0,"step":1e0,"chunk":{"type":"text-delta","index":-0,"text":"@X@"}}}' \
          '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1.0,"step":1e0,"chunk":{"type":"text-delta","index":-0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1.0,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
}

# ------------------------------------------------------------ strings

@test "payloads with \\/, \\u00e9, a lone surrogate and control escapes pack as written" {
    packs "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a\/@X@"}}}'
    packs "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\u00e9@X@\ud83d\u001F"}}}'
    packs "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"{\"p\":\"\/@X@\"}"}}}'
}
@test "an id or name spelled with an escape is its own run" {
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c\u0031","name":"bash","argumentsDelta":"@X@"}}}'
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"b\/ash","argumentsDelta":"@X@"}}}'
}

# ------------------------------------------------------------ duplicate and extra keys

@test "duplicate keys: type, seq, turn, text, the chunk's type" {
    keeps "$TXT" '{"type":"assistant/chunk","type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@","text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","type":"text-delta","index":0,"text":"@X@"}}}'
}
@test "extra keys at every level" {
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}},"surfaceOp":"append"}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"},"x":1}}'
    keeps "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@","x":null}}}'
    keeps "$TOOL" '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"@X@","text":"t"}}}'
}

# ------------------------------------------------------------ projected logs

@test "projected: canonical events pack into one row" {
    packs "$TXT" "$(unenv "$TXT")"
}
@test "projected: reordered, spaced, escaped variants stay events" {
    keeps "$TXT" '{"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}},"type":"assistant/chunk"}'
    keeps "$TXT" '{ "type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk" ,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"\u0074ype":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant\/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    keeps "$TXT" '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"@X@","index":0}}}'
    keeps "$TXT" '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}},"ignorable":true}'
}
@test "projected: a short row keeps its dt, and is canonical" {
    mklog a.jsonl '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[5],"texts":["a","b"]}}'
    same_bytes a.jsonl
    run -0 jsonl-pack a.jsonl
    assert_output "$(cat a.jsonl)"
    run -0 jsonl-pack --check a.jsonl
    # with dt [0] its members are events: nothing is lost
    mklog b.jsonl '{"type":"reasoning-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}'
    same_bytes b.jsonl
    run -1 jsonl-pack --check b.jsonl
}
@test "projected: rows with reordered keys and white space decode and pack canonically" {
    mklog a.jsonl '{"data":{"texts":["a","b","c"],"dt":[1,2],"index":0,"step":1,"turn":1},"type":"text-chunks"}' \
        '{ "type" : "tool-call-chunks" , "data" : { "turn":1,"step":1,"index":2,"id":"c1","dt":[0],"args":["{","}"] } }'
    same_bytes a.jsonl
}

# ------------------------------------------------------------ rows next to variants

@test "persisted: short rows, and rows next to events that may or may not join" {
    mklog a.jsonl '{"type":"text-chunks","seq0":0,"time0":7,"data":{"turn":1,"step":1,"index":0,"dt":[5],"texts":["a","b"]}}' \
        '{"type":"assistant/chunk","seq":2,"time":12,"data":{"turn":1,"step":1,"chunk":{"index":0,"type":"text-delta","text":"c"}}}' \
        "$(tdelta 3 12 1 1 0 d)" \
        '{"type":"text-chunks","seq0":4,"time0":-3,"data":{"turn":1,"step":1,"index":0,"dt":[0,9],"texts":["e","f","g"]}}' \
        '{"type":"assistant/chunk","seq":7,"time":-0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"h"}}}'
    same_bytes a.jsonl
    jsonl-pack a.jsonl > b.jsonl
    run -0 jsonl-pack --check b.jsonl
}

# ------------------------------------------------------------ projection

@test "jsonl-project: events whose envelope alone is odd still pack; the output is canonical" {
    runlog a.jsonl "$TXT" '{"type":"assistant/chunk","seq":@S@,"time":-0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}'
    run -0 jsonl-project a.jsonl
    assert_line --index 1 '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0,0,0],"texts":["p0","p1","p2","p3"]}}'
    [ "$(grep -c -- '-chunks"' <<< "$output")" -eq 4 ]
    for v in '{"seq":@S@,"type":"assistant/chunk","time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"@X@"}}}' \
             '{"type":"assistant/chunk","seq":@S@,"time":@T@,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"@X@","index":0}}}'; do
        runlog p.jsonl "$TXT" "$v"
        jsonl-project p.jsonl > q.jsonl
        run -0 jsonl-pack --check q.jsonl
        same_bytes q.jsonl
    done
}

# ------------------------------------------------------------ a big fixture

@test "fixture-guard reads a 64 MB fixture a line at a time (peak RSS grows < 16 MB)" {
    command -v /usr/bin/time >/dev/null || skip "no /usr/bin/time"
    cp -r "$CORPUS/acp-snapshot-suite/suite/snapshots" s
    # ASan would keep every freed line in its quarantine: measure the program
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"
    /usr/bin/time -f %M -o small fixture-guard s
    yes "{\"type\":\"x/big\",\"data\":{\"s\":\"$(head -c 32768 /dev/zero | tr '\0' a)\"}}" | head -n 2048 >> s/no-model/session.jsonl
    /usr/bin/time -f %M -o big fixture-guard s
    echo "peak RSS: $(cat small) KB, then $(cat big) KB with the 64 MB fixture"
    [ $(($(cat big) - $(cat small))) -lt 16384 ]
}
