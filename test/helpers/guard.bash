# Helpers for the fixture-guard and sidecar-dedupe suites.

# guard_copy: copies the corpus' small replay suite (6 scenarios: pins, a shared
# source, child pins, an override) to $BATS_TEST_TMPDIR/s and cds there.
guard_copy() {
    cp -r "$CORPUS/acp-snapshot-suite/suite/snapshots" "$BATS_TEST_TMPDIR/s"
    cd "$BATS_TEST_TMPDIR"
}

# table_set NAME JQ-EXPR: rewrites the row named NAME of s/scenarios.jsonl.
table_set() {
    local name=$1 expr=$2
    jq -c --arg n "$name" "if .name == \$n then $expr else . end" s/scenarios.jsonl > s/t.tmp
    mv s/t.tmp s/scenarios.jsonl
}

# unpack_row FILE LINE: replaces the packed chunk row on LINE by its member
# events (projected), which is valid but not the canonical layout.
unpack_row() {
    local f=$1 n=$2
    {
        head -n $((n - 1)) "$f"
        sed -n "${n}p" "$f" | jq -c '
            .data as $d | (if .type == "text-chunks" then "text-delta" else "reasoning-delta" end) as $k
            | $d.texts[] | {type: "assistant/chunk", data: {turn: $d.turn, step: $d.step,
                chunk: {type: $k, index: $d.index, text: .}}}'
        tail -n +$((n + 1)) "$f"
    } > "$f.tmp"
    mv "$f.tmp" "$f"
}

# raw_from_behavior SNAPDIR RAWDIR: writes a raw capture for every scenario of
# the acp-snapshot-suite trees from the fake agent's behavior.json (the log
# lines it persists), with a run.json whose normalizeContext scrubs them.
raw_from_behavior() {
    local snap=$1 raw=$2 d name sid=abcdef01-2345-4678-89ab-cdef01234567 cwd=/tmp/acp-snap-cwd-fake
    for d in "$snap"/*/; do
        name=$(basename "$d")
        [ -f "$d/behavior.json" ] || continue
        local n
        n=$(jq '.logs // [] | length' "$d/behavior.json")
        [ "$n" -gt 0 ] || continue
        mkdir -p "$raw/$name"
        for ((i = 0; i < n; i++)); do
            local f=session.jsonl
            [ $i -eq 0 ] || f=session.$i.jsonl
            jq -c --argjson i $i '.logs[$i].lines[]' "$d/behavior.json" \
                | sed -e "s/{{SID}}/$sid/g" -e "s#{{CWD}}#$cwd#g" > "$raw/$name/$f"
        done
        jq -n --arg s $sid --arg c $cwd '{normalizeContext: {sessionIds: [$s], cwd: $c, cwdAliases: [$c]}}' > "$raw/$name/run.json"
    done
}
