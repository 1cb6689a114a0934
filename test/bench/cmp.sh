#!/usr/bin/env bash
# make bench-cmp [BASE=<git rev>]: do the filters still write what BASE's did?
# usage: test/bench/cmp.sh [BASE]   (default HEAD: the committed tree)
#
# Builds BASE's jsonl-pack, jsonl-project, replay-derive and scrub in a
# temporary git worktree (removed afterwards), then runs those old binaries
# and the build under test (ACPSNAP_BUILD, default build/rel) over every
# session log and transcript of the corpus and over both bench inputs
# (throughput.sh's synthetic and corpus inputs, BENCH_MB each), and compares
# stdout, stderr and exit status byte for byte. Prints "N outputs compared,
# M identical" and every difference; exits 1 on a difference, 2 on trouble.
# Knobs (environment):
#   BENCH_MB        size of each bench input, MB (default 100)
#   BENCH_CMP_OLD   a directory of already built old tools: BASE is not built
#   BENCH_CMP_NEW   the directory of the new tools (default $ACPSNAP_BUILD/bin)
#   ACPSNAP_CORPUS  another copy of the corpus (default test/data/corpus)
set -uo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 2
BASE=${1:-HEAD}
MB=${BENCH_MB:-100}
NEW=$(cd "${BENCH_CMP_NEW:-${ACPSNAP_BUILD:-build/rel}/bin}" && pwd) || exit 2
TOOLS=(jsonl-pack jsonl-project replay-derive scrub)
for t in "${TOOLS[@]}"; do [ -x "$NEW/$t" ] || { echo "bench-cmp: no $NEW/$t (make all first)" >&2; exit 2; }; done
T=$(mktemp -d "${BENCH_TMP:-/tmp}/bench-cmp.XXXXXX")
wt=
cleanup() {
    [ -z "$wt" ] || git worktree remove --force "$wt" 2> /dev/null || true
    rm -rf "$T"
    # only if the remove failed: drop the entry of the now missing directory
    [ -z "$wt" ] || ! git worktree list --porcelain | grep -qxF "worktree $wt" || git worktree prune

}
trap cleanup EXIT
trap 'exit 2' INT TERM

if [ -n "${BENCH_CMP_OLD:-}" ]; then
    OLD=$(cd "$BENCH_CMP_OLD" && pwd) || exit 2
    echo "bench-cmp: old tools from $OLD, new from $NEW"
else
    rev=$(git rev-parse --verify --quiet "$BASE^{commit}") || { echo "bench-cmp: no such revision: $BASE" >&2; exit 2; }
    wt=$T/base
    git worktree add --detach --quiet "$wt" "$rev" || exit 2
    echo "bench-cmp: building $BASE ($(git rev-parse --short "$rev")) in a temporary worktree"
    make -s -C "$wt" "${TOOLS[@]/#/build/rel/bin/}" > "$T/build.log" 2>&1 \
        || make -s -C "$wt" all > "$T/build.log" 2>&1 \
        || { tail -20 "$T/build.log"; echo "bench-cmp: $BASE does not build" >&2; exit 2; }
    OLD=$wt/build/rel/bin
    echo "bench-cmp: old tools from $BASE, new from $NEW"
fi
for t in "${TOOLS[@]}"; do [ -x "$OLD/$t" ] || { echo "bench-cmp: $BASE has no $t" >&2; exit 2; }; done

# same_output LABEL TOOL ARGS…: runs TOOL ARGS with the old tools first in
# PATH, then the new, both under the same name and in the same directory (so
# their messages can match), and compares exit status, stdout and stderr.
n=0 same=0 differ=0
same_output() {
    local label=$1 orc=0 nrc=0 what=()
    shift
    n=$((n + 1))
    env PATH="$OLD:$PATH" "$@" > "$T/old.out" 2> "$T/old.err" < /dev/null || orc=$?
    env PATH="$NEW:$PATH" "$@" > "$T/new.out" 2> "$T/new.err" < /dev/null || nrc=$?
    [ "$orc" = "$nrc" ] || what+=("exit $orc -> $nrc")
    cmp -s "$T/old.out" "$T/new.out" || what+=("stdout $(cmp "$T/old.out" "$T/new.out" 2>&1 | head -1 | sed "s/^.* differ: /differs at /")")
    cmp -s "$T/old.err" "$T/new.err" || what+=("stderr: $(diff "$T/old.err" "$T/new.err" | head -5 | tr '\n' ' ')")
    if [ "${#what[@]}" = 0 ]; then
        same=$((same + 1))
    else
        differ=$((differ + 1))
        printf 'DIFFERS  %s: %s\n' "$label" "$*"
        printf '         %s\n' "${what[@]}"
    fi
}

# The corpus: every session log (snapshots/ fixtures, raw/ captures) and
# every transcript (raw stdout.raw.jsonl, snapshots' stdout.expected.jsonl).
CORPUS=${ACPSNAP_CORPUS:-$PWD/test/data/corpus}
rel() { echo "${1#"$CORPUS"/}"; }
while read -r f; do
    r=$(rel "$f")
    same_output "$r" jsonl-project "$f"
    same_output "$r" jsonl-pack "$f"
    same_output "$r" jsonl-pack --unpack "$f"
    same_output "$r" jsonl-pack --check "$f"
    same_output "$r" replay-derive "$f"
    same_output "$r" replay-derive --no-seed-skip "$f"
    o=$(dirname "$f")/replay.override.json
    [ ! -f "$o" ] || same_output "$r" replay-derive --override "$o" "$f"
    case $f in
        */raw/*)
            same_output "$r" scrub --session --context "$(dirname "$f")/run.json" "$f"
            same_output "$r" scrub --fixture "$f" ;;
        *)  same_output "$r" scrub --session "$f"
            same_output "$r" jsonl-project --restore "$f" ;;
    esac
done < <(find "$CORPUS" \( -path '*/snapshots/*' -o -path '*/raw/*' \) -name 'session*.jsonl' | sort)
ncorpus=$n
while read -r f; do
    r=$(rel "$f")
    case $f in
        */raw/*) same_output "$r" scrub --stdout --context "$(dirname "$f")/run.json" "$f" ;;
        *) same_output "$r" scrub --stdout "$f" ;;
    esac
done < <(find "$CORPUS" \( -path '*/raw/*' -name stdout.raw.jsonl -o -path '*/snapshots/*' -name stdout.expected.jsonl \) | sort)
echo "corpus: $n outputs compared ($ncorpus of session logs, $((n - ncorpus)) of transcripts)"

# The bench inputs, built by the new tools (the same bytes for both).
. test/bench/lib.sh
PATH="$NEW:$PATH"
for input in synthetic corpus; do
    bench_input "$input" "$MB" "$T" > /dev/null || { echo "bench-cmp: cannot build the $input input" >&2; exit 2; }
    p=$T/$input-persisted.jsonl q=$T/$input-projected.jsonl s=$T/$input-transcript.jsonl
    [ -f "$s" ] || s=$p
    same_output "$input input" jsonl-pack "$p"
    same_output "$input input" jsonl-project "$p"
    same_output "$input input" jsonl-pack --unpack "$q"
    same_output "$input input" scrub --session --cwd "$BENCH_CWD" --session-id "$BENCH_SID" "$p"
    same_output "$input input" scrub --stdout --cwd "$BENCH_CWD" --session-id "$BENCH_SID" "$s"
    same_output "$input input" replay-derive "$p"
    rm -f "$p" "$q" "$s"
done
rm -f "$T"/old.* "$T"/new.*

echo "$n outputs compared, $same identical$([ "$differ" = 0 ] || echo ", $differ DIFFER")"
[ "$differ" = 0 ]
