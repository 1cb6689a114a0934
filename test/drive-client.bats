#!/usr/bin/env bats
# acp-drive as an ACP client: the capabilities it advertises, and the fs/*
# and terminal/* requests it serves, confined to the scenario's cwd.
bats_require_minimum_version 1.5.0
load helpers/common

load helpers/drive

setup() { drive_setup; }

# The steps: initialize, newSession, then one prompt per argument.
prompts() {
    local steps='{"op":"initialize"},{"op":"newSession"}' t
    for t in "$@"; do steps+=,$(jq -cn --arg t "$t" '{op:"prompt",text:$t}'); done
    input "{${CLIENT:+\"client\":$CLIENT,}\"steps\":[$steps]}"
}
# The agent's replies, one a line.
replies() { jq -r 'select(.method == "session/update") | .params.update.content.text | sub("^echo: "; "")' out/stdout.raw.jsonl; }

@test "drive-client: no client line advertises no capability; unselected methods are not found" {
    prompts 'caps:' 'call: fs/read_text_file {"path":"@CWD@/x"}' 'call: terminal/create {"command":"true"}'
    run -0 acp-drive -p fake.profile -o out snap/s
    run -0 replies
    assert_output '{}
{"id":"c2","error":{"code":-32601,"message":"method not found"}}
{"id":"c3","error":{"code":-32601,"message":"method not found"}}'
    # the agent's requests are in the transcript, as every frame it writes
    run -0 jq -r 'select(.id == "c2") | .method' out/stdout.raw.jsonl
    assert_output 'fs/read_text_file'
}

@test "drive-client: the profile's client line, and input.json's client overriding it" {
    prompts 'caps:'
    for c in 'fs-read' 'fs-write' 'terminal' 'fs-read terminal' 'fs-write fs-read terminal' 'none'; do
        cp fake.profile c.profile
        printf 'client = %s\n' "$c" >> c.profile
        run -0 acp-drive -p c.profile -o out snap/s
        replies
    done > got
    assert_equal "$(cat got)" '{"fs":{"readTextFile":true}}
{"fs":{"writeTextFile":true}}
{"terminal":true}
{"fs":{"readTextFile":true},"terminal":true}
{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}
{}'
    printf 'client = fs-read fs-write terminal\n' >> fake.profile
    CLIENT='["terminal"]' prompts 'caps:' 'call: fs/read_text_file {"path":"@CWD@/x"}'
    run -0 acp-drive -p fake.profile -o out snap/s
    run -0 replies
    assert_output '{"terminal":true}
{"id":"c2","error":{"code":-32601,"message":"method not found"}}'
    CLIENT='[]' prompts 'caps:'
    run -0 acp-drive -p fake.profile -o out snap/s
    run -0 replies
    assert_output '{}'
}

@test "drive-client: bad client lines and fields are trouble" {
    input '{"steps":[{"op":"initialize"}]}'
    printf 'client = fs-read disk\n' >> fake.profile
    run -2 --separate-stderr acp-drive -p fake.profile -o out snap/s
    assert_equal "$stderr" 'acp-drive: fake.profile:4: client: unknown capability "disk" (fs-read, fs-write, terminal or none)'
    printf 'command = x\nclient = none terminal\n' > bad.profile
    run -2 --separate-stderr acp-drive -p bad.profile -o out snap/s
    assert_equal "$stderr" 'acp-drive: bad.profile:2: client must be none or some of fs-read, fs-write, terminal'
    input '{"client":["fs-read","fs-read"],"steps":[{"op":"initialize"}]}'
    run -2 --separate-stderr acp-drive -p bad.profile -o out snap/s
    assert_equal "$stderr" 'acp-drive: snap/s/input.json:1: "client" must be an array of distinct "fs-read", "fs-write", "terminal"'
}

@test "drive-client: fs/read_text_file, whole or by line and limit, confined to the cwd" {
    mkdir -p snap/s/workspace/sub
    printf 'one\ntwo\nthree\nfour\n' > snap/s/workspace/sub/f.txt
    printf 'client = fs-read\n' >> fake.profile
    prompts 'call: fs/read_text_file {"path":"@CWD@/sub/f.txt"}' \
        'call: fs/read_text_file {"path":"@CWD@/sub/f.txt","line":2,"limit":2}' \
        'call: fs/read_text_file {"path":"sub/f.txt","line":4}' \
        'call: fs/read_text_file {"path":"@CWD@/sub/f.txt","line":9}' \
        'call: fs/read_text_file {"path":"/etc/passwd"}' \
        'call: fs/read_text_file {"path":"@CWD@/sub/../../x"}' \
        'call: fs/read_text_file {"path":"@CWD@/nope"}' \
        'call: fs/read_text_file {"path":"@CWD@/sub"}' \
        'call: fs/read_text_file {"path":"@CWD@/sub/f.txt","line":0}' \
        'call: fs/write_text_file {"path":"@CWD@/w","content":"x"}'
    run -0 acp-drive -p fake.profile -o out snap/s
    cwd=$(jq -r .cwd out/run.json)
    run -0 replies
    assert_output "{\"id\":\"c1\",\"result\":{\"content\":\"one\\ntwo\\nthree\\nfour\\n\"}}
{\"id\":\"c2\",\"result\":{\"content\":\"two\\nthree\\n\"}}
{\"id\":\"c3\",\"result\":{\"content\":\"four\\n\"}}
{\"id\":\"c4\",\"result\":{\"content\":\"\"}}
{\"id\":\"c5\",\"error\":{\"code\":-32602,\"message\":\"/etc/passwd: refused: outside the session cwd\"}}
{\"id\":\"c6\",\"error\":{\"code\":-32602,\"message\":\"$cwd/sub/../../x: refused: a '.' or '..' component in a path\"}}
{\"id\":\"c7\",\"error\":{\"code\":-32002,\"message\":\"$cwd/nope: No such file or directory\"}}
{\"id\":\"c8\",\"error\":{\"code\":-32603,\"message\":\"$cwd/sub: Is a directory\"}}
{\"id\":\"c9\",\"error\":{\"code\":-32602,\"message\":\"line must be a positive integer, limit a non-negative one\"}}
{\"id\":\"c10\",\"error\":{\"code\":-32601,\"message\":\"method not found\"}}"
}

@test "drive-client: fs/write_text_file creates or replaces a file beneath the cwd, never through a link" {
    mkdir -p snap/s/workspace
    printf 'old\n' > snap/s/workspace/f.txt
    ln -s f.txt snap/s/workspace/link
    printf 'client = fs-read fs-write\n' >> fake.profile
    prompts 'call: fs/write_text_file {"path":"@CWD@/f.txt","content":"new\n"}' \
        'call: fs/write_text_file {"path":"@CWD@/d/e/g.txt","content":"deep"}' \
        'call: fs/read_text_file {"path":"@CWD@/d/e/g.txt"}' \
        'call: fs/write_text_file {"path":"@CWD@/link","content":"via link"}' \
        'call: fs/write_text_file {"path":"/tmp/acp-drive-client-escape","content":"x"}' \
        'call: fs/write_text_file {"path":"@CWD@/f.txt"}' \
        'cat: f.txt'
    run -0 acp-drive -p fake.profile -o out snap/s
    cwd=$(jq -r .cwd out/run.json)
    run -0 replies
    assert_output "{\"id\":\"c1\",\"result\":{}}
{\"id\":\"c2\",\"result\":{}}
{\"id\":\"c3\",\"result\":{\"content\":\"deep\"}}
{\"id\":\"c4\",\"error\":{\"code\":-32602,\"message\":\"$cwd/link: a symbolic link on the way (links are not followed)\"}}
{\"id\":\"c5\",\"error\":{\"code\":-32602,\"message\":\"/tmp/acp-drive-client-escape: refused: outside the session cwd\"}}
{\"id\":\"c6\",\"error\":{\"code\":-32602,\"message\":\"missing string param \\\"content\\\"\"}}
new"
    [ ! -e /tmp/acp-drive-client-escape ]
}

@test "drive-client: terminals: create, output, wait_for_exit, kill, release" {
    printf 'client = terminal\n' >> fake.profile
    mkdir -p snap/s/workspace/sub
    prompts 'call: terminal/create {"command":"sh","args":["-c","pwd; echo \"$GREETING\"; echo err >&2; exit 3"],"env":[{"name":"GREETING","value":"hi"}],"cwd":"@CWD@/sub"}' \
        'call: terminal/wait_for_exit {"terminalId":"term-1"}' \
        'call: terminal/output {"terminalId":"term-1"}' \
        'call: terminal/release {"terminalId":"term-1"}' \
        'call: terminal/output {"terminalId":"term-1"}' \
        'call: terminal/create {"command":"printf","args":["0123456789"],"outputByteLimit":4}' \
        'call: terminal/wait_for_exit {"terminalId":"term-2"}' \
        'call: terminal/output {"terminalId":"term-2"}' \
        'call: terminal/create {"command":"sleep","args":["100"]}' \
        'call: terminal/output {"terminalId":"term-3"}' \
        'call: terminal/kill {"terminalId":"term-3"}' \
        'call: terminal/wait_for_exit {"terminalId":"term-3"}' \
        'call: terminal/create {"command":"true","cwd":"/"}' \
        'call: terminal/create {"command":"no-such-command-here"}' \
        'call: terminal/wait_for_exit {"terminalId":"term-4"}' \
        'call: terminal/output {"terminalId":"term-4"}'
    run -0 acp-drive -p fake.profile -o out snap/s
    cwd=$(jq -r .cwd out/run.json)
    run -0 replies
    assert_output "{\"id\":\"c1\",\"result\":{\"terminalId\":\"term-1\"}}
{\"id\":\"c2\",\"result\":{\"exitCode\":3,\"signal\":null}}
{\"id\":\"c3\",\"result\":{\"output\":\"$cwd/sub\\nhi\\nerr\\n\",\"truncated\":false,\"exitStatus\":{\"exitCode\":3,\"signal\":null}}}
{\"id\":\"c4\",\"result\":{}}
{\"id\":\"c5\",\"error\":{\"code\":-32602,\"message\":\"unknown terminalId term-1\"}}
{\"id\":\"c6\",\"result\":{\"terminalId\":\"term-2\"}}
{\"id\":\"c7\",\"result\":{\"exitCode\":0,\"signal\":null}}
{\"id\":\"c8\",\"result\":{\"output\":\"6789\",\"truncated\":true,\"exitStatus\":{\"exitCode\":0,\"signal\":null}}}
{\"id\":\"c9\",\"result\":{\"terminalId\":\"term-3\"}}
{\"id\":\"c10\",\"result\":{\"output\":\"\",\"truncated\":false}}
{\"id\":\"c11\",\"result\":{}}
{\"id\":\"c12\",\"result\":{\"exitCode\":null,\"signal\":\"SIGKILL\"}}
{\"id\":\"c13\",\"error\":{\"code\":-32602,\"message\":\"/: refused: outside the session cwd\"}}
{\"id\":\"c14\",\"result\":{\"terminalId\":\"term-4\"}}
{\"id\":\"c15\",\"result\":{\"exitCode\":127,\"signal\":null}}
{\"id\":\"c16\",\"result\":{\"output\":\"unable to run no-such-command-here: No such file or directory\\n\",\"truncated\":false,\"exitStatus\":{\"exitCode\":127,\"signal\":null}}}"
}

@test "drive-client: a terminal still running at the end of the run is killed, its group with it" {
    printf 'client = terminal\n' >> fake.profile
    prompts 'call: terminal/create {"command":"sh","args":["-c","sleep 300 & echo $! > kid; echo $$ > pid; exec sleep 300"]}' \
        'call: terminal/output {"terminalId":"term-1"}'
    run -0 acp-drive -p fake.profile -o out --keep snap/s
    cwd=$(jq -r .cwd out/run.json)
    for i in $(seq 50); do [ -s "$cwd/kid" ] && break; sleep 0.05; done
    [ -s "$cwd/pid" ] && [ -s "$cwd/kid" ]
    # gone, or a zombie its new parent has not reaped yet
    for p in "$(cat "$cwd/pid")" "$(cat "$cwd/kid")"; do
        state=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null || true)
        [ -z "$state" ] || [ "$state" = Z ] || { echo "$p still running ($state)"; false; }
    done
}

@test "drive-client: a file a terminal links outside the cwd is refused to fs/read_text_file" {
    printf 'client = fs-read terminal\n' >> fake.profile
    prompts 'call: terminal/create {"command":"ln","args":["-s","/etc/hostname","out"]}' \
        'call: terminal/wait_for_exit {"terminalId":"term-1"}' \
        'call: fs/read_text_file {"path":"@CWD@/out"}'
    run -0 acp-drive -p fake.profile -o out snap/s
    cwd=$(jq -r .cwd out/run.json)
    run -0 replies
    assert_line -n 2 "{\"id\":\"c3\",\"error\":{\"code\":-32602,\"message\":\"$cwd/out: a symbolic link on the way (links are not followed)\"}}"
}
