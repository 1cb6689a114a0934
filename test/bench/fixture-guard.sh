#!/usr/bin/env bash
# fixture-guard wall time: on the corpus' acp-agent tree (52 scenarios), and on
# synthetic trees of 1,000 and 10,000 scenarios built from the corpus fixtures
# (one pin, every other row a hard-linked copy of a non-pin corpus scenario).
# Targets: under 50 ms for the corpus tree and for 1,000 scenarios, under
# 0.5 s for 10,000; each synthetic row is set against the walk floor (find
# -type f over the tree) and the read floor (find + cat of every file). Also
# sidecar-dedupe --check on the corpus.
set -euo pipefail
. test/bench/lib.sh
CORPUS=${ACPSNAP_CORPUS:-$(cd test/data/corpus && pwd)}
quietly() { "$@" >/dev/null 2>&1 || true; }   # the corpus tree has known gaps (exit 1)
rss() { /usr/bin/time -f '%M' -o "$BENCH_TMP/rss" "$@" >/dev/null 2>&1 || true; tail -1 "$BENCH_TMP/rss"; }
src=$CORPUS/acp-agent/snapshots

# synthetic DIR N: a tree of N scenarios. The rows and file lists of the pool
# (the corpus scenarios without a pin or child pins) are made once; each
# scenario is then a directory of hard links and a row with its name.
synthetic() {
    local syn=$1 n=$2 i s name t f
    rm -rf "$syn"; mkdir -p "$syn"
    cp -r "$src/text-turn" "$syn/pin"
    echo '{"name":"pin","hasModelTurn":true,"recorded":true,"pinsHeader":true}' > "$syn/scenarios.jsonl"
    local -a pool fl
    local -A row files
    mapfile -t pool < <(jq -r 'select((.pinsHeader // false) == false and (.pinsChildToolSchemas // []) == [] and (.pinsChildSystemPrompts // []) == []) | .name' "$src/scenarios.jsonl")
    for s in "${pool[@]}"; do
        row[$s]=$(jq -c --arg s "$s" 'select(.name == $s) | {name: "@NAME@", hasModelTurn, recorded} + (if .overridden then {overridden: true} else {} end)' "$src/scenarios.jsonl")
        fl=()
        for f in "$src/$s"/*; do [ -f "$f" ] && fl+=("$f"); done
        files[$s]=${fl[*]}
    done
    for ((i = 1; i < n; i++)); do
        s=${pool[$((i % ${#pool[@]}))]}
        printf -v name 's%04d-%s' "$i" "$s"
        t=${row[$s]}
        echo "${t/@NAME@/$name}" >> "$syn/scenarios.jsonl"
        mkdir "$syn/$name"
        [ -z "${files[$s]}" ] || ln ${files[$s]} "$syn/$name/"
    done
    fixture-guard "$syn" || { echo "bench: the synthetic tree of $n scenarios does not pass" >&2; exit 1; }
}

# row LABEL N TARGET: the guard over a synthetic tree of N scenarios, its floors.
row() {
    local syn=$BENCH_TMP/fg-synthetic-$2 t_syn t_find t_cat files bytes
    synthetic "$syn" "$2"
    files=$(find "$syn" -type f | wc -l)
    bytes=$(find "$syn" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
    t_syn=$(median_time fixture-guard "$syn")
    t_find=$(median_time find "$syn" -type f)
    t_cat=$(median_time sh -c "find '$syn' -type f -exec cat {} + > /dev/null")
    printf '%-44s %8.4f s  (target <= %s s)  rss %s KB\n' "fixture-guard synthetic ($1 scenarios)" "$t_syn" "$3" "$(rss fixture-guard "$syn")"
    printf '%-44s %8s    %s files, %s MB read\n' "  synthetic tree" "" "$files" "$(mbps "$bytes" 1)"
    printf '%-44s %8.4f s  (the guard takes %sx this)\n' "  find -type f over it (walk floor)" "$t_find" "$(ratio "$t_syn" "$t_find")"
    printf '%-44s %8.4f s  (the guard takes %sx this)\n' "  find + cat of every file (read floor)" "$t_cat" "$(ratio "$t_syn" "$t_cat")"
    rm -rf "$syn"
}

t_corpus=$(median_time quietly fixture-guard "$src")
t_disc=$(median_time quietly fixture-guard --discover "$CORPUS")
t_check=$(median_time quietly sidecar-dedupe --check "$src")
echo "medians of $BENCH_RUNS runs"
printf '%-44s %8.4f s  (target < 0.050 s)  rss %s KB\n' "fixture-guard acp-agent corpus (52)" "$t_corpus" "$(rss fixture-guard "$src")"
row 1,000 1000 0.050
row 10,000 10000 0.5
printf '%-44s %8.4f s\n' "fixture-guard --discover whole corpus" "$t_disc"
printf '%-44s %8.4f s\n' "sidecar-dedupe --check acp-agent corpus" "$t_check"
