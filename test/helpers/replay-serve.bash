# Helpers for suites that run replay-serve in the background.
# serve_start SCRIPT [OPTIONS…]: starts it, sets RS_PID, RS_PORT, RS_URL; its
# stdout goes to $BATS_TEST_TMPDIR/rs.out and stderr to rs.err.
serve_start() {
    local script=$1; shift
    rm -f "$BATS_TEST_TMPDIR/rs.port"
    replay-serve --port-file "$BATS_TEST_TMPDIR/rs.port" "$@" "$script" \
        >"$BATS_TEST_TMPDIR/rs.out" 2>"$BATS_TEST_TMPDIR/rs.err" &
    RS_PID=$!
    local i
    for i in $(seq 500); do
        [ -s "$BATS_TEST_TMPDIR/rs.port" ] && break
        kill -0 "$RS_PID" 2>/dev/null || { cat "$BATS_TEST_TMPDIR/rs.err" >&2; return 1; }
        sleep 0.01
    done
    RS_PORT=$(cat "$BATS_TEST_TMPDIR/rs.port")
    RS_URL="http://127.0.0.1:$RS_PORT"
}
# serve_stop: SIGTERM, wait; sets RS_STATUS and RS_STDERR.
serve_stop() {
    kill -TERM "$RS_PID" 2>/dev/null || true
    RS_STATUS=0
    wait "$RS_PID" || RS_STATUS=$?
    RS_STDERR=$(cat "$BATS_TEST_TMPDIR/rs.err")
}
# post BODY [PATH]: one chat-completions request; the body on stdout.
post() {
    curl -sS --max-time 30 -X POST -H 'Content-Type: application/json' --data-binary "$1" "$RS_URL${2:-/chat/completions}"
}
# sse_decode: an SSE body on stdin → the provider-neutral entry it encodes.
sse_decode() {
    jq -R -s -c -f "$ROOT/test/helpers/sse-decode.jq"
}
