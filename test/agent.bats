#!/usr/bin/env bats
# The reference agent (acpsnap-agent, example/) driven over stdio by
# hand-written JSON-RPC lines, in replay mode with small replay scripts
# (test/agent-data/). Each test asserts the exact stdout frames and the
# persisted log after jsonl-project (volatile values scrubbed by log_norm).
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/agent

DATA=$BATS_TEST_DIRNAME/agent-data
INIT='{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":false,"audio":false,"embeddedContext":false}},"agentInfo":{"name":"acpsnap-agent","version":"0.1.0"},"authMethods":[]}}'
NEWS='{"jsonrpc":"2.0","id":1,"result":{"sessionId":"{{sessionId}}"}}'
HDR='{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0,"cwd":"{{cwd}}","delegationDepth":0}'
RH='{"type":"request/header","data":{"header":{"config":{"provider":"deepseek-official","model":"deepseek-v4-flash"},"system":"{{system}}","tools":"{{tools}}"},"reason":"initial"}}'

@test "agent: a tool turn (bash), stdout and persisted log" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/tool-turn.jsonl"
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    wait_lines 6
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(out_norm)" "$INIT
$NEWS
{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"{{sessionId}}\",\"update\":{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"call_1\",\"title\":\"bash\",\"kind\":\"execute\",\"status\":\"pending\",\"rawInput\":{\"command\":\"echo SNAPSHOT_OK\"}}}}
{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"{{sessionId}}\",\"update\":{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"call_1\",\"status\":\"completed\",\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"SNAPSHOT_OK\\n\"}}]}}}
{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"{{sessionId}}\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"DONE\"}}}}
{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":\"end_turn\"}}"
    run -0 log_norm
    assert_equal "$output" "$HDR"'
{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"Run echo SNAPSHOT_OK, then say DONE."}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}
'"$RH"'
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"reasoning"}}}
{"type":"reasoning-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["Run"," it","."]}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":1,"blockType":"tool-call"}}}
{"type":"tool-call-chunks","data":{"turn":1,"step":1,"index":1,"dt":[0,0],"id":"call_1","name":"bash","args":["{\"command\":","\"echo SNAP","SHOT_OK\"}"]}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"reasoning","text":"Run it."}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":1,"block":{"type":"tool-call","id":"call_1","name":"bash","arguments":"{\"command\":\"echo SNAPSHOT_OK\"}"}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"usage","usage":{"inputTokens":10,"outputTokens":5}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"tool-calls"}}}}
{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"reasoning","text":"Run it."},{"type":"tool-call","id":"call_1","name":"bash","arguments":"{\"command\":\"echo SNAPSHOT_OK\"}"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"{{uuid}}"},"usage":{"inputTokens":10,"outputTokens":5}},"sourceEventSeqs":[4,5,6,7,8,9,10,11,12,13,14,15],"surfaceOp":"append"}
{"type":"tool/call","data":{"turn":1,"step":1,"callId":"call_1","name":"bash","arguments":"{\"command\":\"echo SNAPSHOT_OK\"}"}}
{"type":"tool/result","data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"call_1"},"content":[{"type":"tool-result","toolCallId":"call_1","content":[{"type":"text","text":"SNAPSHOT_OK\n"}],"isError":false}],"role":"user","id":"{{uuid}}"}},"sourceEventSeqs":[17],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"step/start","data":{"turn":1,"step":2}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"D"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"ONE"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"DONE"}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"usage","usage":{"inputTokens":12,"outputTokens":2}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}
{"type":"assistant/message","data":{"turn":1,"step":2,"message":{"role":"assistant","content":[{"type":"text","text":"DONE"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"{{uuid}}"},"usage":{"inputTokens":12,"outputTokens":2}},"sourceEventSeqs":[21,22,23,24,25,26],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":2}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}'
    # the persisted log is canonical, and derives back to the script it was served
    run -0 jsonl-pack --check "$(log_file)"
    run -0 replay-derive "$(log_file)"
    assert_equal "$output" "$(jq -c . "$DATA/tool-turn.jsonl")"
}

@test "agent: bash in a cwd that is gone fails as bash that cannot enter it would: its message, exit code 126" {
    call() { # ID COMMAND: a model step that calls bash
        jq -cn --arg id "$1" --arg c "$2" '{kind: "chunks", chunks: [
            {type: "block-start", index: 0, blockType: "tool-call"},
            {type: "tool-call-delta", index: 0, id: $id, name: "bash", argumentsDelta: ({command: $c} | tojson)},
            {type: "finish", reason: {kind: "tool-calls"}}]}'
    }
    { call call_1 'rmdir "$PWD"'; call call_2 'echo unreachable'
      jq -cn '{kind: "chunks", chunks: [{type: "block-start", index: 0, blockType: "text"},
          {type: "text-delta", index: 0, text: "gone"}, {type: "finish", reason: {kind: "stop"}}]}'
    } > "$BATS_TEST_TMPDIR/gone.jsonl"
    agent_start ACPSNAP_REPLAY_SCRIPT="$BATS_TEST_TMPDIR/gone.jsonl"
    new_session
    prompt 2 "Remove the cwd, then echo."
    wait_lines 7
    agent_stop
    assert_equal "$AGENT_RC" 0
    [ ! -e "$W" ]
    run -0 jq -r 'select(.params.update.sessionUpdate == "tool_call_update") | .params.update.content[0].content.text' "$AG_DIR/out.jsonl"
    assert_equal "$output" "
bash tool: unable to enter $W: No such file or directory

[exit code: 126]"
}

@test "agent: two parallel tool calls run in order, results in call order" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/parallel.jsonl"
    printf 'A\n' > "$W/a.txt"; printf 'B\n' > "$W/b.txt"
    new_session
    prompt 2 "Read a.txt and b.txt."
    wait_lines 8
    agent_stop
    assert_equal "$(out_norm)" "$INIT
$NEWS"'
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"tool_call","toolCallId":"call_a","title":"read_file","kind":"read","status":"pending","rawInput":{"path":"a.txt"}}}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"tool_call","toolCallId":"call_b","title":"read_file","kind":"read","status":"pending","rawInput":{"path":"b.txt"}}}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_a","status":"completed","content":[{"type":"content","content":{"type":"text","text":"A\n"}}]}}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_b","status":"completed","content":[{"type":"content","content":{"type":"text","text":"B\n"}}]}}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"A and B"}}}}
{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
    run -0 log_norm
    assert_equal "$output" "$HDR"'
{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"Read a.txt and b.txt."}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}
'"$RH"'
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"tool-call"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"call_a","name":"read_file","argumentsDelta":"{\"path\":\"a.txt\"}"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":1,"blockType":"tool-call"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"call_b","name":"read_file","argumentsDelta":"{\"path\":\"b.txt\"}"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"tool-call","id":"call_a","name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":1,"block":{"type":"tool-call","id":"call_b","name":"read_file","arguments":"{\"path\":\"b.txt\"}"}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"usage","usage":{"inputTokens":10,"outputTokens":5}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"tool-calls"}}}}
{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"call_a","name":"read_file","arguments":"{\"path\":\"a.txt\"}"},{"type":"tool-call","id":"call_b","name":"read_file","arguments":"{\"path\":\"b.txt\"}"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"{{uuid}}"},"usage":{"inputTokens":10,"outputTokens":5}},"sourceEventSeqs":[4,5,6,7,8,9,10,11],"surfaceOp":"append"}
{"type":"tool/call","data":{"turn":1,"step":1,"callId":"call_a","name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}
{"type":"tool/call","data":{"turn":1,"step":1,"callId":"call_b","name":"read_file","arguments":"{\"path\":\"b.txt\"}"}}
{"type":"tool/result","data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"call_a"},"content":[{"type":"tool-result","toolCallId":"call_a","content":[{"type":"text","text":"A\n"}],"isError":false}],"role":"user","id":"{{uuid}}"}},"sourceEventSeqs":[13],"surfaceOp":"append"}
{"type":"tool/result","data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"call_b"},"content":[{"type":"tool-result","toolCallId":"call_b","content":[{"type":"text","text":"B\n"}],"isError":false}],"role":"user","id":"{{uuid}}"}},"sourceEventSeqs":[14],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"step/start","data":{"turn":1,"step":2}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"A and B"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"A and B"}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}
{"type":"assistant/message","data":{"turn":1,"step":2,"message":{"role":"assistant","content":[{"type":"text","text":"A and B"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"{{uuid}}"}},"sourceEventSeqs":[19,20,21,22],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":2}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}'
}

# Permission tests share everything but the answer.
permission_turn() { # optionId
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/write.jsonl" ACPSNAP_PERMISSION=ask
    new_session
    prompt 2 "Write out.txt."
    wait_lines 4
    assert_equal "$(sed -n 4p "$AG_DIR/out.jsonl" | sed "s/$SID/{{sessionId}}/")" \
        '{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"{{sessionId}}","toolCall":{"toolCallId":"call_w","title":"write_file"},"options":[{"optionId":"allow-once","name":"Allow once","kind":"allow_once"},{"optionId":"reject-once","name":"Reject","kind":"reject_once"}]}}'
    send "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"$1\"}}}"
    wait_lines 7
    agent_stop
}
permission_log() { # outcome result-text is-error
    echo "$HDR"'
{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"Write out.txt."}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}
'"$RH"'
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"tool-call"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"call_w","name":"write_file","argumentsDelta":"{\"path\":\"out.txt\",\"content\":\"hi\\n\"}"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"tool-call","id":"call_w","name":"write_file","arguments":"{\"path\":\"out.txt\",\"content\":\"hi\\n\"}"}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"tool-calls"}}}}
{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"call_w","name":"write_file","arguments":"{\"path\":\"out.txt\",\"content\":\"hi\\n\"}"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"{{uuid}}"}},"sourceEventSeqs":[4,5,6,7],"surfaceOp":"append"}
{"type":"tool/call","data":{"turn":1,"step":1,"callId":"call_w","name":"write_file","arguments":"{\"path\":\"out.txt\",\"content\":\"hi\\n\"}"}}
{"type":"approval/asked","data":{"id":"{{uuid}}","toolName":"write_file","callId":"call_w","reason":"the permission policy asks before this tool"}}
{"type":"approval/decided","data":{"id":"{{uuid}}","outcome":"'"$1"'"}}
{"type":"tool/result","data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"call_w"},"content":[{"type":"tool-result","toolCallId":"call_w","content":[{"type":"text","text":"'"$2"'"}],"isError":'"$3"'}],"role":"user","id":"{{uuid}}"}},"sourceEventSeqs":[9],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"step/start","data":{"turn":1,"step":2}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"OK"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"OK"}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":2,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}
{"type":"assistant/message","data":{"turn":1,"step":2,"message":{"role":"assistant","content":[{"type":"text","text":"OK"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"{{uuid}}"}},"sourceEventSeqs":[15,16,17,18],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":2}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}'
}
permission_out() { # status result-text
    echo "$INIT
$NEWS"'
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"tool_call","toolCallId":"call_w","title":"write_file","kind":"edit","status":"pending","rawInput":{"path":"out.txt","content":"hi\n"}}}}
{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"{{sessionId}}","toolCall":{"toolCallId":"call_w","title":"write_file"},"options":[{"optionId":"allow-once","name":"Allow once","kind":"allow_once"},{"optionId":"reject-once","name":"Reject","kind":"reject_once"}]}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_w","status":"'"$1"'","content":[{"type":"content","content":{"type":"text","text":"'"$2"'"}}]}}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"OK"}}}}
{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
}

@test "agent: permission asked and approved runs the tool" {
    permission_turn allow-once
    assert_equal "$(cat "$W/out.txt")" "hi"
    assert_equal "$(out_norm)" "$(permission_out completed 'wrote 3 bytes to out.txt')"
    assert_equal "$(log_norm)" "$(permission_log allowed-once 'wrote 3 bytes to out.txt' false)"
}

@test "agent: permission asked and rejected fails the tool call" {
    permission_turn reject-once
    [ ! -e "$W/out.txt" ]
    assert_equal "$(out_norm)" "$(permission_out failed 'error: permission denied by the user')"
    assert_equal "$(log_norm)" "$(permission_log rejected 'error: permission denied by the user' true)"
}

# tool_calls ENTRY-FILE NAME ARGS-JSON...: one model call asking for the tools
# (ids call_1, call_2, ...), then a text reply OK.
tool_calls() {
    local out=$1 i=0 calls='[]' name args
    shift
    while [ $# -gt 0 ]; do
        name=$1 args=$2
        shift 2
        i=$((i + 1))
        calls=$(jq -c --arg n "$name" --arg a "$args" --arg id "call_$i" --argjson k "$((i - 1))" \
            '. + [{type:"block-start",index:$k,blockType:"tool-call"},{type:"tool-call-delta",index:$k,id:$id,name:$n,argumentsDelta:$a},
                  {type:"block-end",index:$k,block:{type:"tool-call",id:$id,name:$n,arguments:$a}}]' <<<"$calls")
    done
    jq -cn --argjson c "$calls" '{kind:"chunks",chunks:($c + [{type:"finish",reason:{kind:"tool-calls"}}])}' > "$out"
    jq -cn '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},{type:"text-delta",index:0,text:"OK"},
        {type:"block-end",index:0,block:{type:"text",text:"OK"}},{type:"finish",reason:{kind:"stop"}}]}' >> "$out"
}

@test "agent: read_file and write_file stay beneath the cwd, follow no link; bash's HOME is in the session's directory" {
    local V=$BATS_TEST_TMPDIR/victim
    printf 'precious\n' > "$V"
    mkdir -p "$BATS_TEST_TMPDIR/work"
    ln -s "$V" "$BATS_TEST_TMPDIR/work/link.txt"
    ln -s .. "$BATS_TEST_TMPDIR/work/up"
    tool_calls "$BATS_TEST_TMPDIR/s.jsonl" \
        write_file "{\"path\":\"$BATS_TEST_TMPDIR/work/inside.txt\",\"content\":\"in\"}" \
        write_file '{"path":"../victim","content":"x"}' \
        write_file '{"path":"link.txt","content":"x"}' \
        write_file '{"path":"up/victim","content":"x"}' \
        write_file "{\"path\":\"$V\",\"content\":\"x\"}" \
        read_file '{"path":"link.txt"}' \
        read_file '{"path":"/etc/hostname"}' \
        read_file '{"path":"."}' \
        bash '{"command":"echo \"$HOME\"; test -d \"$HOME\" && stat -c %a \"$HOME\""}'
    agent_start ACPSNAP_REPLAY_SCRIPT="$BATS_TEST_TMPDIR/s.jsonl"
    new_session
    prompt 2 "Try."
    wait_lines 22
    agent_stop
    assert_equal "$AGENT_RC" 0
    run -0 jq -r 'select(.params.update.sessionUpdate == "tool_call_update") | .params.update | "\(.toolCallId) \(.status) \(.content[0].content.text)"' "$AG_DIR/out.jsonl"
    assert_equal "$output" "call_1 completed wrote 2 bytes to $BATS_TEST_TMPDIR/work/inside.txt
call_2 failed error: unable to write ../victim: a '.' or '..' component in a path; the file tools reach only files beneath the working directory
call_3 failed error: unable to write link.txt: a symbolic link on the way (links are not followed)
call_4 failed error: unable to write up/victim: a symbolic link on the way (links are not followed)
call_5 failed error: unable to write $V: an absolute path outside the working directory; the file tools reach only files beneath the working directory
call_6 failed error: unable to read link.txt: a symbolic link on the way (links are not followed)
call_7 failed error: unable to read /etc/hostname: an absolute path outside the working directory; the file tools reach only files beneath the working directory
call_8 failed error: unable to read .: a '.' or '..' component in a path; the file tools reach only files beneath the working directory
call_9 completed $(cd "$AG_DIR/sessions" && pwd -P)/$SID/home
700"
    assert_equal "$(cat "$V")" precious
    assert_equal "$(cat "$BATS_TEST_TMPDIR/work/inside.txt")" in
}

@test "agent: cancel during a hang commits the partial text and answers cancelled" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/hang.jsonl"
    new_session
    prompt 2 "Start a long task."
    wait_file "$W/.stream-ready"
    send "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"$SID\"}}"
    wait_lines 4
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(out_norm)" "$INIT
$NEWS"'
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"partial"}}}}
{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}'
    assert_equal "$(log_norm)" "$HDR"'
{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"Start a long task."}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}
'"$RH"'
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"partial"}}}
{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"partial"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"{{uuid}}"},"interrupted":true},"sourceEventSeqs":[4,5],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}'
}

@test "agent: stdin EOF during a hang cancels the turn, flushes and exits 0" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/hang.jsonl"
    new_session
    prompt 2 "Start a long task."
    wait_file "$W/.stream-ready"
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(log_norm | tail -1)" '{"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}'
}

@test "agent: a provider throw before any chunk answers the prompt with an error" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/throw-first.jsonl"
    new_session
    prompt 2 "boom"
    wait_lines 3
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(cat "$AG_DIR/err.txt")" "acpsnap-agent: model call 1/1 failed: model exploded (PROVIDER)"
    assert_equal "$(out_norm)" "$INIT
$NEWS"'
{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"model exploded"}}'
    assert_equal "$(log_norm)" "$HDR"'
{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"boom"}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}
'"$RH"'
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"error","error":{"message":"model exploded","code":"PROVIDER"}}}}'
}

@test "agent: a provider throw after prefix chunks commits the prefix, then errors" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/throw-prefix.jsonl"
    new_session
    prompt 2 "boom"
    wait_lines 4
    agent_stop
    assert_equal "$(cat "$AG_DIR/err.txt")" "acpsnap-agent: model call 1/1 failed: connection reset mid-stream (TRANSPORT)"
    assert_equal "$(out_norm)" "$INIT
$NEWS"'
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"thinking about it"}}}}
{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"connection reset mid-stream"}}'
    assert_equal "$(log_norm)" "$HDR"'
{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"boom"}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}
'"$RH"'
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"thinking about it"}}}
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"error","error":{"message":"connection reset mid-stream","code":"TRANSPORT"}}}}'
    # the fingerprint of a thrown stream: derivation refuses the log
    run -2 --separate-stderr replay-derive "$(log_file)"
    assert_equal "$output" ""
}

compaction_log() { # prompt summary answer
    echo "$HDR"'
{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"'"$1"'"}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}'
    [ "$4" = first ] && echo "$RH"
    echo '{"type":"compaction/summary","data":{"turn":1,"step":1,"summary":"'"$2"'","rawOutput":[{"type":"text","text":"'"$2"'"}],"usage":{"inputTokens":40,"outputTokens":8},"llmStreamCall":true}}'
    [ "$4" = first ] || echo "$RH"
    echo '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"'"$3"'"}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"'"$3"'"}}}}
{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}
{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"'"$3"'"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"{{uuid}}"}},"sourceEventSeqs":[SEQS],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}'
}

@test "agent: compaction past the context budget records a summary call and continues" {
    printf '# tiny budget\ncontext_budget = 10\n' > "$BATS_TEST_TMPDIR/agent.conf"
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/compaction.jsonl" ACPSNAP_AGENT_CONFIG="$BATS_TEST_TMPDIR/agent.conf"
    new_session
    prompt 2 "Please greet me warmly."
    wait_lines 4
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(out_norm)" "$INIT
$NEWS"'
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello"}}}}
{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
    assert_equal "$(log_norm)" "$(compaction_log "Please greet me warmly." "The user asked for a greeting." Hello | sed 's/SEQS/5,6,7,8/')"
    # the summary call derives back at its position (block-start/block-end, usage, finish)
    run -0 replay-derive "$(log_file)"
    assert_equal "$output" "$(jq -c . "$DATA/compaction.jsonl")"
}

@test "agent: a context-length rejection compacts and retries the step" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/context-retry.jsonl"
    new_session
    prompt 2 "Greet me."
    wait_lines 4
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(cat "$AG_DIR/err.txt")" "acpsnap-agent: model call 1/1 rejected for context length: compacting"
    assert_equal "$(out_norm)" "$INIT
$NEWS"'
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello again"}}}}
{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
    assert_equal "$(log_norm)" "$(compaction_log "Greet me." "Summary: the user wants a greeting." "Hello again" first | sed 's/SEQS/5,6,7,8/')"
}

@test "agent: zstd and raw persistence give the same logical log" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/tool-turn.jsonl" ACPSNAP_PERSISTENCE=zstd
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    wait_lines 6
    agent_stop
    zlog=$(log_file)
    assert_equal "${zlog##*/}" session.jsonl.zstd
    assert_equal "$(head -c4 "$zlog" | od -An -tx1 | tr -d ' ')" 28b52ffd
    # one frame for the header, then one per durable batch
    run -0 zstd -dc "$zlog"
    zsid=$SID
    znorm=$(log_norm "$zlog")
    mv "$AG_DIR/sessions" "$AG_DIR/zsessions"
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/tool-turn.jsonl" ACPSNAP_PERSISTENCE=raw
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    wait_lines 6
    agent_stop
    rlog=$(log_file)
    assert_equal "${rlog##*/}" session.jsonl
    assert_equal "$(log_norm "$rlog")" "$znorm"
    assert_equal "$(grep -c . "$rlog")" "$(zstd -dc "$AG_DIR/zsessions/$zsid/session.jsonl.zstd" | grep -c .)"
}

@test "agent: kill -9 during a write, then session/load repairs the tail and continues" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/tool-turn.jsonl" ACPSNAP_PERSISTENCE=zstd ACPSNAP_AGENT_CRASH_AT_BATCH=2
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    agent_stop 2>/dev/null
    assert_equal "$AGENT_RC" 137
    # the torn frame is really there: a plain reader refuses the log
    run ! zstd -tq "$(log_file)"
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/parallel.jsonl" ACPSNAP_PERSISTENCE=zstd
    printf 'A\n' > "$W/a.txt"; printf 'B\n' > "$W/b.txt"
    send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
    send "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/load\",\"params\":{\"sessionId\":\"$SID\",\"cwd\":\"$W\",\"mcpServers\":[]}}"
    wait_lines 3
    prompt 2 "Read a.txt and b.txt."
    wait_lines 9
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_regex "$(cat "$AG_DIR/err.txt")" "^acpsnap-agent: $AG_DIR/sessions/$SID/session.jsonl.zstd: cut a torn tail of [0-9]+ bytes at offset [0-9]+\$"
    assert_equal "$(sed -n 2,3p "$AG_DIR/out.jsonl" | sed "s/$SID/{{sessionId}}/")" '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"{{sessionId}}","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"Run echo SNAPSHOT_OK, then say DONE."}}}}
{"jsonrpc":"2.0","id":1,"result":null}'
    run -0 zstd -tq "$(log_file)"
    run -0 jsonl-pack --check "$(log_file)"
    run -0 log_norm
    assert_equal "$(sed -n 2,11p <<< "$output")" '{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"Run echo SNAPSHOT_OK, then say DONE."}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}
'"$RH"'
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"interrupted"}}}
{"type":"turn/start","data":{"turn":2}}
{"type":"step/start","data":{"turn":2,"step":1}}
{"type":"user/message","data":{"content":[{"type":"text","text":"Read a.txt and b.txt."}],"source":{"kind":"user"},"role":"user","id":"{{uuid}}"},"surfaceOp":"append"}
{"type":"request/header","data":{"header":{"config":{"provider":"deepseek-official","model":"deepseek-v4-flash"},"system":"{{system}}","tools":"{{tools}}"},"reason":"resume"}}
{"type":"assistant/chunk","data":{"turn":2,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"tool-call"}}}'
    assert_equal "$(tail -1 <<< "$output")" '{"type":"turn/end","data":{"turn":2,"reason":{"kind":"completed"}}}'
}

@test "agent: kill -9 during a raw write leaves a torn line that load cuts" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/tool-turn.jsonl" ACPSNAP_AGENT_CRASH_AT_BATCH=2
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    agent_stop 2>/dev/null
    assert_equal "$AGENT_RC" 137
    [ "$(tail -c1 "$(log_file)" | od -An -c | tr -d ' ')" != '\n' ]
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/parallel.jsonl"
    send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
    send "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/load\",\"params\":{\"sessionId\":\"$SID\",\"cwd\":\"$W\",\"mcpServers\":[]}}"
    wait_lines 3
    agent_stop
    assert_regex "$(cat "$AG_DIR/err.txt")" "^acpsnap-agent: $AG_DIR/sessions/$SID/session.jsonl: cut a torn tail of [0-9]+ bytes at offset [0-9]+
acpsnap-agent: replay: 2 of 2 entries not consumed\$"
    assert_equal "$(log_norm | tail -1)" '{"type":"turn/end","data":{"turn":1,"reason":{"kind":"interrupted"}}}'
    # unconsumed replay entries are a failure at shutdown
    assert_equal "$AGENT_RC" 3
}

@test "agent: a model call past the end of the script fails loudly, exit 3 at shutdown" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/throw-first.jsonl"
    new_session
    prompt 2 "one"
    wait_lines 3
    prompt 3 "two"
    wait_lines 4
    agent_stop
    assert_equal "$AGENT_RC" 3
    assert_equal "$(tail -1 "$AG_DIR/out.jsonl")" '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"replay: model call 2 is past the end of the script (1 entries)"}}'
    assert_equal "$(sed -n 2p "$AG_DIR/err.txt")" "acpsnap-agent: replay: model call 2 is past the end of the script (1 entries)"
}

@test "agent: unconsumed script entries fail at shutdown" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/tool-turn.jsonl"
    new_session
    agent_stop
    assert_equal "$AGENT_RC" 3
    assert_equal "$(cat "$AG_DIR/err.txt")" "acpsnap-agent: replay: 2 of 2 entries not consumed"
    # a session without a model turn has a header-only log
    assert_equal "$(log_norm)" "$HDR"
}

@test "agent: bash output past the cap is spilled to a file named in the result" {
    printf 'output_cap = 10\n' > "$BATS_TEST_TMPDIR/agent.conf"
    jq -c '.chunks |= map(if .type == "tool-call-delta" then .argumentsDelta = (if .argumentsDelta == "{\"command\":" then "{\"command\":\"seq 1 2000\"}" else "" end)
                           elif .type == "block-end" and .block.type == "tool-call" then .block.arguments = "{\"command\":\"seq 1 2000\"}" else . end)' \
        "$DATA/tool-turn.jsonl" > "$BATS_TEST_TMPDIR/spill.jsonl"
    agent_start ACPSNAP_REPLAY_SCRIPT="$BATS_TEST_TMPDIR/spill.jsonl" ACPSNAP_AGENT_CONFIG="$BATS_TEST_TMPDIR/agent.conf"
    new_session
    prompt 2 "Count."
    wait_lines 6
    agent_stop
    text=$(sed -n 4p "$AG_DIR/out.jsonl" | jq -r .params.update.content[0].content.text)
    sid12=$(tr -d - <<< "$SID" | cut -c1-12)
    assert_regex "$text" "^1
2
3
4
5


\(Omitted 8883 bytes. Full output stored at: $AG_DIR/spill/session-$sid12/[0-9a-f]{12}-bash.txt\)\$"
    spill=${text##*stored at: }; spill=${spill%)}
    assert_equal "$(cat "$spill")" "$(seq 1 2000)"
}

@test "agent: cancel during a running bash kills its process group" {
    # the arguments come from the deltas alone (no block-end)
    jq -c '.chunks |= map(if .type == "tool-call-delta" then .argumentsDelta = (if .argumentsDelta == "{\"command\":" then "{\"command\":\"(sleep 30; echo late > late.txt) & echo $! > bg.pid; touch started; wait\"}" else "" end) else . end
                          | select(.type != "block-end"))' "$DATA/tool-turn.jsonl" | head -1 > "$BATS_TEST_TMPDIR/long.jsonl"
    agent_start ACPSNAP_REPLAY_SCRIPT="$BATS_TEST_TMPDIR/long.jsonl"
    new_session
    prompt 2 "Wait a long time."
    wait_file "$W/started"
    send "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"$SID\"}}"
    wait_lines 5
    agent_stop
    assert_equal "$(tail -1 "$AG_DIR/out.jsonl")" '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}'
    assert_equal "$(sed -n 4p "$AG_DIR/out.jsonl" | jq -c .params.update)" '{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"[cancelled]"}}]}'
    # the background grandchild went with the process group (gone, or a zombie)
    bg=$(cat "$W/bg.pid")
    [ ! -e "/proc/$bg" ] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$bg/stat"
    assert_equal "$(log_norm | tail -3)" '{"type":"tool/result","data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"call_1"},"content":[{"type":"tool-result","toolCallId":"call_1","content":[{"type":"text","text":"[cancelled]"}],"isError":true}],"role":"user","id":"{{uuid}}"}},"sourceEventSeqs":[15],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}'
}

@test "agent: finish reasons map to max_tokens and refusal stop reasons" {
    for k in max-tokens:max_tokens:max-tokens refusal:refusal:completed; do
        jq -c --arg k "${k%%:*}" '.chunks |= map(if .type == "finish" then .reason.kind = $k else . end)' \
            "$DATA/compaction.jsonl" | head -1 > "$BATS_TEST_TMPDIR/fin.jsonl"
        agent_start ACPSNAP_REPLAY_SCRIPT="$BATS_TEST_TMPDIR/fin.jsonl"
        new_session
        prompt 2 "Go."
        wait_lines 4
        agent_stop
        stop=${k#*:}; stop=${stop%%:*}
        assert_equal "$(tail -1 "$AG_DIR/out.jsonl")" "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":\"$stop\"}}"
        assert_equal "$(log_norm | tail -1)" "{\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"${k##*:}\"}}}"
        rm -rf "$AG_DIR/sessions"
    done
}

@test "agent: protocol errors: parse error, unknown method, bad cwd, unknown session" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/throw-first.jsonl"
    send 'not json'
    send '{"jsonrpc":"2.0","id":7,"method":"session/fork","params":{}}'
    send '{"jsonrpc":"2.0","id":8,"method":"session/new","params":{"cwd":"relative","mcpServers":[]}}'
    send '{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}'
    send '{"jsonrpc":"2.0","id":"s","method":"session/load","params":{"sessionId":"00000000-0000-4000-8000-000000000000","cwd":"/tmp","mcpServers":[]}}'
    wait_lines 5
    agent_stop
    assert_equal "$(cat "$AG_DIR/out.jsonl")" '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}
{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found"}}
{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"invalid params: cwd must be an absolute path"}}
{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"invalid params: unknown sessionId"}}
{"jsonrpc":"2.0","id":"s","error":{"code":-32002,"message":"resource not found: no session log for this sessionId"}}'
}

@test "agent: bad config and bad environment are precise errors at start-up" {
    printf 'model = x\nbogus = 1\n' > "$BATS_TEST_TMPDIR/bad.conf"
    run -2 --separate-stderr "$AGENT_BIN" -c "$BATS_TEST_TMPDIR/bad.conf" < /dev/null
    assert_equal "$stderr" "acpsnap-agent: $BATS_TEST_TMPDIR/bad.conf:2: bogus: unknown key"
    printf 'max_steps = 0\n' > "$BATS_TEST_TMPDIR/bad.conf"
    run -2 --separate-stderr "$AGENT_BIN" -c "$BATS_TEST_TMPDIR/bad.conf" < /dev/null
    assert_equal "$stderr" "acpsnap-agent: $BATS_TEST_TMPDIR/bad.conf:1: max_steps: value must be a positive integer"
    printf 'just words\n' > "$BATS_TEST_TMPDIR/bad.conf"
    run -2 --separate-stderr "$AGENT_BIN" -c "$BATS_TEST_TMPDIR/bad.conf" < /dev/null
    assert_equal "$stderr" "acpsnap-agent: $BATS_TEST_TMPDIR/bad.conf:1: expected key = value"
    run -2 --separate-stderr env ACPSNAP_PERSISTENCE=gzip "$AGENT_BIN" < /dev/null
    assert_equal "$stderr" "acpsnap-agent: ACPSNAP_PERSISTENCE: persistence must be zstd or raw"
    run -2 --separate-stderr env ACPSNAP_SYNC=fdatasync "$AGENT_BIN" < /dev/null
    assert_equal "$stderr" "acpsnap-agent: ACPSNAP_SYNC: sync must be fsync or none"
    printf 'sync = never\n' > "$BATS_TEST_TMPDIR/bad.conf"
    run -2 --separate-stderr "$AGENT_BIN" -c "$BATS_TEST_TMPDIR/bad.conf" < /dev/null
    assert_equal "$stderr" "acpsnap-agent: $BATS_TEST_TMPDIR/bad.conf:1: sync: sync must be fsync or none"
    run -2 --separate-stderr env ACPSNAP_SNAPSHOT=replay "$AGENT_BIN" < /dev/null
    assert_equal "$stderr" "acpsnap-agent: replay mode needs a replay script (replay_script, ACPSNAP_REPLAY_SCRIPT or --replay)"
    run -2 --separate-stderr "$AGENT_BIN" -c "$BATS_TEST_TMPDIR/missing.conf" < /dev/null
    assert_equal "$stderr" "acpsnap-agent: unable to open config $BATS_TEST_TMPDIR/missing.conf: No such file or directory"
    printf '{"kind":"sing"}\n' > "$BATS_TEST_TMPDIR/bad.jsonl"
    run -2 --separate-stderr "$AGENT_BIN" --replay "$BATS_TEST_TMPDIR/bad.jsonl" < /dev/null
    assert_regex "$stderr" "^acpsnap-agent: $BATS_TEST_TMPDIR/bad.jsonl:1:"
    assert_equal "$output" ""
}

@test "agent: the snapshot overlay and env override the config file" {
    printf 'persistence = raw\nmodel = m1\nmax_steps = 5\n' > "$BATS_TEST_TMPDIR/a.conf"
    printf 'model = m2\n' > "$BATS_TEST_TMPDIR/a.snapshot.conf"
    run -0 env -u ACPSNAP_SNAPSHOT "$AGENT_BIN" -c "$BATS_TEST_TMPDIR/a.conf" --check-config
    assert_line 'mode = live'
    assert_line 'model = m1'
    run -0 env ACPSNAP_SNAPSHOT=replay ACPSNAP_REPLAY_SCRIPT=s.jsonl "$AGENT_BIN" -c "$BATS_TEST_TMPDIR/a.conf" --check-config
    assert_line 'mode = replay'
    assert_line 'model = m2'
    assert_line 'max_steps = 5'
    assert_line 'persistence = raw'
    assert_line 'api_key = (none)'
    run -0 env ACPSNAP_SNAPSHOT=replay ACPSNAP_REPLAY_SCRIPT=s.jsonl DEEPSEEK_MODEL=m3 "$AGENT_BIN" -c "$BATS_TEST_TMPDIR/a.conf" --check-config
    assert_line 'model = m3'
}

@test "agent: --help, --version and usage errors" {
    run -0 "$AGENT_BIN" --help
    assert_line --index 0 'acpsnap-agent [-c config] [--replay script] [--check-config]'
    run -0 "$AGENT_BIN" --version
    assert_output --partial 0.1.0
    run -2 --separate-stderr "$AGENT_BIN" extra
    assert_regex "$stderr" '^acpsnap-agent \[-c config\]'
}

@test "agent: a replay source may be a session log (derived, with an override)" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/tool-turn.jsonl"
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    wait_lines 6
    agent_stop
    jsonl-project "$(log_file)" > "$BATS_TEST_TMPDIR/fixture.jsonl"
    expected=$(out_norm)
    mv "$AG_DIR/sessions" "$AG_DIR/first"
    agent_start ACPSNAP_REPLAY_SCRIPT="$BATS_TEST_TMPDIR/fixture.jsonl"
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    wait_lines 6
    agent_stop
    assert_equal "$AGENT_RC" 0
    assert_equal "$(out_norm)" "$expected"
    assert_equal "$(log_norm)" "$(log_norm "$(ls "$AG_DIR"/first/*/session.jsonl)")"
}

@test "agent: {{fromRequest:…}} placeholders resolve against the live request, or fail loudly" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/from-request.jsonl"
    new_session
    prompt 2 "Remember code AB-12, no, code XY-345."
    wait_lines 4
    prompt 3 "Again."
    wait_lines 5
    agent_stop
    assert_equal "$AGENT_RC" 3
    assert_equal "$(sed -n 3,5p "$AG_DIR/out.jsonl" | sed "s/$SID/S/")" '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Your code is XY-345."}}}}
{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}
{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"replay: model call 2: {{fromRequest:nothing-like-this}} matched nothing in the request"}}'
    assert_equal "$(log_chunks | sed -n 2p)" '{"type":"text-delta","index":0,"text":"Your code is XY-345."}'
}

@test "agent: a second concurrent model stream fails loudly" {
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/hang.jsonl"
    new_session
    first=$SID
    send "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/new\",\"params\":{\"cwd\":\"$W\",\"mcpServers\":[]}}"
    wait_lines 3
    second=$(sed -n 3p "$AG_DIR/out.jsonl" | jq -r .result.sessionId)
    prompt 2 "Hang."
    wait_file "$W/.stream-ready"
    SID=$second
    prompt 3 "Me too."
    wait_lines 4
    assert_equal "$(sed -n 4p "$AG_DIR/out.jsonl")" '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"replay: model call 2 started while another stream is in flight"}}'
    send "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"$first\"}}"
    wait_lines 6
    agent_stop
    assert_equal "$AGENT_RC" 3
    assert_equal "$(tail -1 "$AG_DIR/out.jsonl")" '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}'
    assert_equal "$(head -1 "$AG_DIR/err.txt")" "acpsnap-agent: replay: model call 2 started while another stream is in flight"
}

@test "agent: the step limit ends the turn with max_turn_requests" {
    printf 'max_steps = 1\n' > "$BATS_TEST_TMPDIR/agent.conf"
    agent_start ACPSNAP_REPLAY_SCRIPT="$DATA/tool-turn.jsonl" ACPSNAP_AGENT_CONFIG="$BATS_TEST_TMPDIR/agent.conf"
    new_session
    prompt 2 "Run echo SNAPSHOT_OK, then say DONE."
    wait_lines 5
    agent_stop
    assert_equal "$(tail -1 "$AG_DIR/out.jsonl")" '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"max_turn_requests"}}'
    assert_equal "$(log_norm | tail -2)" '{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"max-steps"}}}'
    assert_equal "$(cat "$AG_DIR/err.txt")" "acpsnap-agent: replay: 1 of 2 entries not consumed"
}
