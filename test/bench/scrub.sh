#!/usr/bin/env bash
# scrub throughput and peak RSS on ~100 MB inputs built from the corpus' real
# raw captures (cwds unified to one run's cwd so every cwd spelling hits),
# beside a jq program doing a comparable scrub (regex substitutions on every
# string). BENCH_SCRUB_MB (default 100) sets the input size, BENCH_RUNS
# (default 5) the runs per figure (medians). Prints, never asserts.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/${ACPSNAP_BUILD:-build/rel}/bin:$PATH"
T=${BENCH_TMP:-$(mktemp -d /tmp/acpsnap-bench.XXXXXX)}
MB=${BENCH_SCRUB_MB:-100}
RUNS=${BENCH_RUNS:-5}
CORPUS=${ACPSNAP_CORPUS:-$PWD/test/data/corpus}
RAW=$CORPUS/acp-agent/raw
[ -d "$RAW" ] || { echo "scrub bench: no corpus at $CORPUS, skipped"; exit 0; }

CWD=/tmp/acp-snap-cwd-bench123
SID=dc1cbd91-e169-4cbd-ac5b-70fb4189cb1b
unify() { sed "s#/tmp/acp-snap-cwd-[a-z0-9]\{8\}#$CWD#g"; }

# Inputs: raw transcripts (resp. raw log bodies under one header) repeated to $MB.
stdout_in=$T/scrub-stdout-$MB.jsonl
session_in=$T/scrub-session-$MB.jsonl
if [ ! -s "$stdout_in" ]; then
    cat "$RAW"/*/stdout.raw.jsonl | unify > "$T/one-stdout"
    n=$(( (MB << 20) / $(stat -c %s "$T/one-stdout") + 1 ))
    for ((i = 0; i < n; i++)); do cat "$T/one-stdout"; done > "$stdout_in"
fi
if [ ! -s "$session_in" ]; then
    for f in "$RAW"/*/session*.jsonl; do tail -n +2 "$f"; done | unify > "$T/one-body"
    n=$(( (MB << 20) / $(stat -c %s "$T/one-body") + 1 ))
    { head -1 "$RAW/text-turn/session.jsonl" | unify
      for ((i = 0; i < n; i++)); do cat "$T/one-body"; done; } > "$session_in"
fi

# measure LABEL INPUT_BYTES CMD…: median wall time of $RUNS runs, median peak RSS.
measure() {
    local label=$1 in=$2 i t0 t1
    shift 2
    local times=() rss=()
    for ((i = 0; i < RUNS; i++)); do
        t0=$(date +%s%N)
        /usr/bin/time -f %M -o "$T/rss" "$@" > /dev/null
        t1=$(date +%s%N)
        times+=($(( (t1 - t0) / 1000 )))
        rss+=($(cat "$T/rss"))
    done
    local tm r
    tm=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p")
    r=$(printf '%s\n' "${rss[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p")
    awk -v l="$label" -v b="$in" -v us="$tm" -v kb="$r" 'BEGIN {
        printf "%-46s %8.1f MB/s  %7.3f s  peak RSS %7.1f MB\n", l, b / 1048576 / (us / 1e6), us / 1e6, kb / 1024 }'
    awk -v b="$in" -v us="$tm" 'BEGIN { printf "%.3f\n", b / 1048576 / (us / 1e6) }' > "$T/last-mbs"
}

sb=$(stat -c %s "$stdout_in")
lb=$(stat -c %s "$session_in")
printf 'inputs: ACP transcript %d MB, session log %d MB (corpus raw captures repeated), median of %d runs\n' \
    $((sb >> 20)) $((lb >> 20)) "$RUNS"

measure "byte-scan floor (wc -l, transcript)" "$sb" wc -l "$stdout_in"
measure "scrub --stdout" "$sb" scrub --stdout --cwd "$CWD" --session-id "$SID" "$stdout_in"
so=$(cat "$T/last-mbs")
measure "byte-scan floor (wc -l, session log)" "$lb" wc -l "$session_in"
measure "scrub --session" "$lb" scrub --session --cwd "$CWD" --session-id "$SID" "$session_in"
ss=$(cat "$T/last-mbs")
zin=$T/scrub-session-$MB.jsonl.zst
[ -s "$zin" ] || zstd -q -1 -T0 -c "$session_in" > "$zin"
measure "scrub --session (zstd input)" "$lb" scrub --session --cwd "$CWD" --session-id "$SID" "$zin"

# The comparable jq scrub: every string through the cwd and UUID regexes,
# envelopes dropped and times zeroed. jq manages a few MB/s at best here, so
# it runs on a 2 MB slice and its rate is scaled from that.
cat > "$T/scrub.jq" <<EOF
def s: gsub("(?<![A-Za-z0-9._-])$CWD(?=[/\\\\\\\\\\\\s\"'<>(),;:!?=]|\$)"; "{{cwd}}")
     | gsub("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"; "{{sessionId}}");
(if .type == "session" then .createdAt = 0 else del(.seq, .time, .seq0, .time0) end)
| walk(if type == "string" then s else . end)
EOF
head -c $((2 << 20)) "$session_in" | sed '$d' > "$T/slice.jsonl"
pb=$(stat -c %s "$T/slice.jsonl")
RUNS_SAVE=$RUNS; RUNS=1
measure "jq regex scrub (2 MB slice, 1 run)" "$pb" jq -c -f "$T/scrub.jq" "$T/slice.jsonl"
jq_mbs=$(cat "$T/last-mbs")
RUNS=$RUNS_SAVE
measure "scrub --session (same 2 MB slice)" "$pb" scrub --session --cwd "$CWD" --session-id "$SID" "$T/slice.jsonl"
awk -v so="$so" -v ss="$ss" -v j="$jq_mbs" 'BEGIN {
    printf "ratios: scrub --stdout / jq %.0fx; scrub --session / jq %.0fx (target: >= 300 MB/s for both built-in modes)\n", so / j, ss / j }'
[ -n "${BENCH_TMP:-}" ] || rm -rf "$T"
