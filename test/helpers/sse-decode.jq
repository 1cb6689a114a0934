# sse-decode.jq - test helper: decodes a DeepSeek chat-completions SSE body
# back into provider-neutral stream chunks (acpsnap-replay(5)), the way an
# agent's DeepSeek adapter does: one block per reasoning / content / tool-call
# index, opened by its first non-empty delta, block-ends, usage and finish
# deferred to [DONE]. Input: the raw body (jq -R -s). Output: one compact
# entry {"kind":"chunks","chunks":[…]} or {"kind":"unterminated",…} per body;
# several bodies may be joined by lines reading "--entry--".
def usage_of($u):
  ($u.prompt_tokens_details.cached_tokens // $u.prompt_cache_hit_tokens) as $c
  | {inputTokens: ($u.prompt_tokens - ($c // 0)), outputTokens: $u.completion_tokens}
  + (if $c != null then {cacheReadTokens: $c} else {} end)
  + (if $u.completion_tokens_details.reasoning_tokens != null
     then {reasoningTokens: $u.completion_tokens_details.reasoning_tokens} else {} end);
def finish_of($r):
  if $r == "stop" then {kind: "stop"} elif $r == "tool_calls" then {kind: "tool-calls"}
  elif $r == "length" then {kind: "max-tokens"}
  else {kind: "error", failure: {message: "model stopped: \($r)", code: ($r | ascii_upcase)}} end;
def open_block($kind):
  .blocks += [{index: (.blocks | length), kind: $kind, text: ""}]
  | .out += [{type: "block-start", index: (.blocks | length - 1), blockType: $kind}];
def decode:
[split("\n")[] | select(startswith("data: ")) | .[6:]] as $payloads
| reduce $payloads[] as $p ({blocks: [], text: null, reas: null, tools: {}, out: [], fin: null, usage: null, done: false};
    if .done then .
    elif $p == "[DONE]" then
      .done = true
      | .out += [.blocks[] | {type: "block-end", index, block:
          (if .kind == "tool-call" then {type: "tool-call", id: (.id // ""), name: (.name // ""), arguments: .text}
           else {type: .kind, text} end)}]
      | if .usage then .out += [{type: "usage", usage: .usage}] else . end
      | (.fin // {kind: "stop"}) as $f
      | .out += [{type: "finish", reason:
          (if $f.kind == "stop" and (.blocks | length) == 0
           then {kind: "error", failure: {message: "model returned a completed response with no content", code: "EMPTY_RESPONSE"}}
           else $f end)}]
    else
      ($p | fromjson) as $c
      | reduce ($c.choices // [])[] as $ch (.;
          ($ch.delta // {}) as $d
          | (if ($d.reasoning_content | type) == "string" and ($d.reasoning_content | length) > 0 then
               (if .reas == null then .reas = (.blocks | length) | open_block("reasoning") else . end)
               | .blocks[.reas].text += $d.reasoning_content
               | .out += [{type: "reasoning-delta", index: .reas, text: $d.reasoning_content}]
             else . end)
          | (if ($d.content | type) == "string" and ($d.content | length) > 0 then
               (if .text == null then .text = (.blocks | length) | open_block("text") else . end)
               | .blocks[.text].text += $d.content
               | .out += [{type: "text-delta", index: .text, text: $d.content}]
             else . end)
          | reduce ($d.tool_calls // [])[] as $t (.;
              ($t.index | tostring) as $k
              | (if .tools[$k] == null then .tools[$k] = (.blocks | length) | open_block("tool-call") else . end)
              | .tools[$k] as $b
              | (if ($t.id // "") != "" then .blocks[$b].id = $t.id else . end)
              | (if $t.function.name != null then .blocks[$b].name = $t.function.name else . end)
              | .blocks[$b].text += ($t.function.arguments // "")
              | .out += [{type: "tool-call-delta", index: $b, id: (.blocks[$b].id // "")}
                  + (if .blocks[$b].name != null then {name: .blocks[$b].name} else {} end)
                  + {argumentsDelta: ($t.function.arguments // "")}])
          | if ($ch.finish_reason | type) == "string" then .fin = finish_of($ch.finish_reason) else . end)
      | if $c.usage then .usage = usage_of($c.usage) else . end
    end)
| if .done then {kind: "chunks", chunks: .out} else {kind: "unterminated", chunks: .out} end;
split("\n--entry--\n")[] | decode
