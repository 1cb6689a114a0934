#!/usr/bin/env bash
# Codec throughput: jsonl-pack, jsonl-pack --unpack and jsonl-project on a
# 100 MB synthetic session log, beside cat, a byte scan (wc -l) and the jq
# CLI doing the projection's envelope drop, in one run; then peak RSS on
# 100 MB and on a 1 GB stream (flat memory).
set -euo pipefail
BENCH_RUNS=${BENCH_RUNS:-7}
. test/bench/lib.sh
raw=$(gen_session 100)
packed="$BENCH_TMP/packed-100.jsonl"
jsonl-pack "$raw" > "$packed"
size=$(stat -c %s "$raw")
psize=$(stat -c %s "$packed")
echo "input: $(mbps "$size" 1) MB persisted, unpacked ($(wc -l < "$raw") lines); packed form $(mbps "$psize" 1) MB; medians of $BENCH_RUNS runs; text in the corpus' proportions of escapes and non-ASCII"
t_cat=$(median_time cat "$raw")
t_scan=$(median_time wc -l "$raw")
t_jq=$(BENCH_RUNS=3 median_time jq -c 'del(.seq,.time)' "$raw")
printf '%-28s %8s s %9s MB/s\n' "cat" "$t_cat" "$(mbps "$size" "$t_cat")"
printf '%-28s %8s s %9s MB/s\n' "byte scan (wc -l)" "$t_scan" "$(mbps "$size" "$t_scan")"
printf '%-28s %8s s %9s MB/s  (median of 3)\n' "jq -c 'del(.seq,.time)'" "$t_jq" "$(mbps "$size" "$t_jq")"
for cmd in "jsonl-pack" "jsonl-project" "jsonl-pack --unpack"; do
    in=$raw; s=$size
    [ "$cmd" = "jsonl-pack --unpack" ] && { in=$packed; s=$psize; }
    # shellcheck disable=SC2086
    t=$(median_time $cmd "$in")
    r=$(mbps "$s" "$t")
    printf '%-28s %8s s %9s MB/s  %5sx jq  %5sx byte scan  rss %s KB\n' "$cmd" "$t" "$r" \
        "$(ratio "$t_jq" "$t")" "$(ratio "$t_scan" "$t")" "$(peak_rss_kb $cmd "$in")"
done
big=$BENCH_TMP/session-1024.fifo
rm -f "$big"; mkfifo "$big"
[ -x "$BENCH_TMP/gen-session" ] || cc -O2 -o "$BENCH_TMP/gen-session" test/bench/gen-session.c
"$BENCH_TMP/gen-session" 1024 > "$big" &
t0=$(date +%s.%N)
rss=$(peak_rss_kb jsonl-project "$big")
t1=$(date +%s.%N)
wait
echo "jsonl-project on a 1 GB stream: peak rss $rss KB (vs $(peak_rss_kb jsonl-project "$raw") KB on 100 MB), $(mbps $((1024 * 1048576)) "$(echo "$t1 - $t0" | bc -l)") MB/s including generation"
