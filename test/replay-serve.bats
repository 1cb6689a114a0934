#!/usr/bin/env bats
# replay-serve: a replay script served as DeepSeek chat-completions SSE.
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/replay-serve

setup() { cd "$BATS_TEST_TMPDIR"; RS_PID=; }
teardown() { [ -z "$RS_PID" ] || kill -9 "$RS_PID" 2>/dev/null || true; }

text_entry() { # TEXT → a one-block text entry
    jq -cn --arg t "$1" '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},
      {type:"text-delta",index:0,text:$t},{type:"block-end",index:0,block:{type:"text",text:$t}},
      {type:"finish",reason:{kind:"stop"}}]}'
}

@test "replay-serve: --help and --version" {
    run -0 replay-serve --help
    assert_output --partial 'replay-serve [--port N]'
    run -0 replay-serve --version
    assert_output --regexp '^replay-serve .*[0-9]+\.[0-9]+'
}

@test "replay-serve: usage errors exit 2" {
    run -2 --separate-stderr replay-serve
    assert_equal "${stderr%%$'\n'*}" 'usage: replay-serve [--port N] [--port-file FILE] [--log FILE] [--keep-alive MS]'
    text_entry hi > s.jsonl
    run -2 --separate-stderr replay-serve --port 70000 s.jsonl
    assert_equal "$stderr" 'replay-serve: invalid --port: 70000'
    run -2 --separate-stderr replay-serve --keep-alive x s.jsonl
    assert_equal "$stderr" 'replay-serve: invalid --keep-alive: x'
    run -2 --separate-stderr replay-serve --max-connections 0 s.jsonl
    assert_equal "$stderr" 'replay-serve: invalid --max-connections: 0'
    run -2 --separate-stderr replay-serve --max-request-bytes 1k s.jsonl
    assert_equal "$stderr" 'replay-serve: invalid --max-request-bytes: 1k'
    run -2 --separate-stderr replay-serve --idle-timeout 0 s.jsonl
    assert_equal "$stderr" 'replay-serve: invalid --idle-timeout: 0'
}

@test "replay-serve: a malformed script is refused before listening" {
    printf '{"kind":"bogus"}\n' > s.jsonl
    run -2 --separate-stderr replay-serve --port-file p s.jsonl
    assert_equal "$stderr" "replay-serve: s.jsonl:1:9: entry 0 has unknown kind \"bogus\""
    [ ! -e p ]
    printf '%s\n' "$(text_entry a)" 'not json' > s.jsonl
    run -2 --separate-stderr replay-serve s.jsonl
    assert_regex "$stderr" '^replay-serve: s\.jsonl:2:1: '
    run -2 --separate-stderr replay-serve missing.jsonl
    assert_regex "$stderr" '^replay-serve: .*missing\.jsonl.*No such file or directory'
}

@test "replay-serve: what the wire needs from each chunk is checked at load, naming file:line, entry and chunk" {
    printf '%s\n' "$(text_entry a)" '{"kind":"chunks","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0}]}' > s.jsonl
    run -2 --separate-stderr replay-serve --port-file p s.jsonl
    assert_equal "$stderr" 'replay-serve: s.jsonl:2: entry 1 chunk 1 (text-delta): "text" must be a string (it is missing)'
    [ ! -e p ]
    printf '%s\n' '{"kind":"throw","chunks":[{"type":"tool-call-delta","index":-1,"id":"c","argumentsDelta":""}],"message":"m","code":"PROVIDER"}' > s.jsonl
    run -2 --separate-stderr replay-serve s.jsonl
    assert_equal "$stderr" 'replay-serve: s.jsonl:1: entry 0 chunk 0 (tool-call-delta): "index" must be a non-negative integer, not -1'
    text_entry '{{fromRequest:a{1,2}\1}}' > s.jsonl
    run -2 --separate-stderr replay-serve s.jsonl
    assert_equal "$stderr" 'replay-serve: s.jsonl:1: entry 0 chunk 1 (text-delta): {{fromRequest:a{1,2}\1}}: invalid pattern: back-references (\1) are not supported'
}

@test "replay-serve: a body over --max-request-bytes gets 413 and is a failure; the entry stays for the next request" {
    text_entry a > s.jsonl
    serve_start s.jsonl --max-request-bytes 64 --log log.jsonl
    local big
    big=$(jq -cn '{stream:true,messages:[{role:"user",content:("x" * 100)}]}')
    run -0 curl -sS -w ' %{http_code}' --data-binary "$big" "$RS_URL/chat/completions"
    assert_output '{"error":{"message":"replay-serve: request 0: the request body is over 64 bytes (--max-request-bytes)","type":"invalid_request_error","param":null,"code":"invalid_request_error"}} 413'
    run -0 bash -c "printf '%s' '$big' | curl -sS -o /dev/null -w '%{http_code}' -T - -X POST '$RS_URL/chat/completions'"
    assert_output 413
    run -0 post '{"stream":true}'
    assert_output --partial '"content":"a"'
    serve_stop
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: request 0: the request body is over 64 bytes (--max-request-bytes)
replay-serve: request 1: the request body is over 64 bytes (--max-request-bytes)'
    run -0 jq -c '[.request,.entry,.status,.outcome]' log.jsonl
    assert_output '[0,null,413,"error"]
[1,null,413,"error"]
[2,0,200,"complete"]'
}

@test "replay-serve: serves a text turn in DeepSeek's chunk shape and exits 0 when all is consumed" {
    text_entry PONG > s.jsonl
    serve_start s.jsonl --created 1700000000 --log log.jsonl
    assert_equal "$(cat rs.out)" "$RS_URL"
    assert_equal "$RS_URL" "http://127.0.0.1:$RS_PORT"
    run -0 post '{"model":"deepseek-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}'
    assert_equal "$output" 'data: {"id":"00000000-0000-4000-8000-000000000001","object":"chat.completion.chunk","created":1700000000,"model":"deepseek-chat","system_fingerprint":"fp_replay_serve","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"00000000-0000-4000-8000-000000000001","object":"chat.completion.chunk","created":1700000000,"model":"deepseek-chat","system_fingerprint":"fp_replay_serve","choices":[{"index":0,"delta":{"content":"PONG"},"logprobs":null,"finish_reason":null}]}

data: {"id":"00000000-0000-4000-8000-000000000001","object":"chat.completion.chunk","created":1700000000,"model":"deepseek-chat","system_fingerprint":"fp_replay_serve","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}]}

data: [DONE]'
    serve_stop
    assert_equal "$RS_STATUS" 0
    assert_equal "$RS_STDERR" ''
    run -0 jq -c '[.request,.entry,.kind,.status,.outcome,.body.model]' log.jsonl
    assert_output '[0,0,"chunks",200,"complete","deepseek-chat"]'
}

@test "replay-serve: response headers are DeepSeek's" {
    text_entry x > s.jsonl
    serve_start s.jsonl
    run -0 curl -sS -D - -o /dev/null -X POST --data '{"stream":true}' "$RS_URL/v1/chat/completions"
    assert_output --partial $'Content-Type: text/event-stream; charset=utf-8\r'
    assert_output --partial $'x-ds-trace-id: 00000000000000000000000000000001\r'
    serve_stop
    assert_equal "$RS_STATUS" 0
}

@test "replay-serve: thinking mode, tool calls and usage on the final chunk" {
    jq -cn '{kind:"chunks",chunks:[
      {type:"block-start",index:0,blockType:"reasoning"},{type:"reasoning-delta",index:0,text:"hm"},
      {type:"block-start",index:1,blockType:"tool-call"},
      {type:"tool-call-delta",index:1,id:"call_1",name:"bash",argumentsDelta:""},
      {type:"tool-call-delta",index:1,id:"call_1",name:"bash",argumentsDelta:"{}"},
      {type:"block-end",index:0,block:{type:"reasoning",text:"hm"}},
      {type:"block-end",index:1,block:{type:"tool-call",id:"call_1",name:"bash",arguments:"{}"}},
      {type:"usage",usage:{inputTokens:90,outputTokens:28,cacheReadTokens:1280,reasoningTokens:25}},
      {type:"finish",reason:{kind:"tool-calls"}}]}' > s.jsonl
    serve_start s.jsonl
    run -0 post '{"model":"deepseek-reasoner","stream":true}'
    run -0 jq -R -c 'select(startswith("data: {"))|.[6:]|fromjson|[.choices[0].delta,.choices[0].finish_reason,.usage]' <<<"$output"
    assert_output '[{"role":"assistant","content":null,"reasoning_content":""},null,null]
[{"content":null,"reasoning_content":"hm"},null,null]
[{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]},null,null]
[{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},null,null]
[{"content":"","reasoning_content":null},"tool_calls",{"prompt_tokens":1370,"completion_tokens":28,"total_tokens":1398,"prompt_tokens_details":{"cached_tokens":1280},"completion_tokens_details":{"reasoning_tokens":25},"prompt_cache_hit_tokens":1280,"prompt_cache_miss_tokens":90}]'
    serve_stop
    assert_equal "$RS_STATUS" 0
}

@test "replay-serve: stream_options.include_usage puts usage:null on the other chunks" {
    text_entry a > s.jsonl
    text_entry b >> s.jsonl
    serve_start s.jsonl
    run -0 post '{"stream":true,"stream_options":{"include_usage":true}}'
    run -0 jq -R -c 'select(startswith("data: {"))|.[6:]|fromjson|has("usage")' <<<"$output"
    assert_output $'true\ntrue\ntrue'
    run -0 post '{"stream":true}'
    run -0 jq -R -c 'select(startswith("data: {"))|.[6:]|fromjson|has("usage")' <<<"$output"
    assert_output $'false\nfalse\nfalse'
    serve_stop
}

@test "replay-serve: every corpus replay entry decodes back to its chunks" {
    local s n=0
    # Blocks that streamed deltas: the streamed chunks, usage and finish must
    # come back exactly. Blocks rebuilt whole (no deltas): the blocks must.
    local cmp='def rebuilt: [.chunks[]|select(.type=="block-start")|.index] - [.chunks[]|select(.type|endswith("-delta"))|.index] != [];
      def view($w): if $w|rebuilt then [.chunks[]|select(.type|test("^block-end$|^usage$|^finish$"))]
                    else [.chunks[]|select(.type|test("delta$|^usage$|^finish$"))] end;
      [$want, $got] | transpose | map(select(.[0].kind == "chunks") | .[0] as $e | ($e | view($e)) as $w | (.[1] | view($e)) as $g
        | if $w == $g then 1 else error("entry differs: \($w|tojson|.[0:300]) vs \($g|tojson|.[0:300])") end) | length'
    while read -r s; do
        grep -q '"kind":"chunks"' "$s" || continue
        serve_start "$s"
        : > bodies
        while read -r line; do
            post '{"stream":true}' >> bodies || true
            printf '\n--entry--\n' >> bodies
        done < "$s"
        serve_stop
        [ "$RS_STATUS" = 0 ] || { echo "$s: $RS_STDERR"; return 1; }
        head -c -11 bodies | sse_decode > got.jsonl
        run jq -n --slurpfile want "$s" --slurpfile got got.jsonl "$cmp"
        [ "$status" = 0 ] || { echo "$s: $output"; return 1; }
        n=$((n + output))
    done < <(find "$CORPUS" -name '*.replay.jsonl' | LC_ALL=C sort)
    [ "$n" -gt 100 ]
}

@test "replay-serve: a throw before any chunk is the provider's HTTP error" {
    printf '%s\n' '{"kind":"throw","chunks":[],"message":"Authentication Fails, Your api key: ****abcd is invalid","code":"AUTH"}' \
        '{"kind":"throw","chunks":[],"message":"context too long","code":"CONTEXT_WINDOW_EXCEEDED"}' \
        '{"kind":"throw","chunks":[],"message":"model exploded","code":"PROVIDER"}' > s.jsonl
    serve_start s.jsonl
    run -0 curl -sS -w '\n%{http_code} %{content_type}' -X POST --data '{"stream":true}' "$RS_URL/chat/completions"
    assert_output '{"error":{"message":"Authentication Fails, Your api key: ****abcd is invalid","type":"authentication_error","param":null,"code":"authentication_error"}}
401 application/json'
    run -0 curl -sS -o /dev/null -w '%{http_code}' -X POST --data '{"stream":true}' "$RS_URL/chat/completions"
    assert_output 400
    run -0 curl -sS -w ' %{http_code}' -X POST --data '{"stream":true}' "$RS_URL/chat/completions"
    assert_output '{"error":{"message":"model exploded","type":"server_error","param":null,"code":"server_error"}} 500'
    serve_stop
    assert_equal "$RS_STATUS" 0
}

@test "replay-serve: a throw after prefix chunks aborts the stream without [DONE]" {
    jq -cn '{kind:"throw",chunks:[{type:"block-start",index:0,blockType:"text"},{type:"text-delta",index:0,text:"par"}],message:"boom",code:"PROVIDER"}' > s.jsonl
    serve_start s.jsonl --log log.jsonl
    run -18 curl -sS -X POST --data '{"stream":true}' "$RS_URL/chat/completions"
    assert_output --partial '"delta":{"content":"par"}'
    refute_output --partial '[DONE]'
    serve_stop
    assert_equal "$RS_STATUS" 0
    run -0 jq -r .outcome log.jsonl
    assert_output aborted
}

@test "replay-serve: a hang streams the prefix, writes readyFile, holds until the client goes" {
    printf '%s\n' '{"kind":"hang","readyFile":"ready"}' "$(text_entry after)" > s.jsonl
    serve_start s.jsonl --ready-dir "$BATS_TEST_TMPDIR" --keep-alive 50 --log log.jsonl
    curl -sS -N --max-time 1 -X POST --data '{"stream":true}' "$RS_URL/chat/completions" > hang.out 2>/dev/null &
    local c=$!
    for i in $(seq 100); do [ -e ready ] && break; sleep 0.01; done
    [ -e ready ]
    [ ! -s ready ]
    # one stream at a time: a second request during the hang is refused
    run -0 curl -sS -w ' %{http_code}' -X POST --data '{"stream":true}' "$RS_URL/chat/completions"
    assert_output '{"error":{"message":"replay-serve: model request 1 arrived while request 0 is still streaming (replay serves one stream at a time)","type":"server_error","param":null,"code":"server_error"}} 500'
    wait "$c" || true
    grep -q '"delta":{"content":"partial"}' hang.out
    grep -q '^: keep-alive$' hang.out
    run -1 grep -q 'DONE' hang.out
    # the client went away: the stream is released and the next entry serves
    sleep 0.1
    run -0 post '{"stream":true}'
    assert_output --partial '"content":"after"'
    serve_stop
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: model request 1 arrived while request 0 is still streaming (replay serves one stream at a time)'
    run -0 jq -c '[.request,.kind,.outcome]' log.jsonl
    assert_line '[0,"hang","client-closed"]'
    assert_line '[1,null,"error"]'
}

@test "replay-serve: past the end of the script is an HTTP error and exit 1" {
    text_entry a > s.jsonl
    serve_start s.jsonl
    post '{"stream":true}' >/dev/null
    run -0 curl -sS -w ' %{http_code}' -X POST --data '{"stream":true}' "$RS_URL/chat/completions"
    assert_output '{"error":{"message":"replay-serve: model request 1 is past the end of the script (1 entries)","type":"server_error","param":null,"code":"server_error"}} 500'
    serve_stop
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: model request 1 is past the end of the script (1 entries)'
}

@test "replay-serve: entries left unconsumed at shutdown are a failure" {
    printf '%s\n' "$(text_entry a)" "$(text_entry b)" "$(text_entry c)" > s.jsonl
    serve_start s.jsonl
    post '{"stream":true}' >/dev/null
    serve_stop
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: s.jsonl: 2 of 3 entries not consumed'
}

@test "replay-serve: an empty script serves nothing and exits 0" {
    : > s.jsonl
    serve_start s.jsonl
    serve_stop
    assert_equal "$RS_STATUS" 0
}

@test "replay-serve: bad requests are refused and recorded" {
    text_entry a > s.jsonl
    serve_start s.jsonl
    run -0 curl -sS -w ' %{http_code}' -X POST --data 'nope' "$RS_URL/chat/completions"
    assert_output '{"error":{"message":"replay-serve: the request body is not a JSON object","type":"invalid_request_error","param":null,"code":"invalid_request_error"}} 400'
    run -0 curl -sS -w ' %{http_code}' -X POST --data '{"stream":false}' "$RS_URL/chat/completions"
    assert_output --partial ' 400'
    run -0 curl -sS -o /dev/null -w '%{http_code}' "$RS_URL/models"
    assert_output 404
    post '{"stream":true}' >/dev/null
    serve_stop
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: request 0: the request body is not a JSON object
replay-serve: request 1: not a streaming request ("stream": true is required)
replay-serve: request 2: no such endpoint: GET /models'
}

@test "replay-serve: {{fromRequest:…}} resolves against the request messages" {
    jq -cn '{kind:"chunks",chunks:[{type:"text-delta",index:0,text:"goal {{fromRequest:id=(\\d+)}}!"},{type:"finish",reason:{kind:"stop"}}]}' > s.jsonl
    jq -cn '{kind:"chunks",chunks:[{type:"text-delta",index:0,text:"{{fromRequest:zzz}}"},{type:"finish",reason:{kind:"stop"}}]}' >> s.jsonl
    serve_start s.jsonl
    run -0 post '{"stream":true,"messages":[{"role":"user","content":"id=12"},{"role":"tool","content":"id=345"}]}'
    assert_output --partial '"delta":{"content":"goal 345!"}'
    run -0 post '{"stream":true,"messages":[{"role":"user","content":"x"}]}'
    assert_output --partial '"message":"replay-serve: s.jsonl:2: call 2: {{fromRequest:zzz}} matched nothing in the request"'
    serve_stop
    assert_equal "$RS_STATUS" 1
    assert_equal "$RS_STDERR" 'replay-serve: s.jsonl:2: call 2: {{fromRequest:zzz}} matched nothing in the request'
}

@test "replay-serve: listens on the loopback interface only" {
    text_entry a > s.jsonl
    serve_start s.jsonl
    run -0 ss -Hltn "sport = :$RS_PORT"
    assert_output --partial "127.0.0.1:$RS_PORT"
    refute_output --partial "0.0.0.0:$RS_PORT"
    post '{"stream":true}' >/dev/null
    serve_stop
}

@test "replay-serve: --pace spaces the events" {
    text_entry a > s.jsonl
    serve_start s.jsonl --pace 100
    local t0 t1
    t0=$(date +%s%N); post '{"stream":true}' >/dev/null; t1=$(date +%s%N)
    [ $(( (t1 - t0) / 1000000 )) -ge 300 ]
    serve_stop
    assert_equal "$RS_STATUS" 0
}
