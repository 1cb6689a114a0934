#!/usr/bin/env bats
# fixture-guard on the three corpus trees: exactly the gaps the corpus has.
bats_require_minimum_version 1.5.0
load helpers/common

@test "acp-agent: names each left-out source and the class without a pin, nothing else" {
    cd "$CORPUS/acp-agent"
    run -1 --separate-stderr fixture-guard snapshots
    assert_output ''
    assert_equal "$stderr" "$(cat <<'X'
fixture-guard: snapshots/scenarios.jsonl:10: header class "image" has no pin (needed by inline-image-prompt); set pinsHeader on one of its scenarios or add its pinning scenario
fixture-guard: snapshots/scenarios.jsonl:4: product-subagent-both: systemPromptSource names "<not-included>", a pin left out of this tree, so the system prompt sidecar (system-prompt.expected.md) has no source here; add that scenario or name an included pin
fixture-guard: snapshots/scenarios.jsonl:5: product-subagent-result-diagnostic: systemPromptSource names "<not-included>", a pin left out of this tree, so the system prompt sidecar (system-prompt.expected.md) has no source here; add that scenario or name an included pin
fixture-guard: snapshots/scenarios.jsonl:9: read-image-text-route: toolSchemasSource names "<not-included>", a pin left out of this tree, so the tool schemas sidecar (tool-schemas.expected.json) has no source here; add that scenario or name an included pin
fixture-guard: snapshots/scenarios.jsonl:48: code-mode-read-image: toolSchemasSource names "<not-included>", a pin left out of this tree, so the tool schemas sidecar (tool-schemas.expected.json) has no source here; add that scenario or name an included pin
fixture-guard: snapshots/scenarios.jsonl:49: code-mode-workspace-context: systemPromptSource names "<not-included>", a pin left out of this tree, so the system prompt sidecar (system-prompt.expected.md) has no source here; add that scenario or name an included pin
fixture-guard: snapshots/scenarios.jsonl:49: code-mode-workspace-context: toolSchemasSource names "<not-included>", a pin left out of this tree, so the tool schemas sidecar (tool-schemas.expected.json) has no source here; add that scenario or name an included pin
X
)"
}

@test "acp-agent: every gap the guard names is a <not-included> source or the pinless class" {
    cd "$CORPUS/acp-agent"
    run -1 --separate-stderr fixture-guard snapshots
    # cross-check against the table itself, independently of the message text
    want=$(( $(jq -s '[.[] | select(.systemPromptSource == "<not-included>")] | length' snapshots/scenarios.jsonl) \
           + $(jq -s '[.[] | select(.toolSchemasSource == "<not-included>")] | length' snapshots/scenarios.jsonl) \
           + $(jq -rs '(map(select(.pinsHeader) | .headerClass // "default") | unique) as $p
                       | map(.headerClass // "default") | unique | map(select(. as $c | $p | index($c) | not)) | length' snapshots/scenarios.jsonl) ))
    assert_equal "$(echo "$stderr" | wc -l)" "$want"
}

@test "acp-snapshot-suite/suite passes" {
    run -0 --separate-stderr fixture-guard "$CORPUS/acp-snapshot-suite/suite/snapshots"
    assert_output ''
    assert_equal "$stderr" ''
}

@test "acp-snapshot-suite/record-suite: only the child schema sidecar record would write" {
    cd "$CORPUS/acp-snapshot-suite/record-suite"
    run -1 --separate-stderr fixture-guard snapshots
    assert_equal "$stderr" 'fixture-guard: snapshots/rec-child/tool-schemas.1.expected.json: missing, but pinsChildToolSchemas declares child 1; record the scenario (or run sidecar-dedupe) to write it, or drop 1 from pinsChildToolSchemas'
}

@test "all three trees at once: exit 1, the gaps of both failing trees" {
    run -1 --separate-stderr fixture-guard "$CORPUS/acp-agent/snapshots" "$CORPUS/acp-snapshot-suite/suite/snapshots" "$CORPUS/acp-snapshot-suite/record-suite/snapshots"
    assert_equal "$(echo "$stderr" | wc -l)" 8
}

@test "--discover: every committed corpus fixture is canonical and projected" {
    for t in acp-agent/snapshots acp-snapshot-suite/suite/snapshots acp-snapshot-suite/record-suite/snapshots; do
        run -0 --separate-stderr fixture-guard --discover "$CORPUS/$t"
        assert_equal "$stderr" ''
    done
}

@test "--discover: the raw captures are persisted logs, each one named" {
    run -1 --separate-stderr fixture-guard --discover "$CORPUS/acp-agent/raw"
    n=$(find "$CORPUS/acp-agent/raw" -name 'session*.jsonl' -exec sh -c 'sed -n 2p "$1" | grep -q "\"seq\""' _ {} \; -print | wc -l)
    assert_equal "$(echo "$stderr" | wc -l)" "$n"
}

@test "--list on the corpus: one line per row" {
    run -0 fixture-guard --list "$CORPUS/acp-agent/snapshots"
    assert_equal "${#lines[@]}" "$(grep -c . "$CORPUS/acp-agent/snapshots/scenarios.jsonl")"
    assert_line $'text-turn\tdefault\tpin,prompt-owner,schemas-owner,model,recorded,compares-log'
}
