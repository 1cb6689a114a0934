# Shared benchmark helpers (sourced). Figures: medians of N runs of wall time,
# MB/s over the input size, peak RSS from /usr/bin/time.
BENCH_RUNS=${BENCH_RUNS:-5}
# median_time CMD… : prints the median wall seconds of BENCH_RUNS runs (the
# clock read without starting a process: bash's EPOCHREALTIME; a date(1)
# before and after would add one process start-up to every figure)
median_time() {
    local i t0 t1 ts=()
    for ((i = 0; i < BENCH_RUNS; i++)); do
        t0=${EPOCHREALTIME/[!0-9]/}   # (microseconds: the locale's radix character dropped)
        "$@" >/dev/null 2>&1 || { echo "bench: command failed: $*" >&2; return 1; }
        t1=${EPOCHREALTIME/[!0-9]/}
        ts+=($((t1 - t0)))
    done
    printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.6f\n", a[int((NR+1)/2)] / 1e6}'
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

# ---- The two inputs of throughput.sh and cmp.sh (see throughput.sh).
# Their run context: gen-session writes this header, and the corpus input
# takes text-turn's raw header, whose cwd every other capture's cwd is
# rewritten to (so every cwd spelling is scrubbed).
BENCH_CWD=/tmp/acp-snap-cwd-n0pjewjh
BENCH_SID=dc1cbd91-e169-4cbd-ac5b-70fb4189cb1b
BENCH_CORPUS=${ACPSNAP_CORPUS:-$PWD/test/data/corpus}
# bench_gen DIR MB: a synthetic persisted log of MB on stdout
bench_gen() {
    [ -x "$1/gen-session" ] || cc -O2 -o "$1/gen-session" test/bench/gen-session.c
    "$1/gen-session" "$2"
}
# bench_input NAME MB DIR: writes DIR/NAME-persisted.jsonl, its projection
# DIR/NAME-projected.jsonl (jsonl-project) and, for the corpus,
# DIR/NAME-transcript.jsonl; prints what it made. NAME: synthetic | corpus.
bench_input() {
    local name=$1 mb=$2 d=$3 f used=0 skipped=0 n i
    local p=$d/$name-persisted.jsonl
    case $name in
    synthetic) bench_gen "$d" "$mb" > "$p" ;;
    corpus)
        # every session log (fixtures and raw captures) replay-derive accepts
        # alone, unpacked, header dropped, cwds unified
        : > "$d/corpus-body"
        while read -r f; do
            if ! replay-derive -S "$f" > /dev/null 2>&1; then skipped=$((skipped + 1)); continue; fi
            jsonl-pack --unpack "$f" | tail -n +2 | _bench_unify >> "$d/corpus-body"
            used=$((used + 1))
        done < <(find "$BENCH_CORPUS" \( -path '*/snapshots/*' -o -path '*/raw/*' \) -name 'session*.jsonl' | LC_ALL=C sort)
        # one header, then the bodies repeated with fresh envelopes: seq from
        # 0 up through the whole file, time rising a ms every fourth event
        n=$(( (mb << 20) / $(stat -c %s "$d/corpus-body") + 1 ))
        { head -1 "$BENCH_CORPUS/acp-agent/raw/text-turn/session.jsonl"
          for ((i = 0; i < n; i++)); do cat "$d/corpus-body"; done | awk -v t0=1796028374883 '
            match($0, /^\{"type":"[^"]*","seq":-?[0-9]+,"time":-?[0-9]+/) {
                p = index($0, ",\"seq\":")
                $0 = substr($0, 1, p - 1) sprintf(",\"seq\":%d,\"time\":%.0f", s, t0 + int(s / 4)) substr($0, RLENGTH + 1)
                s++; print; next }
            { print "bench: no envelope on line " NR > "/dev/stderr"; exit 1 }'
        } > "$p"
        # the raw stdout transcripts, repeated
        find "$BENCH_CORPUS" -path '*/raw/*' -name stdout.raw.jsonl | LC_ALL=C sort | xargs cat | _bench_unify > "$d/corpus-stdout"
        n=$(( (mb << 20) / $(stat -c %s "$d/corpus-stdout") + 1 ))
        for ((i = 0; i < n; i++)); do cat "$d/corpus-stdout"; done > "$d/$name-transcript.jsonl"
        echo "corpus input: $used session logs ($skipped left out: replay-derive rejects them alone)," \
             "$(stat -c %s "$d/corpus-body") bytes of bodies, repeated; $(find "$BENCH_CORPUS" -path '*/raw/*' -name stdout.raw.jsonl | wc -l)" \
             "stdout transcripts, $(stat -c %s "$d/corpus-stdout") bytes, repeated"
        rm -f "$d/corpus-body" "$d/corpus-stdout" ;;
    *) echo "bench: unknown input $name" >&2; return 2 ;;
    esac
    jsonl-project "$p" > "$d/$name-projected.jsonl"
}
_bench_unify() { sed "s#/tmp/acp-snap-cwd-[a-z0-9]\{8\}#$BENCH_CWD#g"; }
