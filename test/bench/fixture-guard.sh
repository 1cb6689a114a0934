#!/usr/bin/env bash
# fixture-guard wall time: on the corpus' acp-agent tree (52 scenarios), and on
# a synthetic tree of 1,000 scenarios built from the corpus fixtures (one pin,
# every other row a hard-linked copy of a non-pin corpus scenario). Targets:
# under 50 ms and under 1 s. Also sidecar-dedupe --check on the corpus.
set -euo pipefail
. test/bench/lib.sh
CORPUS=${ACPSNAP_CORPUS:-$(cd test/data/corpus && pwd)}
quietly() { "$@" >/dev/null 2>&1 || true; }   # the corpus tree has known gaps (exit 1)
rss() { /usr/bin/time -f '%M' -o "$BENCH_TMP/rss" "$@" >/dev/null 2>&1 || true; tail -1 "$BENCH_TMP/rss"; }

# Synthetic tree.
syn=$BENCH_TMP/fg-synthetic
rm -rf "$syn"; mkdir -p "$syn"
src=$CORPUS/acp-agent/snapshots
cp -r "$src/text-turn" "$syn/pin"
echo '{"name":"pin","hasModelTurn":true,"recorded":true,"pinsHeader":true}' > "$syn/scenarios.jsonl"
mapfile -t pool < <(jq -r 'select((.pinsHeader // false) == false and (.pinsChildToolSchemas // []) == [] and (.pinsChildSystemPrompts // []) == []) | .name' "$src/scenarios.jsonl")
for ((i = 1; i < 1000; i++)); do
    s=${pool[$((i % ${#pool[@]}))]}
    name=$(printf 's%04d-%s' "$i" "$s")
    mkdir "$syn/$name"
    for f in "$src/$s"/*; do [ -f "$f" ] && ln "$f" "$syn/$name/"; done
    jq -c --arg n "$name" '{name: $n, hasModelTurn, recorded} + (if .overridden then {overridden: true} else {} end)' \
        <(jq -c --arg s "$s" 'select(.name == $s)' "$src/scenarios.jsonl") >> "$syn/scenarios.jsonl"
done
fixture-guard "$syn" || { echo "bench: the synthetic tree does not pass" >&2; exit 1; }
files=$(find "$syn" -type f | wc -l)
bytes=$(du -sbL "$syn" | cut -f1)

t_corpus=$(median_time quietly fixture-guard "$src")
t_syn=$(median_time fixture-guard "$syn")
t_disc=$(median_time quietly fixture-guard --discover "$CORPUS")
t_check=$(median_time quietly sidecar-dedupe --check "$src")
t_find=$(median_time find "$syn" -type f)
t_cat=$(median_time sh -c "find '$syn' -type f -exec cat {} + > /dev/null")
echo "medians of $BENCH_RUNS runs"
printf '%-44s %8.4f s  (target < 0.050 s)  rss %s KB\n' "fixture-guard acp-agent corpus (52)" "$t_corpus" "$(rss fixture-guard "$src")"
printf '%-44s %8.4f s  (target < 1 s)      rss %s KB\n' "fixture-guard synthetic (1,000 scenarios)" "$t_syn" "$(rss fixture-guard "$syn")"
printf '%-44s %8s    %s files, %s MB\n' "  synthetic tree" "" "$files" "$(mbps "$bytes" 1)"
printf '%-44s %8.4f s  (the guard takes %sx this)\n' "  find -type f over it (walk floor)" "$t_find" "$(ratio "$t_syn" "$t_find")"
printf '%-44s %8.4f s  (the guard takes %sx this)\n' "  find + cat of every file (read floor)" "$t_cat" "$(ratio "$t_syn" "$t_cat")"
printf '%-44s %8.4f s\n' "fixture-guard --discover whole corpus" "$t_disc"
printf '%-44s %8.4f s\n' "sidecar-dedupe --check acp-agent corpus" "$t_check"
