#!/usr/bin/env bats
# replay-serve: one replay script served on the three wires (chat
# completions, OpenAI Responses, Anthropic Messages), byte for byte against
# the committed streams in test/data/wires, and the event order each wire's
# clients rely on.
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/replay-serve

setup() { cd "$BATS_TEST_TMPDIR"; RS_PID=; }
teardown() { [ -z "$RS_PID" ] || kill -9 "$RS_PID" 2>/dev/null || true; }

WIRES="$ROOT/test/data/wires"
# the entries of script.jsonl, in order
CASES=(text reasoning tool two-tools whole-block throw)

# wire_body WIRE → a streaming request body of that wire
wire_body() {
    case $1 in
    chat) echo '{"model":"deepseek-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}' ;;
    responses) echo '{"model":"gpt-5","stream":true,"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}' ;;
    messages) echo '{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}]}' ;;
    esac
}
# wire_path WIRE → its endpoint
wire_path() {
    case $1 in chat) echo /v1/chat/completions ;; responses) echo /v1/responses ;; messages) echo /v1/messages ;; esac
}

# serve_wire WIRE: serves script.jsonl and saves each case's stream as
# CASE.WIRE.sse in the current directory (a cut stream: what arrived).
serve_wire() {
    serve_start "$WIRES/script.jsonl" --created 1767225600
    local c body path
    body=$(wire_body "$1"); path=$(wire_path "$1")
    for c in "${CASES[@]}"; do
        curl -sS --max-time 30 -H 'Content-Type: application/json' --data-binary "$body" "$RS_URL$path" \
            > "$c.$1.sse" 2>/dev/null || true
    done
    serve_stop
}

# sse_events FILE → one JSON line per event: {event, data} (event null when
# the event has no event: line; data the parsed data: line, or its text)
sse_events() {
    jq -R -s -c 'split("\n\n")[] | select(length > 0) | split("\n")
        | {event: (map(select(startswith("event: "))[7:]) | .[0]),
           data: (map(select(startswith("data: "))[6:]) | .[0] | (fromjson? // .))}' "$1"
}

check_wire() {
    serve_wire "$1"
    assert_equal "$RS_STATUS" 0
    assert_equal "$RS_STDERR" ''
    local c
    for c in "${CASES[@]}"; do
        cmp "$c.$1.sse" "$WIRES/$c.$1.sse" || { diff "$WIRES/$c.$1.sse" "$c.$1.sse" | head -20; return 1; }
    done
}

@test "replay-serve wires: chat completions, byte for byte" {
    check_wire chat
}

@test "replay-serve wires: OpenAI Responses, byte for byte" {
    check_wire responses
}

@test "replay-serve wires: Anthropic Messages, byte for byte" {
    check_wire messages
}

@test "replay-serve wires: Responses event order: numbered, items added before their deltas, done before the next, one terminal event" {
    serve_wire responses
    local c
    for c in "${CASES[@]}"; do
        sse_events "$c.responses.sse" > ev.jsonl
        run -0 jq -e -s '
          (map(.event == .data.type) | all)
          and ([.[].data.sequence_number] == [range(length)])
          and (.[0].event == "response.created") and (.[1].event == "response.in_progress")
          and ([.[].event | select(IN("response.completed","response.failed","response.incomplete"))] | length == 1)
          and (.[-1].event | IN("response.completed","response.failed","response.incomplete"))
          # items: output_index 0, 1, 2… in order; every delta inside its item
          and (reduce .[] as $e ({open: null, next: 0, ok: true};
                if $e.event == "response.output_item.added" then
                  .ok = (.ok and .open == null and $e.data.output_index == .next) | .open = $e.data.item.id | .next += 1
                elif $e.event == "response.output_item.done" then
                  .ok = (.ok and .open == $e.data.item.id and $e.data.item.status != "in_progress") | .open = null
                elif ($e.data.item_id? // null) != null then
                  .ok = (.ok and .open == $e.data.item_id)
                else . end) | .ok)
          # the terminal output holds every item done, as done
          and ((map(select(.event == "response.output_item.done") | .data.item)) as $done
               | map(select(.event | IN("response.completed","response.incomplete")) | .data.response.output)
               | all(. == $done))' ev.jsonl
    done
    # the text, arguments and usage as a client assembles them
    sse_events two-tools.responses.sse > ev.jsonl
    run -0 jq -c -s '.[-1].data.response | [.status, (.output | map(.type, .call_id?, .arguments?)), .usage.total_tokens]' ev.jsonl
    assert_output '["completed",["message",null,null,"function_call","call_b1","{\"cmd\":\"ls\"}","function_call","call_b2","{\"cmd\":\"pwd\"}"],71]'
    sse_events throw.responses.sse > ev.jsonl
    run -0 jq -c -s '.[-2:] | map([.event, .data.code // .data.response.error.code, .data.message // .data.response.error.message])' ev.jsonl
    assert_output '[["error","provider","upstream \"reset\""],["response.failed","provider","upstream \"reset\""]]'
}

@test "replay-serve wires: Messages event order: message_start first, blocks indexed 0, 1, 2… each started, streamed, stopped, then message_delta and message_stop" {
    serve_wire messages
    local c
    for c in "${CASES[@]}"; do
        sse_events "$c.messages.sse" > ev.jsonl
        run -0 jq -e -s '
          (map(.event == .data.type) | all)
          and (.[0].event == "message_start") and ([.[] | select(.event == "message_start")] | length == 1)
          and (if .[-1].event == "error" then ([.[] | select(.event | IN("message_delta","message_stop"))] == [])
               else (.[-2].event == "message_delta") and (.[-1].event == "message_stop") end)
          and (reduce .[] as $e ({open: null, next: 0, ok: true};
                if $e.event == "content_block_start" then
                  .ok = (.ok and .open == null and $e.data.index == .next) | .open = $e.data.index | .next += 1
                elif $e.event == "content_block_stop" then
                  .ok = (.ok and .open == $e.data.index) | .open = null
                elif $e.event == "content_block_delta" then
                  .ok = (.ok and .open == $e.data.index)
                elif $e.event | IN("message_delta","message_stop") then
                  .ok = (.ok and .open == null)
                else . end) | .ok)' ev.jsonl
    done
    # the blocks and the stop reason as a client assembles them
    sse_events two-tools.messages.sse > ev.jsonl
    run -0 jq -c -s '[(map(select(.event == "content_block_start") | .data.content_block | .type, .id?)),
        ([.[] | select(.data.index == 2 and .event == "content_block_delta") | .data.delta.partial_json] | add | fromjson),
        (.[-2].data.delta.stop_reason), (.[-2].data.usage.output_tokens)]' ev.jsonl
    assert_output '[["text",null,"tool_use","call_b1","tool_use","call_b2"],{"cmd":"pwd"},"tool_use",21]'
    sse_events reasoning.messages.sse > ev.jsonl
    run -0 jq -c -s '[.[0].data.message.usage, (map(select(.event == "content_block_delta") | .data.delta | .type) | unique)]' ev.jsonl
    assert_output '[{"input_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":64,"output_tokens":0},["text_delta","thinking_delta"]]'
    sse_events throw.messages.sse > ev.jsonl
    run -0 jq -c -s '.[-1]' ev.jsonl
    assert_output '{"event":"error","data":{"type":"error","error":{"type":"api_error","message":"upstream \"reset\""}}}'
}

@test "replay-serve wires: an unknown endpoint is a 404 naming it, and serves no entry" {
    head -1 "$WIRES/script.jsonl" > s.jsonl
    serve_start s.jsonl
    run -0 curl -sS -w ' %{http_code}' --data-binary '{"stream":true}' "$RS_URL/v1/completions"
    assert_output '{"error":{"message":"replay-serve: no such endpoint: POST /v1/completions","type":"invalid_request_error","param":null,"code":"invalid_request_error"}} 404'
    # a Messages path answers in Anthropic's error shape
    run -0 curl -sS -w ' %{http_code}' "$RS_URL/v1/messages"
    assert_output '{"type":"error","error":{"type":"not_found_error","message":"replay-serve: no such endpoint: GET /v1/messages"}} 404'
    run -0 curl -sS -w ' %{http_code}' --data-binary '{"stream":true}' "$RS_URL/v1/messages/count_tokens"
    assert_output '{"error":{"message":"replay-serve: no such endpoint: POST /v1/messages/count_tokens","type":"invalid_request_error","param":null,"code":"invalid_request_error"}} 404'
    # the entry is still there, for the request that may have it
    run -0 post "$(wire_body messages)" '/v1/messages?beta=true'
    assert_output --partial '"text":"Hello"'
    serve_stop
    assert_equal "$RS_STATUS" 0
    assert_equal "$RS_STDERR" 'replay-serve: request 0: no such endpoint: POST /v1/completions
replay-serve: request 1: no such endpoint: GET /v1/messages
replay-serve: request 2: no such endpoint: POST /v1/messages/count_tokens'
}

@test "replay-serve wires: a request that is not streaming is a 400 in the wire's error shape" {
    head -1 "$WIRES/script.jsonl" > s.jsonl
    serve_start s.jsonl
    run -0 curl -sS -w ' %{http_code}' --data-binary '{"model":"gpt-5","input":"hi"}' "$RS_URL/v1/responses"
    assert_output '{"error":{"message":"replay-serve: only streaming requests are served (\"stream\": true)","type":"invalid_request_error","param":null,"code":"invalid_request_error"}} 400'
    run -0 curl -sS -w ' %{http_code}' --data-binary '{"model":"c","max_tokens":9,"stream":false,"messages":[]}' "$RS_URL/v1/messages"
    assert_output '{"type":"error","error":{"type":"invalid_request_error","message":"replay-serve: only streaming requests are served (\"stream\": true)"}} 400'
    run -0 curl -sS -w ' %{http_code}' --data-binary 'nope' "$RS_URL/v1/messages"
    assert_output '{"type":"error","error":{"type":"invalid_request_error","message":"replay-serve: the request body is not a JSON object"}} 400'
    serve_stop
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: request 0: not a streaming request ("stream": true is required)
replay-serve: request 1: not a streaming request ("stream": true is required)
replay-serve: request 2: the request body is not a JSON object
replay-serve: s.jsonl: 1 of 1 entries not consumed'
}

@test "replay-serve wires: a throw before any chunk is the wire's HTTP error; past the end too" {
    printf '%s\n' '{"kind":"throw","chunks":[],"message":"Overloaded","code":"SERVER_OVERLOADED"}' \
        '{"kind":"throw","chunks":[],"message":"slow down","code":"RATE_LIMIT"}' \
        '{"kind":"throw","chunks":[],"message":"too long","code":"CONTEXT_WINDOW_EXCEEDED"}' > s.jsonl
    serve_start s.jsonl
    run -0 curl -sS -w ' %{http_code}' --data-binary "$(wire_body messages)" "$RS_URL/v1/messages"
    assert_output '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}} 529'
    run -0 curl -sS -w ' %{http_code}' --data-binary "$(wire_body messages)" "$RS_URL/v1/messages"
    assert_output '{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}} 429'
    run -0 curl -sS -w ' %{http_code}' --data-binary "$(wire_body responses)" "$RS_URL/v1/responses"
    assert_output '{"error":{"message":"too long","type":"invalid_request_error","param":null,"code":"invalid_request_error"}} 400'
    run -0 curl -sS -w ' %{http_code}' --data-binary "$(wire_body messages)" "$RS_URL/v1/messages"
    assert_output '{"type":"error","error":{"type":"api_error","message":"replay-serve: model request 3 is past the end of the script (3 entries)"}} 500'
    serve_stop
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: model request 3 is past the end of the script (3 entries)'
}

@test "replay-serve wires: a throw mid-stream with STREAM_CLOSED ends the body without a terminal event; TRANSPORT cuts it" {
    local prefix='[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"Pa"}]'
    printf '{"kind":"throw","chunks":%s,"message":"m","code":"%s"}\n' "$prefix" STREAM_CLOSED "$prefix" TRANSPORT \
        "$prefix" STREAM_CLOSED "$prefix" TRANSPORT > s.jsonl
    serve_start s.jsonl --log log.jsonl
    run -0 post "$(wire_body responses)" /v1/responses
    assert_equal "$(grep '^event: ' <<<"$output" | tail -1)" 'event: response.output_text.delta'
    run -18 post "$(wire_body responses)" /v1/responses
    assert_equal "$(grep '^event: ' <<<"$output" | tail -1)" 'event: response.output_text.delta'
    run -0 post "$(wire_body messages)" /v1/messages
    assert_equal "$(grep '^event: ' <<<"$output" | tail -1)" 'event: content_block_delta'
    run -18 post "$(wire_body messages)" /v1/messages
    assert_equal "$(grep '^event: ' <<<"$output" | tail -1)" 'event: content_block_delta'
    serve_stop
    assert_equal "$RS_STATUS" 0
    run -0 jq -c '[.status,.outcome]' log.jsonl
    assert_output '[200,"complete"]
[200,"aborted"]
[200,"complete"]
[200,"aborted"]'
}

@test "replay-serve wires: a hang streams its prefix on each wire and holds" {
    printf '%s\n' '{"kind":"hang"}' '{"kind":"hang"}' > s.jsonl
    serve_start s.jsonl
    run -28 curl -sS --max-time 1 --data-binary "$(wire_body responses)" "$RS_URL/v1/responses"
    assert_equal "$(grep -c '^event: ' <<<"$output")" 5
    assert_output --partial '"delta":"partial"'
    run -28 curl -sS --max-time 1 --data-binary "$(wire_body messages)" "$RS_URL/v1/messages"
    assert_equal "$(grep '^event: ' <<<"$output" | tr '\n' ' ')" 'event: message_start event: content_block_start event: ping event: content_block_delta '
    serve_stop
    assert_equal "$RS_STATUS" 0
}

@test "replay-serve wires: {{fromRequest:…}} searches Responses instructions and input, Messages system and messages" {
    local e='{"kind":"chunks","chunks":[{"type":"text-delta","index":0,"text":"{{fromRequest:(tag-[a-z]+)}}"}]}'
    printf '%s\n' "$e" "$e" "$e" > s.jsonl
    serve_start s.jsonl
    run -0 post '{"stream":true,"instructions":"tag-inst","input":"no tag"}' /v1/responses
    assert_output --partial '"delta":"tag-inst","logprobs"'
    run -0 post '{"stream":true,"instructions":"tag-inst","input":[{"role":"user","content":[{"type":"input_text","text":"tag-input"}]}]}' /v1/responses
    assert_output --partial '"delta":"tag-input"'
    run -0 post '{"stream":true,"system":[{"type":"text","text":"tag-sys"}],"messages":[{"role":"user","content":"x"}]}' /v1/messages
    assert_output --partial '"text_delta","text":"tag-sys"'
    serve_stop
    assert_equal "$RS_STATUS" 0
}

@test "replay-serve wires: a body over --max-request-bytes on /messages is Anthropic's 413" {
    head -1 "$WIRES/script.jsonl" > s.jsonl
    serve_start s.jsonl --max-request-bytes 16
    run -0 curl -sS -w ' %{http_code}' --data-binary "$(wire_body messages)" "$RS_URL/v1/messages"
    assert_output '{"type":"error","error":{"type":"request_too_large","message":"replay-serve: request 0: the request body is over 16 bytes (--max-request-bytes)"}} 413'
    serve_stop
}
