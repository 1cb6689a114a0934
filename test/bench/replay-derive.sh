#!/usr/bin/env bash
# replay-derive: throughput (MB/s of log read) and peak RSS on a 1 GB
# synthetic session log (BENCH_MB to change), beside the byte-scan floor,
# the codec filters on the same input and a jq pipeline; then peak RSS on one
# huge model call, to show memory follows the largest call, not the log.
# Medians of BENCH_RUNS runs (default 5). Prints, never asserts.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/${ACPSNAP_BUILD:-build/rel}/bin:$PATH"
export BENCH_TMP=${BENCH_TMP:-$(mktemp -d /tmp/acpsnap-bench.XXXXXX)}
. test/bench/lib.sh
MB=${BENCH_MB:-1024}

log=$(gen_session "$MB")
size=$(stat -c %s "$log")
proj=$BENCH_TMP/replay-derive-$MB.projected.jsonl
[ -s "$proj" ] || jsonl-project "$log" > "$proj"
psize=$(stat -c %s "$proj")
zlog=$BENCH_TMP/replay-derive-$MB.jsonl.zst
[ -s "$zlog" ] || zstd -q -1 -T0 -c "$log" > "$zlog"
echo "input: $(mbps "$size" 1) MB persisted, unpacked; $(mbps "$psize" 1) MB projected and packed;" \
     "$(replay-derive --count "$log") model calls; medians of $BENCH_RUNS runs"

# row LABEL BYTES CMD…: time, MB/s over BYTES, ratio to the byte scan, peak RSS
row() {
    local label=$1 bytes=$2 t
    shift 2
    t=$(median_time "$@")
    printf '%-40s %7.2f s %8s MB/s  %6sx byte-scan time  rss %6s KB\n' "$label" "$t" "$(mbps "$bytes" "$t")" \
        "$(ratio "$t" "$t_scan")" "$(peak_rss_kb "$@")"
}
t_scan=$(median_time wc -l "$log")
printf '%-40s %7.2f s %8s MB/s\n' "byte scan (wc -l)" "$t_scan" "$(mbps "$size" "$t_scan")"
row "replay-derive (persisted)" "$size" replay-derive "$log"
row "replay-derive --count (persisted)" "$size" replay-derive --count "$log"
row "replay-derive (projected, packed)" "$psize" replay-derive "$proj"
row "replay-derive (zstd; MB/s of decoded)" "$size" replay-derive "$zlog"
row "jsonl-project (same input)" "$size" jsonl-project "$log"
row "jsonl-pack (same input)" "$size" jsonl-pack "$log"

# jq doing only the chunk extraction (no call splitting) on a 64 MB prefix.
head -c $((64 << 20)) "$log" | sed '$d' > "$BENCH_TMP/rd-prefix.jsonl"
prefix=$BENCH_TMP/rd-prefix.jsonl
t_d=$(median_time replay-derive "$prefix")
t_jq=$(BENCH_RUNS=3 median_time jq -c 'select(.type == "assistant/chunk") | .data.chunk' "$prefix")
echo "64 MB prefix: replay-derive $(mbps "$(stat -c %s "$prefix")" "$t_d") MB/s," \
     "jq select(assistant/chunk) $(mbps "$(stat -c %s "$prefix")" "$t_jq") MB/s (median of 3): replay-derive $(ratio "$t_jq" "$t_d")x jq"

# One model call of ~130 MB: peak RSS is about one copy of the call.
one=$BENCH_TMP/replay-derive-onecall.jsonl
[ -s "$one" ] || awk 'BEGIN {
    print "{\"type\":\"session\",\"id\":\"b\",\"createdAt\":1}"
    pad = sprintf("%600s", ""); gsub(/ /, "x", pad)
    for (i = 0; i < 210000; i++)
        print "{\"type\":\"assistant/chunk\",\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"" pad "\"}}}"
    print "{\"type\":\"assistant/chunk\",\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}}}"
}' > "$one"
call=$(replay-derive "$one" | wc -c)
echo "one call of $(mbps "$call" 1) MB (log $(mbps "$(stat -c %s "$one")" 1) MB): peak rss $(peak_rss_kb replay-derive "$one") KB"
