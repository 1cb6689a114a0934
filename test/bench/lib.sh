# Shared benchmark helpers (sourced). Figures: medians of N runs of wall time,
# MB/s over the input size, peak RSS from /usr/bin/time.
BENCH_RUNS=${BENCH_RUNS:-5}
# median_time CMD… : prints the median wall seconds of BENCH_RUNS runs
median_time() {
    local i ts=()
    for ((i = 0; i < BENCH_RUNS; i++)); do
        local t0 t1
        t0=$(date +%s.%N)
        "$@" >/dev/null 2>&1 || { echo "bench: command failed: $*" >&2; return 1; }
        t1=$(date +%s.%N)
        ts+=("$(echo "$t1 - $t0" | bc -l)")
    done
    printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
# peak_rss_kb CMD… : peak resident set size of one run, in KB
peak_rss_kb() {
    /usr/bin/time -f '%M' -o "$BENCH_TMP/rss" "$@" >/dev/null 2>&1
    cat "$BENCH_TMP/rss"
}
mbps() { echo "scale=1; $1 / 1048576 / $2" | bc -l; }
ratio() { echo "scale=2; $1 / $2" | bc -l; }
gen_session() { # MB [seed] → path of a generated log in $BENCH_TMP
    [ -x "$BENCH_TMP/gen-session" ] || cc -O2 -o "$BENCH_TMP/gen-session" test/bench/gen-session.c
    local f="$BENCH_TMP/session-$1.jsonl"
    [ -f "$f" ] || "$BENCH_TMP/gen-session" "$@" > "$f"
    echo "$f"
}
