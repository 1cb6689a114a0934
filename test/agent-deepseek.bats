#!/usr/bin/env bats
# The agent's DeepSeek adapter against a local scripted SSE server
# (test/helpers/sse-server.c) sending DeepSeek-shaped chunks; the translation
# into stream chunks is asserted exactly from the persisted log. Also: replay
# mode is hermetic (no connection even with a key and a listening server).
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/agent

setup_file() {
    cc -O1 -o "$BATS_FILE_TMPDIR/sse-server" "$BATS_TEST_DIRNAME/helpers/sse-server.c"
}

teardown() {
    [ -z "${SRV_PID:-}" ] || { kill "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null || true; }
}

# server_start RESPONSE-NAME... (files $BATS_TEST_TMPDIR/<name>.http)
server_start() {
    local files=() f i
    for f; do files+=("$BATS_TEST_TMPDIR/$f.http"); done
    "$BATS_FILE_TMPDIR/sse-server" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/requests.log" "${files[@]}" &
    SRV_PID=$!
    for ((i = 0; i < 500; i++)); do [ -s "$BATS_TEST_TMPDIR/port" ] && break; sleep 0.01; done
    URL="http://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/port")"
}
# sse NAME: an HTTP 200 event-stream response whose body is stdin.
sse() {
    { printf 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nConnection: close\r\n\r\n'; cat; } \
        > "$BATS_TEST_TMPDIR/$1.http"
}
# http NAME STATUS CONTENT-TYPE: a complete non-streaming response, body on stdin.
http() {
    local body; body=$(cat)
    printf 'HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
        "$2" "$3" "${#body}" "$body" > "$BATS_TEST_TMPDIR/$1.http"
}
# ch DELTA [FINISH] [USAGE]: one DeepSeek chat.completion.chunk event, real field order.
ch() {
    printf 'data: {"id":"23d01db0-5c1f-4c47-9d21-3b2d4f1e7a11","object":"chat.completion.chunk","created":1781233924,"model":"deepseek-v4-flash","system_fingerprint":"fp_8b330d02d0_prod0820_fp8_kvcache_20260402","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":%s}\n\n' \
        "$1" "${2:-null}" "${3:-null}"
}
live_agent() {
    agent_start ACPSNAP_SNAPSHOT=live DEEPSEEK_BASE_URL="$URL" DEEPSEEK_API_KEY=sk-test "$@"
}
# request N: the JSON body of request N from the server log.
request() {
    awk -v n="== connection $1" '$0 == n {f = 1; next} f && /^\r$/ {getline; print; exit}' "$BATS_TEST_TMPDIR/requests.log"
}

USAGE1='{"prompt_tokens":306,"completion_tokens":85,"total_tokens":391,"prompt_tokens_details":{"cached_tokens":256},"completion_tokens_details":{"reasoning_tokens":31},"prompt_cache_hit_tokens":256,"prompt_cache_miss_tokens":50}'

@test "deepseek: reasoning, content, split parallel tool-call deltas, keep-alives, usage" {
    {
        ch '{"role":"assistant","content":null,"reasoning_content":""}'
        ch '{"content":null,"reasoning_content":"Let me"}'
        printf ': keep-alive\n\n'
        ch '{"content":null,"reasoning_content":" look."}'
        ch '{"content":"Reading","reasoning_content":null}'
        ch '{"content":" both.","reasoning_content":null}'
        ch '{"tool_calls":[{"index":0,"id":"call_00_aaaa","type":"function","function":{"name":"read_file","arguments":""}}]}'
        ch '{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}'
        printf ': keep-alive\n\n'
        ch '{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a.txt\"}"}}]}'
        ch '{"tool_calls":[{"index":1,"id":"call_01_bbbb","type":"function","function":{"name":"read_file","arguments":""}}]}'
        ch '{"tool_calls":[{"index":1,"function":{"arguments":"{\"path\":\"b."}}]}'
        ch '{"tool_calls":[{"index":1,"function":{"arguments":"txt\"}"}}]}'
        ch '{"content":"","reasoning_content":null}' '"tool_calls"' "$USAGE1"
        printf 'data: [DONE]\n\n'
    } | sse one
    {
        ch '{"role":"assistant","content":""}'
        ch '{"content":"A"}'
        ch '{"content":" and B"}'
        ch '{"content":""}' '"stop"' '{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23,"prompt_tokens_details":{"cached_tokens":0},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":20}'
        printf 'data: [DONE]\n\n'
    } | sse two
    server_start one two
    live_agent
    printf 'A\n' > "$W/a.txt"; printf 'B\n' > "$W/b.txt"
    new_session
    prompt 2 "Read a.txt and b.txt."
    wait_lines 8
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(tail -2 "$AG_DIR/out.jsonl" | sed "s/$SID/S/")" '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"A and B"}}}}
{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
    run -0 log_chunks
    assert_equal "$output" '{"type":"block-start","index":0,"blockType":"reasoning"}
{"type":"reasoning-delta","index":0,"text":"Let me"}
{"type":"reasoning-delta","index":0,"text":" look."}
{"type":"block-start","index":1,"blockType":"text"}
{"type":"text-delta","index":1,"text":"Reading"}
{"type":"text-delta","index":1,"text":" both."}
{"type":"block-start","index":2,"blockType":"tool-call"}
{"type":"tool-call-delta","index":2,"id":"call_00_aaaa","name":"read_file","argumentsDelta":""}
{"type":"tool-call-delta","index":2,"id":"call_00_aaaa","name":"read_file","argumentsDelta":"{\"pa"}
{"type":"tool-call-delta","index":2,"id":"call_00_aaaa","name":"read_file","argumentsDelta":"th\":\"a.txt\"}"}
{"type":"block-start","index":3,"blockType":"tool-call"}
{"type":"tool-call-delta","index":3,"id":"call_01_bbbb","name":"read_file","argumentsDelta":""}
{"type":"tool-call-delta","index":3,"id":"call_01_bbbb","name":"read_file","argumentsDelta":"{\"path\":\"b."}
{"type":"tool-call-delta","index":3,"id":"call_01_bbbb","name":"read_file","argumentsDelta":"txt\"}"}
{"type":"block-end","index":0,"block":{"type":"reasoning","text":"Let me look."}}
{"type":"block-end","index":1,"block":{"type":"text","text":"Reading both."}}
{"type":"block-end","index":2,"block":{"type":"tool-call","id":"call_00_aaaa","name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}
{"type":"block-end","index":3,"block":{"type":"tool-call","id":"call_01_bbbb","name":"read_file","arguments":"{\"path\":\"b.txt\"}"}}
{"type":"usage","usage":{"inputTokens":50,"outputTokens":85,"cacheReadTokens":256,"reasoningTokens":31}}
{"type":"finish","reason":{"kind":"tool-calls"}}
{"type":"block-start","index":0,"blockType":"text"}
{"type":"text-delta","index":0,"text":"A"}
{"type":"text-delta","index":0,"text":" and B"}
{"type":"block-end","index":0,"block":{"type":"text","text":"A and B"}}
{"type":"usage","usage":{"inputTokens":20,"outputTokens":3,"cacheReadTokens":0}}
{"type":"finish","reason":{"kind":"stop"}}'
    # the requests: streaming with usage, tools, thinking, and the history passed back
    grep -q $'^Authorization: Bearer sk-test\r$' "$BATS_TEST_TMPDIR/requests.log"
    grep -q $'^POST /chat/completions HTTP/1.1\r$' "$BATS_TEST_TMPDIR/requests.log"
    run -0 jq -c '[.model, .stream, .stream_options, .thinking, [.tools[].function.name], [.messages[].role], .messages[1].content]' <<< "$(request 1)"
    assert_output '["deepseek-v4-flash",true,{"include_usage":true},{"type":"enabled"},["bash","read_file","write_file"],["system","user"],"Read a.txt and b.txt."]'
    run -0 jq -c '.messages[2:]' <<< "$(request 2)"
    assert_output '[{"role":"assistant","content":"Reading both.","reasoning_content":"Let me look.","tool_calls":[{"id":"call_00_aaaa","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}},{"id":"call_01_bbbb","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"b.txt\"}"}}]},{"role":"tool","tool_call_id":"call_00_aaaa","content":"A\n"},{"role":"tool","tool_call_id":"call_01_bbbb","content":"B\n"}]'
}

# error_turn: one prompt against the served responses; sets ERR (the prompt's error message).
error_turn() {
    live_agent "$@"
    new_session
    prompt 2 "Hi."
    wait_lines 3
    agent_stop
    ERR=$(tail -1 "$AG_DIR/out.jsonl" | jq -r .error.message)
}

@test "deepseek: an HTTP error body becomes the failure message and code" {
    http auth '401 Unauthorized' application/json <<< '{"error":{"message":"Authentication Fails, Your api key: ****test is invalid","type":"authentication_error","param":null,"code":"invalid_request_error"}}'
    server_start auth
    error_turn
    assert_equal "$ERR" "HTTP 401: Authentication Fails, Your api key: ****test is invalid"
    assert_equal "$(log_norm | tail -1)" '{"type":"turn/end","data":{"turn":1,"reason":{"kind":"error","error":{"message":"HTTP 401: Authentication Fails, Your api key: ****test is invalid","code":"AUTH"}}}}'
}

@test "deepseek: status classes map to failure codes (402, 429, 5xx, legacy 422 text)" {
    http quota '402 Payment Required' application/json <<< '{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}'
    http rate '429 Too Many Requests' application/json <<< '{"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":"rate_limit"}}'
    http busy '503 Service Unavailable' text/plain <<< 'The server is busy. Please try again later.'
    http legacy '422 Unprocessable Entity' text/plain <<< 'Failed to deserialize the JSON body into the target type: messages[1]: invalid type: sequence, expected a string at line 17 column 3'
    server_start quota rate busy legacy
    for want in 'QUOTA|HTTP 402: Insufficient Balance' 'RATE_LIMIT|HTTP 429: Rate limit reached' \
                'SERVER|HTTP 503: The server is busy. Please try again later.' \
                'INVALID_REQUEST|HTTP 422: Failed to deserialize the JSON body into the target type: messages[1]: invalid type: sequence, expected a string at line 17 column 3'; do
        error_turn
        assert_equal "$ERR" "${want#*|}"
        assert_equal "$(log_norm | tail -1 | jq -r .data.reason.error.code)" "${want%%|*}"
        rm -rf "$AG_DIR/sessions"
    done
}

@test "deepseek: a stream cut before [DONE] is an error, the prefix is kept" {
    {
        ch '{"role":"assistant","content":""}'
        ch '{"content":"Hel"}'
        ch '{"content":"lo"}' '"stop"' "$USAGE1"
    } | sse cut
    server_start cut
    error_turn
    assert_equal "$ERR" "the model stream ended without [DONE]"
    assert_equal "$(cat "$AG_DIR/err.txt")" "acpsnap-agent: model call 1/1 failed: the model stream ended without [DONE] (STREAM_CLOSED)"
    run -0 log_chunks
    assert_equal "$output" '{"type":"block-start","index":0,"blockType":"text"}
{"type":"text-delta","index":0,"text":"Hel"}
{"type":"text-delta","index":0,"text":"lo"}'
    assert_equal "$(sed -n 3p "$AG_DIR/out.jsonl" | jq -c .params.update.content)" '{"type":"text","text":"Hello"}'
}

@test "deepseek: [DONE] without its blank-line terminator is a cut stream" {
    { ch '{"content":"Hi"}' '"stop"'; printf 'data: [DONE]\n'; } | sse nodone
    server_start nodone
    error_turn
    assert_equal "$ERR" "the model stream ended without [DONE]"
}

@test "deepseek: keep-alives forever without [DONE] hit the total timeout" {
    { ch '{"content":"Hi"}' '"stop"'; printf '@@keepalive 100 100\n'; } | sse forever
    printf 'request_timeout_ms = 1500\nidle_timeout_ms = 1000\n' > "$BATS_TEST_TMPDIR/t.conf"
    server_start forever
    error_turn ACPSNAP_AGENT_CONFIG="$BATS_TEST_TMPDIR/t.conf"
    assert_equal "$ERR" "the model request took more than 1500 ms"
    assert_equal "$(log_norm | tail -1 | jq -r .data.reason.error.code)" TIMEOUT
}

@test "deepseek: an idle stream hits the idle timeout" {
    { ch '{"content":"Hi"}'; printf '@@sleep 5000\n'; } | sse idle
    printf 'idle_timeout_ms = 1000\n' > "$BATS_TEST_TMPDIR/t.conf"
    server_start idle
    error_turn ACPSNAP_AGENT_CONFIG="$BATS_TEST_TMPDIR/t.conf"
    assert_equal "$ERR" "the model stream was idle for more than 1000 ms"
    assert_equal "$(log_norm | tail -1 | jq -r .data.reason.error.code)" TIMEOUT
}

@test "deepseek: a 400 context-length rejection compacts and retries" {
    http long '400 Bad Request' application/json <<< '{"error":{"message":"This model'"'"'s maximum context length is 131072 tokens. However, you requested 140000 tokens.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}'
    { ch '{"content":"Summary."}' '"stop"'; printf 'data: [DONE]\n\n'; } | sse summary
    { ch '{"content":"Hi again."}' '"stop"'; printf 'data: [DONE]\n\n'; } | sse answer
    server_start long summary answer
    live_agent
    new_session
    prompt 2 "Hi."
    wait_lines 4
    agent_stop
    assert_equal "$(tail -1 "$AG_DIR/out.jsonl")" '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
    assert_equal "$(log_norm | jq -c 'select(.type == "compaction/summary") | .data')" '{"turn":1,"step":1,"summary":"Summary.","rawOutput":[{"type":"text","text":"Summary."}],"llmStreamCall":true}'
    # the summarizer call has no tools; the retry carries the summary
    assert_equal "$(request 2 | jq -c 'has("tools")')" false
    assert_equal "$(request 3 | jq -c '[.messages[1:][] | .content]')" '["Summary of the conversation so far:\nSummary.","Hi."]'
}

@test "deepseek: the API key comes from .env in live mode" {
    { ch '{"content":"Hi"}' '"stop"'; printf 'data: [DONE]\n\n'; } | sse ok
    server_start ok
    mkdir -p "$BATS_TEST_TMPDIR/work"
    printf '# key\nDEEPSEEK_API_KEY="sk-from-dotenv"\n' > "$BATS_TEST_TMPDIR/work/.env"
    agent_start ACPSNAP_SNAPSHOT=live DEEPSEEK_BASE_URL="$URL"
    new_session
    prompt 2 "Hi."
    wait_lines 4
    agent_stop
    grep -q $'^Authorization: Bearer sk-from-dotenv\r$' "$BATS_TEST_TMPDIR/requests.log"
}

@test "deepseek: replay is hermetic: a key in env and .env, a listening base URL, no connection" {
    server_start
    mkdir -p "$BATS_TEST_TMPDIR/work"
    printf 'DEEPSEEK_API_KEY=sk-from-dotenv\n' > "$BATS_TEST_TMPDIR/work/.env"
    agent_start ACPSNAP_SNAPSHOT=replay ACPSNAP_REPLAY_SCRIPT="$BATS_TEST_DIRNAME/agent-data/tool-turn.jsonl" \
        DEEPSEEK_BASE_URL="$URL" DEEPSEEK_API_KEY=sk-in-env
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    wait_lines 6
    # libcurl is not even mapped in replay mode
    run -1 grep -c libcurl "/proc/$AGENT_PID/maps"
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(tail -1 "$AG_DIR/out.jsonl")" '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
    [ ! -e "$BATS_TEST_TMPDIR/requests.log" ]
    # control: the same set-up in live mode does connect
    agent_start ACPSNAP_SNAPSHOT=live DEEPSEEK_BASE_URL="$URL" DEEPSEEK_API_KEY=sk-in-env
    new_session
    prompt 2 "Hi."
    wait_lines 3
    run -0 grep -c libcurl "/proc/$AGENT_PID/maps"
    agent_stop
    assert_equal "$(grep -c '^== connection' "$BATS_TEST_TMPDIR/requests.log")" 1
}
