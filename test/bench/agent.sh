#!/usr/bin/env bash
# The reference agent: start-up to initialize response (target < 10 ms),
# a whole replayed tool turn, peak RSS. BENCH_RUNS (default 5) runs per
# figure, medians printed; the start-up figure uses 20x more runs. Prints,
# never asserts.
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${BENCH_TMP:-$(mktemp -d /tmp/acpsnap-bench.XXXXXX)}
RUNS=${BENCH_RUNS:-5}
AGENT=$PWD/${ACPSNAP_BUILD:-build/rel}/bin/acpsnap-agent
SCRIPT=$PWD/test/agent-data/tool-turn.jsonl
cc -O2 -o "$T/agent-start" test/bench/agent-start.c

read -r med p90 < <("$T/agent-start" $((RUNS * 20)) "$AGENT" --replay "$SCRIPT" 2>/dev/null)
printf 'start-up to initialize response: median %d.%03d ms, p90 %d.%03d ms (%d runs)\n' \
    $((med / 1000)) $((med % 1000)) $((p90 / 1000)) $((p90 % 1000)) $((RUNS * 20))
read -r med p90 < <("$T/agent-start" $((RUNS * 20)) /bin/cat)
printf '  floor (spawn /bin/cat, echo one line): median %d.%03d ms\n' $((med / 1000)) $((med % 1000))

# a whole replayed tool turn: initialize, session/new, prompt (bash tool), EOF
turn() {
    local d=$T/turn.$1 sid
    mkdir -p "$d"
    rm -f "$d/in"; mkfifo "$d/in"; : > "$d/out"
    ( cd "$d" && exec /usr/bin/time -f %M -o "$d/rss" env ACPSNAP_SESSIONS_ROOT="$d/s" \
        "$AGENT" --replay "$SCRIPT" < "$d/in" > "$d/out" 2>/dev/null ) &
    exec 8> "$d/in"
    printf '%s\n' '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}' \
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"$d\",\"mcpServers\":[]}}" >&8
    until [ "$(wc -l < "$d/out")" -ge 2 ]; do sleep 0.001; done
    sid=$(sed -n 2p "$d/out" | jq -r .result.sessionId)
    printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"$sid\",\"prompt\":[{\"type\":\"text\",\"text\":\"go\"}]}}" >&8
    until [ "$(wc -l < "$d/out")" -ge 6 ]; do sleep 0.001; done
    exec 8>&-
    wait
}
times=() rss=()
for ((i = 0; i < RUNS; i++)); do
    t0=$(date +%s%N); turn "$i"; t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 ))); rss+=($(cat "$T/turn.$i/rss"))
done
m=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p")
r=$(printf '%s\n' "${rss[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p")
printf 'replayed tool turn (2 model calls, 1 bash), driven from bash: median %d.%03d ms, peak RSS %d KiB\n' \
    $((m / 1000)) $((m % 1000)) "$r"
