#!/usr/bin/env bats
# hostile/replay-serve: provider scripts, overrides and fixtures as a
# stranger's pull request could write them, and clients that misbehave,
# against replay-serve. One case per attack. Loopback only; every case is
# bounded in count and time and stops by itself (a watchdog kills a server
# that ignores SIGTERM, held sockets go when their holder is killed).
bats_require_minimum_version 1.5.0
load ../helpers/common
load ../helpers/replay-serve

setup() { cd "$BATS_TEST_TMPDIR"; RS_PID=; HOLD_PID=; }
teardown() {
    [ -z "$HOLD_PID" ] || kill "$HOLD_PID" 2>/dev/null || true
    [ -z "$RS_PID" ] || kill -9 "$RS_PID" 2>/dev/null || true
}

# The resident-memory bound of replay-serve(1) (64 MiB with the default
# limits), larger under AddressSanitizer (shadow memory, quarantine).
if [[ "$BIN" == */asan/* ]]; then RSS_BOUND_KB=$((512 * 1024)); else RSS_BOUND_KB=$((64 * 1024)); fi
# The time a SIGTERM takes to end it (replay-serve(1): 100 ms), longer
# under AddressSanitizer, whose leak check at exit scans every thread's
# memory first (on a 2-core VM under load, 119 and 202 ms were seen).
if [[ "$BIN" == */asan/* ]]; then STOP_MS=500; else STOP_MS=100; fi

FIN='{"type":"finish","reason":{"kind":"stop"}}'
text_entry() { # TEXT → a one-chunk text entry
    jq -cn --arg t "$1" --argjson fin "$FIN" '{kind:"chunks",chunks:[{type:"text-delta",index:0,text:$t},$fin]}'
}
now_us() { echo "${EPOCHREALTIME/./}"; }
vm_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$RS_PID/status"; }   # VmHWM, VmRSS
threads() { ls "/proc/$RS_PID/task" | wc -l; }
faster_than() { awk -v lim="$1" -v t="$2" 'BEGIN { exit !(t + 0 < lim + 0) }'; }   # LIMIT SECONDS

# stop_timed: SIGTERM, then the time to the exit in RS_MS; a watchdog kills
# the server after 2 s (RS_STATUS 137 then). Sets RS_STATUS and RS_STDERR.
stop_timed() {
    ( sleep 2; kill -9 "$RS_PID" 2>/dev/null ) &
    local dog=$! t0
    t0=$(now_us)
    kill -TERM "$RS_PID"
    RS_STATUS=0
    wait "$RS_PID" || RS_STATUS=$?
    RS_MS=$(( ($(now_us) - t0) / 1000 ))
    kill "$dog" 2>/dev/null || true
    RS_STDERR=$(cat "$BATS_TEST_TMPDIR/rs.err")
    RS_PID=
}

# hold N: N connections to the server, each sending the start of a request
# and then nothing, held by HOLD_PID (for 30 s at most); waits until the
# server has taken them all off its listen queue.
hold() {
    local n=$1
    ( ulimit -n $((n + 64)) 2>/dev/null || exit 3
      trap '' PIPE
      for ((i = 0; i < n; i++)); do
          exec {fd}<>"/dev/tcp/127.0.0.1/$RS_PORT" || break
          printf 'POST /chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty' >&"$fd" 2>/dev/null || true
      done
      echo "$i" > held
      exec sleep 30 ) 2>/dev/null &
    HOLD_PID=$!
    local i
    for i in $(seq 1000); do [ -s held ] && break; kill -0 "$HOLD_PID" 2>/dev/null || break; sleep 0.01; done
    [ "$(cat held 2>/dev/null)" = "$n" ] || skip "cannot open $n sockets here (ulimit -n)"
    for i in $(seq 1000); do
        [ "$(ss -Hltn "sport = :$RS_PORT" | awk '{ print $2 }')" = 0 ] && break
        sleep 0.01
    done
}

@test "hostile replay-serve: a chunk without its text (or any mistyped member) is a load error naming file:line" {
    local bad
    for bad in '{"type":"text-delta","index":0}' '{"type":"reasoning-delta","index":0,"text":null}' \
               '{"type":"tool-call-delta","index":"1","id":"c","argumentsDelta":""}' \
               '{"type":"tool-call-delta","index":1,"id":"c","name":7,"argumentsDelta":""}' \
               '{"type":"block-end","index":0,"block":{"type":"text"}}' '{"type":"usage","usage":[]}' \
               '{"type":"finish","reason":"stop"}'; do
        { text_entry ok; printf '{"kind":"chunks","chunks":[%s,%s]}\n' "$bad" "$FIN"; } > provider.jsonl
        rm -f port
        run -2 --separate-stderr timeout 5 replay-serve --port-file port provider.jsonl
        assert_regex "$stderr" '^replay-serve: provider\.jsonl:2: entry 1 chunk 0 \([a-z-]+\)( [a-z.]+)?: "[A-Za-z]+" must be '
        [ ! -e port ]
    done
    run -2 --separate-stderr timeout 5 replay-serve provider.jsonl
    assert_equal "$stderr" 'replay-serve: provider.jsonl:2: entry 1 chunk 0 (finish): "reason" must be an object, not "stop"'
    # the same through an override and a fixture, via replay-derive
    echo '{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}' > header.jsonl
    printf '[{"kind":"chunks","chunks":[{"type":"text-delta","index":0},%s]}]\n' "$FIN" > replay.override.json
    replay-derive -o replay.override.json header.jsonl > derived.jsonl
    run -2 --separate-stderr timeout 5 replay-serve derived.jsonl
    assert_equal "$stderr" 'replay-serve: derived.jsonl:1: entry 0 chunk 0 (text-delta): "text" must be a string (it is missing)'
    { echo '{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}'
      echo '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":0}}}'
      printf '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":%s}}\n' "$FIN"; } > session.jsonl
    replay-derive session.jsonl > derived.jsonl
    run -2 --separate-stderr timeout 5 replay-serve derived.jsonl
    assert_equal "$stderr" 'replay-serve: derived.jsonl:1: entry 0 chunk 0 (reasoning-delta): "text" must be a string (it is missing)'
}

@test "hostile replay-serve: a back-reference in a fromRequest pattern is refused at load" {
    { text_entry ok; text_entry 'x {{fromRequest:(.*)(.*)(.*)\3\2\1z}}'; } > provider.jsonl
    run -2 --separate-stderr timeout 5 replay-serve provider.jsonl
    assert_equal "$stderr" 'replay-serve: provider.jsonl:2: entry 1 chunk 0 (text-delta): {{fromRequest:(.*)(.*)(.*)\3\2\1z}}: invalid pattern: back-references (\3) are not supported'
    text_entry '{{fromRequest:(a}}' > provider.jsonl
    run -2 --separate-stderr timeout 5 replay-serve provider.jsonl
    assert_equal "$stderr" 'replay-serve: provider.jsonl:1: entry 0 chunk 0 (text-delta): {{fromRequest:(a}}: invalid pattern: unmatched ('
}

@test "hostile replay-serve: patterns quadratic or worse elsewhere answer in well under a second" {
    { text_entry '{{fromRequest:a.*z|a}}'; text_entry '{{fromRequest:(.*)(.*)(.*)y}}'; text_entry '{{fromRequest:(x+x+)+y}}'; } > provider.jsonl
    head -c 40000 /dev/zero | tr '\0' a | jq -Rsc '{stream:true,messages:[{role:"user",content:.}]}' > a.json
    head -c 200000 /dev/zero | tr '\0' x | jq -Rsc '{stream:true,messages:[{role:"user",content:.}]}' > x.json
    serve_start provider.jsonl
    run -0 curl -sS --max-time 10 -w '\n%{time_total}' --data-binary @a.json "$RS_URL/chat/completions"
    assert_output --partial '"delta":{"content":"a"}'
    faster_than 0.5 "${lines[-1]}"
    run -0 curl -sS --max-time 10 -w '\n%{time_total}' --data-binary @x.json "$RS_URL/chat/completions"
    assert_output --partial '{{fromRequest:(.*)(.*)(.*)y}} matched nothing in the request'
    faster_than 0.5 "${lines[-1]}"
    run -0 curl -sS --max-time 10 -w '\n%{time_total}' --data-binary @x.json "$RS_URL/chat/completions"
    assert_output --partial '{{fromRequest:(x+x+)+y}} matched nothing in the request'
    faster_than 0.5 "${lines[-1]}"
    stop_timed
    assert_equal "$RS_STATUS" 1
}

@test "hostile replay-serve: an entry of 200000 blocks streams in linear time on the item wires" {
    # every block opened by a delta, every block-end at the end: the shape
    # of a derived entry, scaled up
    jq -cn '{kind:"chunks",chunks:([range(200000) | {type:"text-delta",index:.,text:"x"}]
        + [range(200000) | {type:"block-end",index:.,block:{type:"text",text:"x"}}])}' > provider.jsonl
    serve_start provider.jsonl
    run -0 curl -sS --max-time 60 -o body -w '%{time_total}' --data-binary '{"stream":true}' "$RS_URL/v1/messages"
    faster_than 8 "$output"
    assert_equal "$(grep -c '^event: content_block_stop$' body)" 200000
    serve_stop
    assert_equal "$RS_STATUS" 0
}

@test "hostile replay-serve: a search past its time limit fails the request with a message" {
    text_entry '{{fromRequest:(.{0,200}){1,10}z}}' > provider.jsonl
    seq 200000 | tr -d '\n' | sed 's/0/z/g' | jq -Rsc '{stream:true,messages:[{role:"user",content:.}]}' > body.json
    serve_start provider.jsonl
    run -0 curl -sS --max-time 10 -w ' %{http_code}' --data-binary @body.json "$RS_URL/chat/completions"
    assert_output '{"error":{"message":"replay-serve: provider.jsonl:1: call 1: {{fromRequest:(.{0,200}){1,10}z}}: the search took more than 1000 ms (the limit of one placeholder)","type":"server_error","param":null,"code":"server_error"}} 500'
    stop_timed
    assert_equal "$RS_STATUS" 1
}

@test "hostile replay-serve: a 500 MB body gets 413 without being held" {
    text_entry ok > provider.jsonl
    serve_start provider.jsonl
    # announced: refused before a byte of it is read
    run -0 bash -c "head -c 500000000 /dev/zero | curl -sS --max-time 60 -o /dev/null -w '%{http_code}' -T - -X POST -H 'Content-Length: 500000000' '$RS_URL/chat/completions'"
    assert_output 413
    # chunked: read and thrown away past the limit, refused at its end
    run -0 bash -c "head -c 500000000 /dev/zero | curl -sS --max-time 60 -o /dev/null -w '%{http_code}' -T - -X POST '$RS_URL/chat/completions'"
    assert_output 413
    local hwm
    hwm=$(vm_kb VmHWM)
    echo "VmHWM ${hwm} kB (bound ${RSS_BOUND_KB} kB)"
    [ "$hwm" -lt "$RSS_BOUND_KB" ]
    run -0 post '{"stream":true}'
    assert_output --partial '"content":"ok"'
    stop_timed
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: request 0: the request body is over 8388608 bytes (--max-request-bytes)
replay-serve: request 1: the request body is over 8388608 bytes (--max-request-bytes)'
}

@test "hostile replay-serve: 1000 half-open connections cost no threads past the limit and do not lock a client out" {
    text_entry ok > provider.jsonl
    serve_start provider.jsonl
    hold 1000
    local t h
    t=$(threads); h=$(vm_kb VmHWM)
    echo "threads $t, VmHWM $h kB"
    [ "$t" -le 70 ]                     # 64 connections, the one that makes room, the listener, main
    [ "$h" -lt "$RSS_BOUND_KB" ]
    run -0 curl -sS --max-time 5 -w '\n%{time_total}' -d '{"stream":true}' "$RS_URL/chat/completions"
    assert_output --partial '"content":"ok"'
    echo "answered in ${lines[-1]} s"
    faster_than 0.1 "${lines[-1]}"
    [ "$(threads)" -le 70 ]
    stop_timed
    assert_equal "$RS_STATUS" 0
    [ "$RS_MS" -lt "$STOP_MS" ]
}

@test "hostile replay-serve: --max-connections bounds the threads; a silent connection goes at --idle-timeout" {
    text_entry ok > provider.jsonl
    serve_start provider.jsonl --max-connections 4 --idle-timeout 1
    hold 50
    [ "$(threads)" -le 7 ]
    run -0 post '{"stream":true}'
    assert_output --partial '"content":"ok"'
    local t0 ms
    t0=$(now_us)
    run -0 timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$RS_PORT; printf 'POST /chat/completions HTTP/1.1\r\n' >&3; cat <&3"
    ms=$(( ($(now_us) - t0) / 1000 ))
    echo "closed after $ms ms"
    [ "$ms" -ge 900 ] && [ "$ms" -lt 2500 ]
    stop_timed
    assert_equal "$RS_STATUS" 0
}

@test "hostile replay-serve: SIGTERM during a hang or a paced stream ends it within 100 ms" {
    echo '{"kind":"hang","readyFile":"ready"}' > provider.jsonl
    serve_start provider.jsonl --ready-dir "$BATS_TEST_TMPDIR"
    curl -sS -N --max-time 10 -d '{"stream":true}' "$RS_URL/chat/completions" > hang.out 2>/dev/null &
    local i
    for i in $(seq 300); do [ -e ready ] && break; sleep 0.01; done
    [ -e ready ]
    stop_timed
    echo "hang: exit after $RS_MS ms"
    [ "$RS_MS" -lt "$STOP_MS" ]
    assert_equal "$RS_STATUS" 0
    text_entry slow > provider.jsonl
    serve_start provider.jsonl --pace 60000
    curl -sS -N --max-time 10 -d '{"stream":true}' "$RS_URL/chat/completions" > paced.out 2>/dev/null &
    for i in $(seq 300); do [ -s paced.out ] && break; sleep 0.01; done
    [ -s paced.out ]
    stop_timed
    echo "paced: exit after $RS_MS ms"
    [ "$RS_MS" -lt "$STOP_MS" ]
    assert_equal "$RS_STATUS" 1
    assert_regex "$RS_STDERR" '^replay-serve: request 0: entry 0: the stream was cut short by the shutdown \([0-9]+ of [0-9]+ bytes sent\)$'
}

@test "hostile replay-serve: SIGTERM during a fromRequest search ends it within 100 ms" {
    text_entry '{{fromRequest:(.{0,200}){1,10}z}}' > provider.jsonl
    seq 200000 | tr -d '\n' | sed 's/0/z/g' | jq -Rsc '{stream:true,messages:[{role:"user",content:.}]}' > body.json
    serve_start provider.jsonl
    curl -sS --max-time 10 --data-binary @body.json "$RS_URL/chat/completions" > out 2>&1 &
    sleep 0.3
    stop_timed
    echo "exit after $RS_MS ms"
    [ "$RS_MS" -lt "$STOP_MS" ]
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: provider.jsonl:1: call 1: {{fromRequest:(.{0,200}){1,10}z}}: the search was stopped (shutting down)'
}

@test "hostile replay-serve: an entry taken but not delivered in full is exit 1" {
    jq -cn --argjson fin "$FIN" '{kind:"chunks",chunks:([range(5)|{type:"text-delta",index:0,text:"x"}] + [$fin])}' > provider.jsonl
    serve_start provider.jsonl --pace 200 --log log.jsonl
    run -28 curl -sS --max-time 0.3 -d '{"stream":true}' "$RS_URL/chat/completions"
    sleep 1.2
    stop_timed
    assert_equal "$RS_STATUS" 1
    assert_regex "$RS_STDERR" '^replay-serve: request 0: entry 0: the client went away before the answer was delivered in full \([0-9]+ of [0-9]+ bytes sent\)$'
    run -0 jq -c '[.request,.entry,.outcome]' log.jsonl
    assert_output '[0,0,"client-closed"]'
}

@test "hostile replay-serve: a --log that cannot be written is trouble" {
    text_entry ok > provider.jsonl
    run -2 --separate-stderr timeout 5 replay-serve --port-file port --log no/such/dir/log provider.jsonl
    assert_equal "$stderr" 'replay-serve: unable to open no/such/dir/log: No such file or directory'
    [ ! -e port ]
    [ -w /dev/full ] || skip "no /dev/full"
    serve_start provider.jsonl --log /dev/full
    post '{"stream":true}' > /dev/null
    stop_timed
    assert_equal "$RS_STATUS" 2
    assert_equal "$RS_STDERR" 'replay-serve: unable to write /dev/full: No space left on device'
}

@test "hostile replay-serve: a --port-file that cannot be written leaves nothing behind" {
    text_entry ok > provider.jsonl
    mkdir -p out/port
    run -2 --separate-stderr timeout 5 replay-serve --port-file out/port provider.jsonl
    local err=$stderr
    run -0 ls -A out
    assert_output port
    assert_equal "$err" 'replay-serve: unable to write the port file out/port: Is a directory'
}
