# Driving acpsnap-agent (example/) over stdio from bats: start it on a fifo,
# send hand-written JSON-RPC lines, wait for frames, stop it.
#   agent_start [VAR=value...]   replay mode, raw persistence by default
#   send 'json'                  one line to the agent's stdin
#   wait_lines N                 until stdout has N lines (10 s)
#   wait_file F                  until F exists (10 s)
#   agent_stop                   close stdin, wait; sets AGENT_RC
#   new_session                  initialize + session/new; sets SID
#   prompt ID TEXT               session/prompt for $SID
#   out_norm                     stdout with $SID → {{sessionId}}, cwd → {{cwd}}
#   log_file                     the session log of $SID
#   log_norm [file]              jsonl-project, then volatile values scrubbed

AG_DIR=''
# ACPSNAP_AGENT_BIN runs another build of the agent (e.g. a sanitizer build).
AGENT_BIN=${ACPSNAP_AGENT_BIN:-$BIN/acpsnap-agent}
agent_start() {
    AG_DIR=$BATS_TEST_TMPDIR
    W=$AG_DIR/work
    mkdir -p "$W"
    rm -f "$AG_DIR/in.fifo"
    mkfifo "$AG_DIR/in.fifo"
    : > "$AG_DIR/out.jsonl"
    (
        cd "$W"
        exec env ACPSNAP_SNAPSHOT=replay ACPSNAP_PERSISTENCE=raw \
            ACPSNAP_SESSIONS_ROOT="$AG_DIR/sessions" ACPSNAP_SPILL_ROOT="$AG_DIR/spill" "$@" \
            "$AGENT_BIN" < "$AG_DIR/in.fifo" > "$AG_DIR/out.jsonl" 2> "$AG_DIR/err.txt"
    ) &
    AGENT_PID=$!
    exec 9> "$AG_DIR/in.fifo"
}

send() { printf '%s\n' "$1" >&9; }

wait_lines() {
    local n=$1 i
    for ((i = 0; i < 1000; i++)); do
        [ "$(wc -l < "$AG_DIR/out.jsonl")" -ge "$n" ] && return 0
        sleep 0.01
    done
    echo "timed out waiting for $n stdout lines; got:" >&2
    cat "$AG_DIR/out.jsonl" "$AG_DIR/err.txt" >&2
    return 1
}

wait_file() {
    local i
    for ((i = 0; i < 1000; i++)); do [ -e "$1" ] && return 0; sleep 0.01; done
    echo "timed out waiting for $1" >&2
    return 1
}

agent_stop() {
    exec 9>&-
    AGENT_RC=0
    wait "$AGENT_PID" || AGENT_RC=$?
}

new_session() {
    send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
    send "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"$W\",\"mcpServers\":[]}}"
    wait_lines 2
    SID=$(sed -n 2p "$AG_DIR/out.jsonl" | jq -r .result.sessionId)
}

prompt() { # id text
    send "$(jq -cn --arg s "$SID" --arg t "$2" --argjson id "$1" \
        '{jsonrpc:"2.0",id:$id,method:"session/prompt",params:{sessionId:$s,prompt:[{type:"text",text:$t}]}}')"
}

out_norm() {
    sed -e "s/$SID/{{sessionId}}/g" -e "s#$W#{{cwd}}#g" "$AG_DIR/out.jsonl"
}

log_file() {
    ls "$AG_DIR/sessions/$SID"/session.jsonl* 2>/dev/null | head -1
}

# Projected log with header volatile fields, uuids and dt gaps scrubbed, the
# request header bulk tokenized.
log_norm() {
    jsonl-project "${1:-$(log_file)}" | jq -c --arg cwd "$W" '
        def uuids: if type == "string" then gsub("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"; "{{uuid}}") else . end;
        if .type == "session" then .id = "{{sessionId}}" | .createdAt = 0 | .cwd = "{{cwd}}"
        else
          (if .type == "request/header" then .data.header.system = "{{system}}" | .data.header.tools = "{{tools}}" else . end)
          | (if .data.dt then .data.dt |= map(0) else . end)
          | walk(uuids)
          | walk(if type == "string" then gsub($cwd; "{{cwd}}") else . end)
        end'
}

# The chunks of every assistant/chunk event of a log, one compact chunk per line.
log_chunks() {
    jsonl-pack --unpack "${1:-$(log_file)}" | jq -c 'select(.type == "assistant/chunk") | .data.chunk'
}
