#!/usr/bin/env bash
# Throughput of the streaming filters against floors, and their memory.
#
# Knobs (environment):
#   BENCH_RUNS    runs per figure; every figure is the median (default 5)
#   BENCH_MB      size of each input in MB (default 100; MB = 2^20 bytes,
#                 GB/s = 1024 MB/s)
#   BENCH_BIG_MB  size of the stream of the memory check (default 1024)
#   BENCH_JQ_MB   size of the slice the jq programs run on (default 2)
#   BENCH_OUT     the machine-readable table, TSV (default build/bench.tsv)
#   BENCH_INPUTS  which inputs: "synthetic corpus" (default both)
#   ACPSNAP_CORPUS  another copy of the corpus (default test/data/corpus)
#
# Two inputs, each measured in one run (floors and filters alike):
#   synthetic  test/bench/gen-session.c at BENCH_MB, a persisted log
#   corpus     every session log of the corpus (snapshots/ fixtures and raw/
#              captures) unpacked, given fresh envelopes ("seq" renumbered
#              across the whole file, "time" rising) and repeated to BENCH_MB
#              under one raw capture's header: one valid persisted log. Logs
#              replay-derive rejects on their own (a model call without a
#              finish chunk) are left out. scrub --stdout reads the corpus'
#              raw stdout transcripts repeated to BENCH_MB; on the synthetic
#              input it reads the synthetic log as a transcript.
# Per filter row: MB/s and seconds, then its speed over each floor's speed on
# the same bytes: cat, wc -l (a byte scan), zstd -d (decompressing the same
# bytes, compressed beforehand at zstd's default level, untimed) and the
# equivalent jq program. The three floors of a row are timed in the same
# rounds as its filter (filter, cat, wc -l, zstd -d, again), so that the
# ratios hold on a machine whose speed drifts (a shared VM's can move by
# half within minutes); the floor lines under the table are each file's
# first timing. jq runs on a BENCH_JQ_MB slice of the same input and
# its rate is scaled to the whole by bytes. Then peak RSS of every filter on
# the BENCH_MB synthetic input and on a BENCH_BIG_MB stream through a fifo.
# Prints and writes figures; never fails on speed (it fails when a filter
# fails on its input).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
export PATH="$PWD/${ACPSNAP_BUILD:-build/rel}/bin:$PATH"
# scratch: its own directory (under BENCH_TMP when given), removed at exit
T=$(mktemp -d "${BENCH_TMP:-/tmp}/throughput.XXXXXX")
trap 'rm -rf "$T"' EXIT
RUNS=${BENCH_RUNS:-5}
MB=${BENCH_MB:-100}
BIG_MB=${BENCH_BIG_MB:-1024}
JQ_MB=${BENCH_JQ_MB:-2}
JQ_RUNS=$(( RUNS < 3 ? RUNS : 3 ))
OUT=${BENCH_OUT:-build/bench.tsv}
INPUTS=${BENCH_INPUTS:-synthetic corpus}
. test/bench/lib.sh      # bench_input, bench_gen, BENCH_CWD, BENCH_SID
CWD=$BENCH_CWD SID=$BENCH_SID
mkdir -p "$(dirname "$OUT")"

# ---- measuring

# med_time RUNS CMD…: median wall seconds of RUNS runs; a failing run aborts.
med_time() {
    local runs=$1 i t0 t1 rc ts=()
    shift
    for ((i = 0; i < runs; i++)); do
        t0=$EPOCHREALTIME
        rc=0; "$@" > /dev/null 2> "$T/err" || rc=$?
        t1=$EPOCHREALTIME
        [ "$rc" = 0 ] || { echo "bench: exit $rc: $* : $(head -c 300 "$T/err")" >&2; exit 1; }
        ts+=("$t0 $t1")
    done
    printf '%s\n' "${ts[@]}" | awk '{ print $2 - $1 }' | sort -g | awk '{ a[NR] = $1 } END { printf "%.6f\n", a[int((NR + 1) / 2)] }'
}
# peak_rss CMD…: peak resident set of one run, KB
# med_beside RUNS FILE CMD...: CMD on FILE, then cat, wc -l and zstd -d of
# the same bytes, RUNS rounds in turn; the four medians. A floor timed in
# the same rounds as the filter keeps the ratios honest on a machine whose
# speed drifts from minute to minute (a shared VM).
med_beside() {
    local runs=$1 f=$2 i t0 t1 rc k
    shift 2
    local -a tf=() tc=() tw=() tz=()
    for ((i = 0; i < runs; i++)); do
        t0=$EPOCHREALTIME; rc=0; "$@" "$f" > /dev/null 2> "$T/err" || rc=$?; t1=$EPOCHREALTIME
        [ "$rc" = 0 ] || { echo "bench: exit $rc: $* : $(head -c 300 "$T/err")" >&2; exit 1; }
        tf+=("$t0 $t1")
        t0=$EPOCHREALTIME; cat "$f" > /dev/null; t1=$EPOCHREALTIME; tc+=("$t0 $t1")
        t0=$EPOCHREALTIME; wc -l "$f" > /dev/null; t1=$EPOCHREALTIME; tw+=("$t0 $t1")
        t0=$EPOCHREALTIME; zstd -q -d -c "$f.zst" > /dev/null; t1=$EPOCHREALTIME; tz+=("$t0 $t1")
    done
    for k in tf tc tw tz; do
        local -n a=$k
        printf '%s\n' "${a[@]}" | awk '{ print $2 - $1 }' | sort -g | awk '{ a[NR] = $1 } END { printf "%.6f ", a[int((NR + 1) / 2)] }'
    done
    echo
}
peak_rss() {
    /usr/bin/time -f %M -o "$T/rss" "$@" > /dev/null 2> "$T/err" \
        || { echo "bench: failed: $* : $(head -c 300 "$T/err")" >&2; exit 1; }
    tail -1 "$T/rss"
}
bytes() { stat -c %s "$1"; }
mbs() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / 1048576 / s }'; }
# slice FILE: its first JQ_MB, cut at a line end (cached)
slice() {
    local s=$1.slice
    [ -s "$s" ] || head -c $((JQ_MB << 20)) "$1" | sed '$d' > "$s"
    echo "$s"
}
# floors FILE: "cat_s wc_s zstd_s" for FILE (cached per file)
floors() {
    local f=$1
    if [ ! -s "$f.floors" ]; then
        [ -s "$f.zst" ] || zstd -q -c < "$f" > "$f.zst" || { echo "bench: zstd failed on $f" >&2; exit 1; }
        echo "$(med_time "$RUNS" cat "$f") $(med_time "$RUNS" wc -l "$f") $(med_time "$RUNS" zstd -q -d -c "$f.zst")" > "$f.floors"
        read -r c w z < "$f.floors"
        printf '  %-10s floors on %-26s %6.1f MB: cat %s MB/s, wc -l %s MB/s, zstd -d %s MB/s\n' "$input" "$(basename "$f")" \
            "$(awk -v b="$(bytes "$f")" 'BEGIN { print b / 1048576 }')" "$(mbs "$(bytes "$f")" "$c")" \
            "$(mbs "$(bytes "$f")" "$w")" "$(mbs "$(bytes "$f")" "$z")" >> "$T/floor-lines"
    fi
    cat "$f.floors"
}

# ---- the table

# name | input kind (p: persisted, q: projected+packed, s: transcript) | target MB/s | jq program
ROWS=(
    "jsonl-pack|p|1024|jq -c del(.seq,.time)"
    "jsonl-project|p|1024|jq -c del(.seq,.time)"
    "jsonl-pack --unpack|q|800|jq -c ."
    "scrub --session|p|600|jq -c -f scrub.jq"
    "scrub --stdout|s|600|jq -c -f scrub.jq"
    "replay-derive|p|1024|jq -c select(.type==\"assistant/chunk\")"
)
cmd_of() { # tool name → its command line (an array in CMD)
    case $1 in
        "scrub --session") CMD=(scrub --session --cwd "$CWD" --session-id "$SID") ;;
        "scrub --stdout") CMD=(scrub --stdout --cwd "$CWD" --session-id "$SID") ;;
        *) read -ra CMD <<< "$1" ;;
    esac
}
jq_of() { # row's jq label → JQ array
    case $1 in
        "jq -c del(.seq,.time)") JQ=(jq -c 'del(.seq,.time)') ;;
        "jq -c .") JQ=(jq -c .) ;;
        "jq -c -f scrub.jq") JQ=(jq -c -f "$T/scrub.jq") ;;
        *) JQ=(jq -c 'select(.type=="assistant/chunk")') ;;
    esac
}
# The comparable jq scrub: every string through the cwd and UUID regexes,
# envelopes dropped and times zeroed.
cat > "$T/scrub.jq" <<EOF
def s: gsub("(?<![A-Za-z0-9._-])$CWD(?=[/\\\\\\\\\\\\s\"'<>(),;:!?=]|\$)"; "{{cwd}}")
     | gsub("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"; "{{sessionId}}");
(if .type == "session" then .createdAt = 0 else del(.seq, .time, .seq0, .time0) end)
| walk(if type == "string" then s else . end)
EOF

printf 'input\ttool\tbytes\tseconds\tMB_s\tx_cat\tx_wc_l\tx_zstd_d\tx_jq\ttarget_MB_s\tmet\n' > "$OUT"
: > "$T/floor-lines"
: > "$T/table"
t_start=$EPOCHREALTIME
for input in $INPUTS; do
    p=$T/$input-persisted.jsonl q=$T/$input-projected.jsonl s=$T/$input-transcript.jsonl
    if [ "$input" = corpus ] && [ ! -d "$BENCH_CORPUS" ]; then echo "corpus input: no corpus at $BENCH_CORPUS, skipped"; continue; fi
    bench_input "$input" "$MB" "$T"
    [ -f "$s" ] || s=$p
    # every filter must accept its input before anything is timed
    for row in "${ROWS[@]}"; do
        IFS='|' read -r tool kind _ _ <<< "$row"; cmd_of "$tool"; f=${!kind}
        "${CMD[@]}" "$f" > /dev/null 2> "$T/err" || { echo "bench: $tool rejects the $input input: $(head -c 300 "$T/err")" >&2; exit 1; }
    done
    echo "$input input: $(mbs "$(bytes "$p")" 1) MB persisted ($(wc -l < "$p") lines), $(mbs "$(bytes "$q")" 1) MB projected and packed," \
         "$(mbs "$(bytes "$s")" 1) MB transcript; $(replay-derive --count "$p") model calls; every filter accepts them"
    for row in "${ROWS[@]}"; do
        IFS='|' read -r tool kind target jqlabel <<< "$row"; cmd_of "$tool"; jq_of "$jqlabel"; f=${!kind}
        floors "$f" > /dev/null   # (the floor lines below; the ratios use the floors timed beside the filter)
        b=$(bytes "$f")
        read -r t tc tw tz <<< "$(med_beside "$RUNS" "$f" "${CMD[@]}")"
        sl=$(slice "$f")
        tj=$(med_time "$JQ_RUNS" "${JQ[@]}" "$sl")
        awk -v OFS='\t' -v inp="$input" -v tool="$tool" -v b="$b" -v t="$t" -v tc="$tc" -v tw="$tw" -v tz="$tz" \
            -v sb="$(bytes "$sl")" -v tj="$tj" -v target="$target" -v jq="$jqlabel" -v tsv="$OUT" 'BEGIN {
            r = b / 1048576 / t; jr = sb / 1048576 / tj
            xc = tc / t; xw = tw / t; xz = tz / t; xj = r / jr
            met = r >= target ? "met" : "MISSED"
            printf "%s\t%s\t%d\t%.4f\t%.1f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%s\n", inp, tool, b, t, r, xc, xw, xz, xj, target, met >> tsv
            tg = target >= 1024 ? sprintf(">= %g GB/s", target / 1024) : sprintf(">= %d MB/s", target)
            printf "%-9s %-20s %7.1f %7.3f %8.1f %6.2f %6.2f %7.2f %7.1f  %-12s %-6s  (jq: %s)\n", inp, tool, b / 1048576, t, r, xc, xw, xz, xj, tg, met, jq
        }' >> "$T/table"
    done
done

echo
echo "Filter throughput: medians of $RUNS runs, all rows of an input in one run."
echo "MB/s of the filter's input; xcat, xwc-l, xzstd-d, xjq = filter speed / floor speed on the same bytes"
echo "(xcat, xwc-l, xzstd-d: each floor timed in the same rounds as the filter, between its runs)"
echo "(xjq: jq on the first $JQ_MB MB of the same input, median of $JQ_RUNS runs, scaled by bytes)."
printf '%-9s %-20s %7s %7s %8s %6s %6s %7s %7s  %-12s %-6s\n' input tool MB s MB/s xcat xwc-l xzstd-d xjq target ""
cat "$T/table"
cat "$T/floor-lines"
printf 'table written to %s (%s s of measuring)\n' "$OUT" "$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')"

# ---- memory: every filter on BENCH_MB and on a BENCH_BIG_MB stream
echo
echo "Peak RSS (KB), synthetic input: $MB MB file vs a $BIG_MB MB stream through a fifo"
syn=$T/synthetic-persisted.jsonl synq=$T/synthetic-projected.jsonl
[ -s "$syn" ] || bench_input synthetic "$MB" "$T"
# The big stream: generated once, teed into one fifo per filter (through
# jsonl-project for --unpack), all filters reading at once.
i=0 outs=()
for row in "${ROWS[@]}"; do
    IFS='|' read -r tool kind _ _ <<< "$row"; cmd_of "$tool"
    mkfifo "$T/big.$i"
    /usr/bin/time -f %M -o "$T/big.$i.rss" "${CMD[@]}" "$T/big.$i" > /dev/null 2> "$T/big.$i.err" &
    if [ "$kind" = q ]; then
        mkfifo "$T/big.$i.in"; jsonl-project "$T/big.$i.in" > "$T/big.$i" & outs+=("$T/big.$i.in")
    else outs+=("$T/big.$i"); fi
    i=$((i + 1))
done
t0=$EPOCHREALTIME
bench_gen "$T" "$BIG_MB" | tee -p "${outs[@]}" > /dev/null
wait
echo "  (the $BIG_MB MB stream: generated once in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s, read by all six filters at once)"
i=0
for row in "${ROWS[@]}"; do
    IFS='|' read -r tool kind _ _ <<< "$row"; cmd_of "$tool"
    small=$syn; [ "$kind" = q ] && small=$synq
    r1=$(peak_rss "${CMD[@]}" "$small")
    r2=$(tail -1 "$T/big.$i.rss")
    [ ! -s "$T/big.$i.err" ] || { echo "bench: $tool on the stream: $(head -c 300 "$T/big.$i.err")" >&2; exit 1; }
    awk -v tool="$tool" -v a="$r1" -v b="$r2" -v mb="$MB" -v big="$BIG_MB" 'BEGIN {
        printf "  %-20s %8d KB on %d MB  %8d KB on %d MB  %s\n", tool, a, mb, b, big, (b <= a * 1.25 + 1024 ? "flat" : "NOT flat") }'
    rm -f "$T/big.$i"*
    i=$((i + 1))
done
# replay-derive holds one model call at a time: one call of ~130 MB
one=$T/onecall.jsonl
awk 'BEGIN {
    print "{\"type\":\"session\",\"id\":\"b\",\"createdAt\":1}"
    pad = sprintf("%600s", ""); gsub(/ /, "x", pad)
    for (i = 0; i < 210000; i++)
        print "{\"type\":\"assistant/chunk\",\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"" pad "\"}}}"
    print "{\"type\":\"assistant/chunk\",\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}}}"
}' > "$one"
printf '  replay-derive on one model call of %s MB: %d KB (memory follows the largest call, not the log)\n' \
    "$(mbs "$(replay-derive "$one" | wc -c)" 1)" "$(peak_rss replay-derive "$one")"
rm -f "$one"
