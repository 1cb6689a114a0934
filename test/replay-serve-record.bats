#!/usr/bin/env bats
# replay-serve --upstream URL --record FILE: the recording proxy. The upstream
# is a second replay-serve on loopback serving an authored script (or, for the
# request headers and the other wires, the scripted raw server of
# test/helpers/sse-server.c); curl is the client.
bats_require_minimum_version 1.5.0
load helpers/common

setup_file() {
    cc -O1 -o "$BATS_FILE_TMPDIR/sse-server" "$BATS_TEST_DIRNAME/helpers/sse-server.c"
}
setup() { cd "$BATS_TEST_TMPDIR"; PIDS=(); export RS_TEST_KEY=sk-rec-5ecret-0042; }
teardown() { local p; for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done; true; }

# start NAME ARGS…: replay-serve in the background, stdout/stderr in NAME.out,
# NAME.err; sets NAME_PID and NAME_URL (NAME: a shell name).
start() {
    local name=$1 i; shift
    rm -f "$name.port"
    replay-serve --port-file "$name.port" "$@" >"$name.out" 2>"$name.err" &
    printf -v "${name}_PID" %s $!
    PIDS+=($!)
    for i in $(seq 500); do
        [ -s "$name.port" ] && break
        kill -0 "$!" 2>/dev/null || { cat "$name.err" >&2; return 1; }
        sleep 0.01
    done
    printf -v "${name}_URL" %s "http://127.0.0.1:$(cat "$name.port")"
}
# stop NAME: SIGTERM and wait; sets STATUS.
stop() {
    local pid="${1}_PID"
    kill -TERM "${!pid}"
    STATUS=0
    wait "${!pid}" || STATUS=$?
}
# get URL OUT: one streaming chat request; the body into OUT, the status on stdout.
BODY='{"model":"deepseek-chat","stream":true,"messages":[{"role":"user","content":"Hi"}]}'
get() {
    curl -sS -N --max-time 20 -o "$2" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "$BODY" "$1${3:-/chat/completions}" 2>/dev/null || true
}
# raw_start FILE…: sse-server answering connection N with FILE N as is; sets RAW_URL.
raw_start() {
    "$BATS_FILE_TMPDIR/sse-server" raw.port requests.log "$@" &
    PIDS+=($!)
    local i
    for i in $(seq 500); do [ -s raw.port ] && break; sleep 0.01; done
    RAW_URL="http://127.0.0.1:$(cat raw.port)"
}
# sse_http NAME < body: an HTTP 200 event-stream answer in NAME.http.
sse_http() {
    { printf 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n'; cat; } > "$1.http"
}
# no_key: the key appears in no file of the test directory.
no_key() {
    run grep -rl -e "$RS_TEST_KEY" .
    assert_failure 1
    assert_output ''
}

TEXT='{"kind":"chunks","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Hello"},{"type":"text-delta","index":0,"text":", \"world\" — ok"},{"type":"block-end","index":0,"block":{"type":"text","text":"Hello, \"world\" — ok"}},{"type":"usage","usage":{"inputTokens":12,"outputTokens":3,"cacheReadTokens":64}},{"type":"finish","reason":{"kind":"stop"}}]}'
THINK_TOOLS='{"kind":"chunks","chunks":[{"type":"block-start","index":0,"blockType":"reasoning"},{"type":"reasoning-delta","index":0,"text":"List it."},{"type":"block-start","index":1,"blockType":"tool-call"},{"type":"tool-call-delta","index":1,"id":"call_00_a","name":"bash","argumentsDelta":"{\"cmd\":"},{"type":"tool-call-delta","index":1,"id":"call_00_a","name":"bash","argumentsDelta":"\"ls\"}"},{"type":"block-start","index":2,"blockType":"tool-call"},{"type":"tool-call-delta","index":2,"id":"call_01_b","name":"read","argumentsDelta":"{}"},{"type":"block-end","index":0,"block":{"type":"reasoning","text":"List it."}},{"type":"block-end","index":1,"block":{"type":"tool-call","id":"call_00_a","name":"bash","arguments":"{\"cmd\":\"ls\"}"}},{"type":"block-end","index":2,"block":{"type":"tool-call","id":"call_01_b","name":"read","arguments":"{}"}},{"type":"usage","usage":{"inputTokens":100,"outputTokens":20,"reasoningTokens":5}},{"type":"finish","reason":{"kind":"tool-calls"}}]}'

@test "record: bad options are refused with exact messages, before listening" {
    run -2 --separate-stderr replay-serve --record r.jsonl
    assert_equal "$stderr" 'replay-serve: --record needs --upstream'
    run -2 --separate-stderr replay-serve --upstream-key-env RS_TEST_KEY
    assert_equal "$stderr" 'replay-serve: --upstream-key-env needs --upstream'
    run -2 --separate-stderr replay-serve --upstream http://127.0.0.1:9
    assert_equal "$stderr" 'replay-serve: --upstream needs --record'
    run -2 --separate-stderr replay-serve --upstream ftp://127.0.0.1:9 --record r.jsonl
    assert_equal "$stderr" 'replay-serve: invalid --upstream (an http:// or https:// URL is wanted)'
    echo '{"kind":"hang"}' > s.jsonl
    run -2 --separate-stderr replay-serve --upstream http://127.0.0.1:9 --record r.jsonl s.jsonl
    assert_equal "$stderr" 'replay-serve: no script is served while recording (--upstream)'
    run -2 --separate-stderr env -u RS_UNSET_KEY replay-serve --upstream http://127.0.0.1:9 --upstream-key-env RS_UNSET_KEY --record r.jsonl
    assert_equal "$stderr" 'replay-serve: --upstream-key-env: RS_UNSET_KEY is not set or empty'
    run -2 --separate-stderr env RS_EMPTY_KEY= replay-serve --upstream http://127.0.0.1:9 --upstream-key-env RS_EMPTY_KEY --record r.jsonl
    assert_equal "$stderr" 'replay-serve: --upstream-key-env: RS_EMPTY_KEY is not set or empty'
    run -2 --separate-stderr replay-serve --port-file p --upstream http://127.0.0.1:9 --record nodir/r.jsonl
    assert_equal "$stderr" 'replay-serve: unable to create a file beside nodir/r.jsonl (--record): No such file or directory'
    [ ! -e p ] && [ ! -e nodir ] && [ ! -e r.jsonl ]
}

@test "record: the client gets the upstream's bytes unchanged; FILE holds the entries, which serve the same bytes back" {
    printf '%s\n' "$TEXT" "$THINK_TOOLS" > script.jsonl
    # what the upstream sends to a direct client
    start direct --created 7 script.jsonl
    [ "$(get "$direct_URL" d0)" = 200 ]
    [ "$(get "$direct_URL" d1)" = 200 ]
    stop direct
    # the same through the proxy
    start up --created 7 script.jsonl
    start px --upstream "$up_URL" --upstream-key-env RS_TEST_KEY --record rec.jsonl --log px.log
    [ "$(get "$px_URL" p0)" = 200 ]
    [ "$(get "$px_URL" p1)" = 200 ]
    cmp d0 p0
    cmp d1 p1
    [ ! -e rec.jsonl ]            # written at the end only
    stop px
    assert_equal "$STATUS" 0
    assert_equal "$(cat px.err)" ''
    stop up
    assert_equal "$STATUS" 0      # every upstream entry consumed and delivered
    # the entries: the authored ones, byte for byte
    cmp script.jsonl rec.jsonl
    run -0 jq -c '[.request, .entry, .kind, .status, .outcome]' px.log
    assert_output $'[0,null,null,200,"complete"]\n[1,null,null,200,"complete"]'
    # served back, they give the upstream's bytes again
    start back --created 7 rec.jsonl
    [ "$(get "$back_URL" b0)" = 200 ]
    [ "$(get "$back_URL" b1)" = 200 ]
    stop back
    assert_equal "$STATUS" 0
    cmp d0 b0
    cmp d1 b1
    no_key
}

@test "record: a stream cut mid-way, one closed without [DONE], a drop, 500 and 429 answers are recorded as throws" {
    cat > script.jsonl <<'EOF'
{"kind":"throw","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Part"}],"message":"cut","code":"TRANSPORT"}
{"kind":"throw","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Clo"}],"message":"closed","code":"STREAM_CLOSED"}
{"kind":"throw","chunks":[],"message":"gone","code":"TRANSPORT"}
{"kind":"throw","chunks":[],"message":"model exploded","code":"PROVIDER"}
{"kind":"throw","chunks":[],"message":"Rate Limit Reached","code":"RATE_LIMIT"}
EOF
    start direct --created 7 script.jsonl
    for i in 0 1 2 3 4; do echo "$(get "$direct_URL" d$i)" >> direct.status; done
    stop direct
    start up --created 7 script.jsonl
    start px --upstream "$up_URL/" --upstream-key-env RS_TEST_KEY --record rec.jsonl --log px.log
    for i in 0 1 2 3 4; do echo "$(get "$px_URL" p$i)" >> px.status; done
    cmp direct.status px.status
    assert_equal "$(cat px.status | tr '\n' ' ')" '200 200 000 500 429 '
    for i in 0 1 3 4; do cmp d$i p$i; done
    [ ! -s p2 ]
    stop px
    assert_equal "$STATUS" 0
    assert_equal "$(cat px.err)" 'replay-serve: request 0: the upstream stream was cut: transfer closed with outstanding read data remaining
replay-serve: request 2: the upstream did not answer: Empty reply from server'
    stop up
    assert_equal "$STATUS" 0
    cat > want.jsonl <<'EOF'
{"kind":"throw","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Part"}],"message":"the upstream connection was cut mid-stream","code":"TRANSPORT"}
{"kind":"throw","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Clo"}],"message":"the stream ended without data: [DONE]","code":"STREAM_CLOSED"}
{"kind":"throw","chunks":[],"message":"the upstream did not answer","code":"TRANSPORT"}
{"kind":"throw","chunks":[],"message":"model exploded","code":"SERVER","status":500}
{"kind":"throw","chunks":[],"message":"Rate Limit Reached","code":"RATE_LIMIT","status":429}
EOF
    cmp want.jsonl rec.jsonl
    run -0 jq -c '[.status, .outcome]' px.log
    assert_output $'[200,"aborted"]\n[200,"complete"]\n[0,"dropped"]\n[500,"complete"]\n[429,"complete"]'
    # served back: the same statuses, the same stream prefixes
    start back --created 7 rec.jsonl
    for i in 0 1 2 3 4; do echo "$(get "$back_URL" b$i)" >> back.status; done
    stop back
    cmp direct.status back.status
    for i in 0 1 3 4; do cmp d$i b$i; done
    no_key
}

@test "record: a throw's status is the HTTP status served, and is checked when a script loads" {
    echo '{"kind":"throw","chunks":[],"message":"Forbidden here","code":"AUTH","status":403}' > s.jsonl
    start srv s.jsonl
    [ "$(get "$srv_URL" out)" = 403 ]
    stop srv
    assert_equal "$STATUS" 0
    assert_equal "$(cat out)" '{"error":{"message":"Forbidden here","type":"authentication_error","param":null,"code":"authentication_error"}}'
    echo '{"kind":"throw","chunks":[],"message":"m","code":"AUTH","status":600}' > s.jsonl
    run -2 --separate-stderr replay-serve s.jsonl
    assert_equal "$stderr" 'replay-serve: s.jsonl:1:66: entry 0 status must be an integer from 400 to 599'
    echo '{"kind":"throw","chunks":[],"message":"m","code":"AUTH","status":"429"}' > s.jsonl
    run -2 --separate-stderr replay-serve s.jsonl
    assert_equal "$stderr" 'replay-serve: s.jsonl:1:66: entry 0 status must be an integer from 400 to 599'
    echo '{"kind":"throw","chunks":[{"type":"block-start","index":0,"blockType":"text"}],"message":"m","code":"AUTH","status":429}' > s.jsonl
    run -2 --separate-stderr replay-serve s.jsonl
    assert_equal "$stderr" 'replay-serve: s.jsonl:1: entry 0: a status applies only to a throw without chunks'
    echo '{"kind":"chunks","chunks":[],"status":429}' > s.jsonl
    run -2 --separate-stderr replay-serve s.jsonl
    assert_equal "$stderr" 'replay-serve: s.jsonl:1:1: entry 0 has invalid chunks-entry fields (want exactly kind, chunks)'
}

@test "record: SIGTERM writes FILE atomically; a killed proxy leaves no FILE, an old one intact" {
    printf '%s\n' "$TEXT" "$TEXT" > script.jsonl
    start up --created 7 script.jsonl
    echo old > rec.jsonl
    start px --upstream "$up_URL" --record rec.jsonl
    [ "$(get "$px_URL" p0)" = 200 ]
    kill -9 "$px_PID"
    wait "$px_PID" || true
    assert_equal "$(cat rec.jsonl)" old
    run -0 ls
    refute_output --partial 'rec.jsonl.tmp'
    rm rec.jsonl
    start px --upstream "$up_URL" --record rec.jsonl
    [ "$(get "$px_URL" p1)" = 200 ]
    kill -9 "$px_PID"
    wait "$px_PID" || true
    [ ! -e rec.jsonl ]
    run -0 ls
    refute_output --partial 'rec.jsonl.tmp'
    # a proxy with nothing recorded writes an empty FILE
    start px --upstream "$up_URL" --record rec.jsonl
    stop px
    assert_equal "$STATUS" 0
    [ -f rec.jsonl ] && [ ! -s rec.jsonl ]
    stop up
}

@test "record: a stream open at SIGTERM, and one the client leaves, are throws with their prefix" {
    printf '%s\n' '{"kind":"hang"}' '{"kind":"hang"}' > script.jsonl
    start up --created 7 script.jsonl
    start px --upstream "$up_URL" --record rec.jsonl
    curl -sS -N --max-time 1 --data-binary "$BODY" "$px_URL/chat/completions" > p0 2>/dev/null || true
    grep -q partial p0
    sleep 0.5   # the upstream serves one stream at a time: let it see request 0 go
    curl -sS -N --max-time 20 --data-binary "$BODY" "$px_URL/chat/completions" > p1 2>/dev/null &
    local client=$!
    for i in $(seq 500); do grep -q partial p1 2>/dev/null && break; sleep 0.01; done
    stop px
    assert_equal "$STATUS" 0
    wait "$client" || true
    prefix='{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"partial"}'
    assert_equal "$(cat rec.jsonl)" "{\"kind\":\"throw\",\"chunks\":[$prefix],\"message\":\"the client went away before the end of the stream\",\"code\":\"TRANSPORT\"}
{\"kind\":\"throw\",\"chunks\":[$prefix],\"message\":\"the recording stopped before the end of the stream\",\"code\":\"TRANSPORT\"}"
    stop up
}

@test "record: unknown endpoints and non-streaming requests are refused and counted" {
    echo "$TEXT" > script.jsonl
    start up script.jsonl
    start px --upstream "$up_URL" --record rec.jsonl
    [ "$(get "$px_URL" o1 /v1/embeddings)" = 404 ]
    assert_equal "$(cat o1)" '{"error":{"message":"replay-serve: no such endpoint: POST /v1/embeddings","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}'
    run curl -sS -o o2 -w '%{http_code}' --data-binary '{"stream":false}' "$px_URL/chat/completions"
    assert_output 400
    assert_equal "$(cat o2)" '{"error":{"message":"replay-serve: only streaming requests are recorded (\"stream\": true)","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}'
    stop px
    assert_equal "$STATUS" 1
    assert_equal "$(cat px.err)" 'replay-serve: request 0: no such endpoint: POST /v1/embeddings
replay-serve: request 1: not a streaming request ("stream": true is required)'
    [ -f rec.jsonl ] && [ ! -s rec.jsonl ]
}

@test "record: the key goes upstream as Bearer (OpenAI paths) or x-api-key with anthropic-version (Messages), never into a file" {
    cp "$ROOT/test/data/wire-parse/responses-tool.sse" r.sse
    sse_http one < "$ROOT/test/data/wire-parse/chat-tools.sse"
    sse_http two < "$ROOT/test/data/wire-parse/responses-tool.sse"
    sse_http three < "$ROOT/test/data/wire-parse/messages-thinking.sse"
    raw_start one.http two.http three.http
    start px --upstream "$RAW_URL/v1" --upstream-key-env RS_TEST_KEY --record rec.jsonl --log px.log
    curl -sS -N -o p1 -H 'Authorization: Bearer sk-client-dummy' --data-binary "$BODY" "$px_URL/chat/completions"
    curl -sS -N -o p2 --data-binary "$BODY" "$px_URL/responses"
    curl -sS -N -o p3 -H 'anthropic-version: 2023-06-01' -H 'x-api-key: sk-client-dummy' --data-binary "$BODY" "$px_URL/messages"
    stop px
    assert_equal "$STATUS" 0
    cmp p1 "$ROOT/test/data/wire-parse/chat-tools.sse"
    cmp p2 "$ROOT/test/data/wire-parse/responses-tool.sse"
    cmp p3 "$ROOT/test/data/wire-parse/messages-thinking.sse"
    cat "$ROOT"/test/data/wire-parse/{chat-tools,responses-tool,messages-thinking}.json > want.jsonl
    cmp want.jsonl rec.jsonl
    # what the upstream was sent: the paths under its base, our key, not the client's
    run -0 grep -a -e '^POST ' -e '^Authorization:' -e '^x-api-key:' -e '^anthropic-version:' requests.log
    assert_output "$(printf '%s\r\n' 'POST /v1/chat/completions HTTP/1.1' "Authorization: Bearer $RS_TEST_KEY" \
        'POST /v1/responses HTTP/1.1' "Authorization: Bearer $RS_TEST_KEY" \
        'POST /v1/messages HTTP/1.1' 'anthropic-version: 2023-06-01' "x-api-key: $RS_TEST_KEY")"
    rm requests.log   # the upstream's own log holds the key; nothing of ours may
    no_key
}

@test "record: a stream longer than --idle-timeout is not closed for idleness" {
    echo '{"kind":"hang"}' > script.jsonl
    start up --idle-timeout 30 script.jsonl
    start px --idle-timeout 1 --upstream "$up_URL" --record rec.jsonl
    curl -sS -N --max-time 20 --data-binary "$BODY" "$px_URL/chat/completions" > p0 2>/dev/null &
    local client=$!
    sleep 2.5
    kill -0 "$client"          # still streaming
    stop px
    assert_equal "$STATUS" 0
    wait "$client" || true
    run -0 jq -r .message rec.jsonl
    assert_output 'the recording stopped before the end of the stream'
    stop up
}

@test "record: acp-drive --record with provider = replay-serve and ACPSNAP_UPSTREAM puts the recording proxy between the agent and the provider" {
    command -v acpsnap-agent >/dev/null || skip "the reference agent is not built"
    cp -r "$ROOT/scenarios" snap
    replay-derive snap/text-turn/session.jsonl > script.jsonl
    printf '%s\n' 'command = acpsnap-agent' 'provider = replay-serve' 'harvest = */session.jsonl */session.jsonl.zstd' \
        'record.env = ACPSNAP_PERSISTENCE=raw' 'record.env = DEEPSEEK_BASE_URL=${ACPSNAP_PROVIDER_URL}' \
        'record.env = DEEPSEEK_API_KEY=unused-by-the-proxy' > http.profile
    start up script.jsonl
    ACPSNAP_UPSTREAM=$up_URL ACPSNAP_UPSTREAM_KEY_ENV=RS_TEST_KEY run -0 acp-drive --record -p http.profile -o out snap/text-turn
    cmp script.jsonl out/provider.jsonl
    run -0 jq -c '[.request, .status, .outcome]' out/replay-serve.log
    assert_output '[0,200,"complete"]'
    stop up
    assert_equal "$STATUS" 0
    no_key
    # without ACPSNAP_UPSTREAM a recording starts no replay-serve: the agent
    # calls its provider itself (here the upstream, through the profile's fallback)
    start up script.jsonl
    sed -i 's|${ACPSNAP_PROVIDER_URL}|${ACPSNAP_PROVIDER_URL:-'"$up_URL"'}|' http.profile
    run -0 acp-drive --record -p http.profile -o out2 snap/text-turn
    [ ! -e out2/provider.jsonl ] && [ ! -e out2/replay-serve.log ]
    stop up
    assert_equal "$STATUS" 0
}

@test "record: an error event mid-stream and an Anthropic 529 are recorded as the wire says" {
    sse_http one < "$ROOT/test/data/wire-parse/chat-error-event.sse"
    body='{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    printf 'HTTP/1.1 529 Site Overloaded\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
        ${#body} "$body" > two.http
    raw_start one.http two.http
    start px --upstream "$RAW_URL" --record rec.jsonl
    [ "$(get "$px_URL" p1)" = 200 ]
    [ "$(get "$px_URL" p2 /v1/messages)" = 529 ]
    stop px
    assert_equal "$STATUS" 0
    cmp p1 "$ROOT/test/data/wire-parse/chat-error-event.sse"
    assert_equal "$(cat p2)" "$body"
    { cat "$ROOT/test/data/wire-parse/chat-error-event.json"
      echo '{"kind":"throw","chunks":[],"message":"Overloaded","code":"SERVER_OVERLOADED","status":529}'; } > want.jsonl
    cmp want.jsonl rec.jsonl
}

@test "record: acpsnap-record through the proxy writes the scenario's provider.jsonl beside its fixtures" {
    [ -x "$BIN/acpsnap-agent" ] || skip "the reference agent is not built"
    export TMPDIR=$BATS_TEST_TMPDIR/tmp
    mkdir -p "$TMPDIR" snap/text-turn
    printf '%s\n' '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}' > snap/scenarios.jsonl
    cp "$ROOT/scenarios/text-turn/input.json" snap/text-turn/
    replay-derive "$ROOT/scenarios/text-turn/session.jsonl" > script.jsonl
    printf '%s\n' "command = $BIN/acpsnap-agent" 'provider = replay-serve' 'harvest = */session.jsonl */session.jsonl.zstd' \
        'record.env = ACPSNAP_PERSISTENCE=raw' 'record.env = DEEPSEEK_BASE_URL=${ACPSNAP_PROVIDER_URL}' \
        'record.env = DEEPSEEK_API_KEY=unused-by-the-proxy' 'replay.env = ACPSNAP_SNAPSHOT=live' \
        'replay.env = DEEPSEEK_BASE_URL=${ACPSNAP_PROVIDER_URL}' 'replay.env = DEEPSEEK_API_KEY=unused' > http.profile
    start up script.jsonl
    CI= ACPSNAP_KEY_VAR=RS_TEST_KEY ACPSNAP_UPSTREAM=$up_URL ACPSNAP_UPSTREAM_KEY_ENV=RS_TEST_KEY \
        run -0 acpsnap-record -d snap -p http.profile text-turn
    assert_line --regexp '^recorded +text-turn .*\(wrote stdout.expected.jsonl session.jsonl provider.jsonl text-turn/system-prompt.expected.md text-turn/tool-schemas.expected.json\)$'
    stop up
    assert_equal "$STATUS" 0
    cmp script.jsonl snap/text-turn/provider.jsonl
    no_key
    # the provider script now records the scenario again without the upstream
    ACPSNAP_PROVIDER=replay-serve run -0 acpsnap-record -d snap -p http.profile text-turn
    assert_line --regexp '^ok +text-turn .*\(recorded; unchanged\)$'
}

@test "record: a FILE that cannot be written at the end is trouble, and nothing is left" {
    echo "$TEXT" > script.jsonl
    start up script.jsonl
    mkdir d
    start px --upstream "$up_URL" --record d/rec.jsonl
    [ "$(get "$px_URL" p0)" = 200 ]
    rm -r d
    stop px
    assert_equal "$STATUS" 2
    assert_equal "$(cat px.err)" 'replay-serve: unable to create a temporary file beside d/rec.jsonl: No such file or directory'
    [ ! -e d ]
    stop up
}

# The Responses and Messages wires, round trip: an upstream replay-serve
# serving an authored script on the endpoint, the proxy recording with curl as
# client, the recording served back on the same endpoint. With --created the
# streams are the same bytes on every run, so the recording served back gives
# exactly what the upstream gave directly. The recorded entries are the
# authored ones (written as these wires stream them: each block closed before
# the next opens), except where the wire cannot say what the script said: a
# stream that ends without its terminal event, or is cut, is recorded with
# the proxy's message (the authored one never reaches the wire); usage on
# Responses always carries reasoning_tokens (a usage without it is recorded
# with reasoningTokens 0), and Messages has none (reasoningTokens is not
# recorded); an HTTP error's code is the one its status maps to (503:
# SERVER_OVERLOADED), so a 503 whose Messages body said api_error is served
# back saying overloaded_error: the only bytes of the round trip that differ.
SEQ_TOOLS='{"kind":"chunks","chunks":[{"type":"block-start","index":0,"blockType":"reasoning"},{"type":"reasoning-delta","index":0,"text":"List it."},{"type":"block-end","index":0,"block":{"type":"reasoning","text":"List it."}},{"type":"block-start","index":1,"blockType":"tool-call"},{"type":"tool-call-delta","index":1,"id":"call_00_a","name":"bash","argumentsDelta":"{\"cmd\":"},{"type":"tool-call-delta","index":1,"id":"call_00_a","name":"bash","argumentsDelta":"\"ls\"}"},{"type":"block-end","index":1,"block":{"type":"tool-call","id":"call_00_a","name":"bash","arguments":"{\"cmd\":\"ls\"}"}},{"type":"usage","usage":{"inputTokens":100,"outputTokens":20,"cacheReadTokens":8,"reasoningTokens":5}},{"type":"finish","reason":{"kind":"tool-calls"}}]}'
wire_round_trip() { # ENDPOINT CLOSED_MESSAGE
    local ep=$1 i prefix='[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Part"}]'
    BODY='{"model":"m","stream":true,"max_tokens":99,"messages":[{"role":"user","content":"Hi"}]}'
    { printf '%s\n' "$TEXT" "$SEQ_TOOLS"
      printf '{"kind":"throw","chunks":%s,"message":"model exploded","code":"SERVER"}\n' "$prefix"
      printf '{"kind":"throw","chunks":%s,"message":"closed","code":"STREAM_CLOSED"}\n' "$prefix"
      printf '{"kind":"throw","chunks":%s,"message":"cut","code":"TRANSPORT"}\n' "$prefix"
      echo '{"kind":"throw","chunks":[],"message":"Rate Limit Reached","code":"RATE_LIMIT","status":429}'
      echo '{"kind":"throw","chunks":[],"message":"upstream broke","code":"SERVER","status":503}'; } > script.jsonl
    start direct --created 7 script.jsonl
    for i in 0 1 2 3 4 5 6; do echo "$(get "$direct_URL" d$i "$ep")" >> direct.status; done
    stop direct
    assert_equal "$(tr '\n' ' ' < direct.status)" '200 200 200 200 200 429 503 '
    start up --created 7 script.jsonl
    start px --upstream "$up_URL" --upstream-key-env RS_TEST_KEY --record rec.jsonl
    for i in 0 1 2 3 4 5 6; do echo "$(get "$px_URL" p$i "$ep")" >> px.status; done
    stop px
    assert_equal "$STATUS" 0
    assert_equal "$(cat px.err)" 'replay-serve: request 4: the upstream stream was cut: transfer closed with outstanding read data remaining'
    stop up
    assert_equal "$STATUS" 0
    cmp direct.status px.status
    for i in 0 1 2 3 4 5 6; do cmp d$i p$i; done
    # the recording: the authored entries but for the documented differences
    sed -e "s/\"message\":\"closed\"/\"message\":\"$2\"/" \
        -e 's/"message":"cut"/"message":"the upstream connection was cut mid-stream"/' \
        -e 's/"code":"SERVER","status":503/"code":"SERVER_OVERLOADED","status":503/' script.jsonl > want.jsonl
    if [ "$ep" = /v1/responses ]; then sed -i 's/"cacheReadTokens":64}/"cacheReadTokens":64,"reasoningTokens":0}/' want.jsonl
    else sed -i 's/"cacheReadTokens":8,"reasoningTokens":5}/"cacheReadTokens":8}/' want.jsonl; fi
    [ "$(wc -l < want.jsonl)" = 7 ] && ! cmp -s script.jsonl want.jsonl
    cmp want.jsonl rec.jsonl
    # served back on the same endpoint: the upstream's statuses and bytes
    start back --created 7 rec.jsonl
    for i in 0 1 2 3 4 5 6; do echo "$(get "$back_URL" b$i "$ep")" >> back.status; done
    stop back
    assert_equal "$STATUS" 0
    cmp direct.status back.status
    for i in 0 1 2 3 4 5; do cmp d$i b$i; done
    # (the 503's recorded code names its status, not the body's error type:
    # on Messages the upstream's api_error comes back as overloaded_error)
    if [ "$ep" = /v1/responses ]; then cmp d6 b6
    else sed 's/"type":"api_error"/"type":"overloaded_error"/' d6 | cmp - b6; ! cmp -s d6 b6; fi
    # the throws on the wire: in band mid-stream, no terminal event, a cut, HTTP errors
    grep -q '"model exploded"' b2
    run -0 grep -c '"Part"' b3 b4
    assert_output $'b3:1\nb4:1'
    grep -q 'Rate Limit Reached' b5
    grep -q 'upstream broke' b6
    no_key
}

@test "record: OpenAI Responses round trip: the recording served back on /v1/responses is the upstream's bytes, throws and 4xx/5xx included" {
    wire_round_trip /v1/responses 'the stream ended without a terminal response event'
}

@test "record: Anthropic Messages round trip: the recording served back on /v1/messages is the upstream's bytes, throws and 4xx/5xx included" {
    wire_round_trip /v1/messages 'the stream ended without message_stop'
}
