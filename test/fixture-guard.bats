#!/usr/bin/env bats
# fixture-guard: mutation tests. Each copies the corpus' small replay suite,
# breaks exactly one thing, and asserts the exact report and exit status 1.
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/guard

setup() { guard_copy; }

# guard_says MESSAGE...: fixture-guard s exits 1 printing exactly these lines.
guard_says() {
    run -1 --separate-stderr fixture-guard s
    assert_output ''
    local IFS=$'\n'
    assert_equal "$stderr" "$*"
}

@test "an unbroken copy passes" {
    run -0 --separate-stderr fixture-guard s
    assert_output ''
    assert_equal "$stderr" ''
}

@test "a trailing slash and several directories" {
    cp -r s t
    run -0 --separate-stderr fixture-guard s/ t
    assert_equal "$stderr" ''
}

# ---------------------------------------------------------------- files

@test "orphaned scenario directory" {
    mkdir s/extra
    printf '{"steps":[]}\n' > s/extra/input.json
    guard_says 'fixture-guard: s/extra: a snapshot directory the table does not name'
}

@test "a directory that holds no scenario's files is not a scenario directory, in every mode" {
    # a folder of configurations beside the scenarios, as some agents keep them
    mkdir -p s/configs/fixtures s/empty
    printf 'model: x\n' > s/configs/agent.yml
    printf 'x\n' > s/configs/fixtures/helper.ts
    run -0 --separate-stderr fixture-guard s
    assert_equal "$stderr" ''
    run -0 --separate-stderr fixture-guard --unreferenced=delete s
    assert_equal "$stderr" ''
    [ -f s/configs/agent.yml ] && [ -f s/configs/fixtures/helper.ts ] && [ -d s/empty ]
    # each of a scenario's files makes it one
    for f in input.json stdout.expected.jsonl session.jsonl.zst replay.override.json workspace/; do
        rm -rf s/configs && mkdir s/configs
        case $f in */) mkdir "s/configs/$f" ;; *) : > "s/configs/$f" ;; esac
        run -1 --separate-stderr fixture-guard s
        assert_equal "$stderr" 'fixture-guard: s/configs: a snapshot directory the table does not name'
    done
}

@test "--unreferenced: reject (the default), warn, delete" {
    mkdir -p s/extra/sub s/.hidden
    printf 'x\n' > s/extra/sub/f
    printf '{"steps":[]}\n' > s/extra/input.json
    printf 'keep\n' > outside
    ln -s "$BATS_TEST_TMPDIR/outside" s/extra/link
    ln -s "$BATS_TEST_TMPDIR" s/extra/dirlink
    run -1 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: s/.hidden: a snapshot directory the table does not name
fixture-guard: s/extra: a snapshot directory the table does not name'
    run -1 --separate-stderr fixture-guard --unreferenced=reject s
    assert_equal "$stderr" 'fixture-guard: s/.hidden: a snapshot directory the table does not name
fixture-guard: s/extra: a snapshot directory the table does not name'
    rmdir s/.hidden
    run -0 --separate-stderr fixture-guard --unreferenced=warn s
    assert_equal "$stderr" 'fixture-guard: s/extra: a snapshot directory the table does not name'
    [ -d s/extra/sub ]
    run -0 --separate-stderr fixture-guard --unreferenced=delete s
    assert_equal "$output" ''
    assert_equal "$stderr" 'fixture-guard: s/extra: removed: a snapshot directory the table does not name'
    [ ! -e s/extra ] && [ ! -L s/extra ]
    # the links were removed, not followed
    assert_equal "$(cat outside)" keep
    [ -d "$BATS_TEST_TMPDIR/s/no-model" ]
    run -0 --separate-stderr fixture-guard --unreferenced=delete s
    assert_equal "$stderr" ''
}

@test "--unreferenced: a link to a directory and a hidden directory are problems in every mode, never removed" {
    mkdir elsewhere .x
    ln -s "$BATS_TEST_TMPDIR/elsewhere" s/linked
    mkdir s/.hidden
    run -1 --separate-stderr fixture-guard --unreferenced=delete s
    assert_equal "$stderr" 'fixture-guard: s/.hidden: a snapshot directory the table does not name
fixture-guard: s/linked: a snapshot directory the table does not name'
    [ -L s/linked ] && [ -d elsewhere ] && [ -d s/.hidden ]
    run -1 fixture-guard --unreferenced=warn s
}

@test "--unreferenced: a bad value is a usage error" {
    run -2 --separate-stderr fixture-guard --unreferenced=maybe s
    assert_equal "${stderr%%$'\n'*}" 'fixture-guard: --unreferenced: expected reject, warn or delete, not "maybe"'
}

@test "missing scenario directory" {
    rm -r s/no-model
    guard_says 'fixture-guard: s/no-model: missing scenario directory for table row 4; create it (input.json, stdout.expected.jsonl, session.jsonl) or drop the row'
}

@test "missing input.json" {
    rm s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json: missing; every scenario needs its drive script'
}

@test "missing stdout.expected.jsonl" {
    rm s/no-model/stdout.expected.jsonl
    guard_says 'fixture-guard: s/no-model/stdout.expected.jsonl: missing; every scenario needs its expected stdout'
}

@test "missing session.jsonl" {
    rm s/no-model/session.jsonl
    guard_says 'fixture-guard: s/no-model/session.jsonl: missing; every scenario needs its session fixture (header-only when there is no model call)'
}

@test "an override the row does not declare" {
    cp s/authored-error/replay.override.json s/no-model/
    guard_says 'fixture-guard: s/no-model/replay.override.json: present but the row is not "overridden": true, and replay would apply it silently; set overridden or delete it'
}

@test "an overridden row without its override" {
    rm s/authored-error/replay.override.json
    guard_says 'fixture-guard: s/authored-error/replay.override.json: missing, but the row is "overridden": true; add the override or unset overridden'
}

@test "a child prompt sidecar the row does not declare" {
    cp s/plain-turn/system-prompt.1.expected.md s/plain-turn/system-prompt.2.expected.md
    guard_says 'fixture-guard: s/plain-turn/system-prompt.2.expected.md: stray child sidecar: pinsChildSystemPrompts does not declare child 2; declare it or delete the file'
}

@test "a child schema sidecar the row does not declare" {
    cp s/plain-turn/tool-schemas.1.expected.json s/plain-turn/tool-schemas.2.expected.json
    guard_says 'fixture-guard: s/plain-turn/tool-schemas.2.expected.json: stray child sidecar: pinsChildToolSchemas does not declare child 2; declare it or delete the file'
}

@test "a declared child schema sidecar is missing" {
    rm s/plain-turn/tool-schemas.1.expected.json
    guard_says 'fixture-guard: s/plain-turn/tool-schemas.1.expected.json: missing, but pinsChildToolSchemas declares child 1; record the scenario (or run sidecar-dedupe) to write it, or drop 1 from pinsChildToolSchemas'
}

@test "a declared child prompt sidecar is missing" {
    rm s/plain-turn/system-prompt.1.expected.md
    guard_says 'fixture-guard: s/plain-turn/system-prompt.1.expected.md: missing, but pinsChildSystemPrompts declares child 1; record the scenario (or run sidecar-dedupe) to write it, or drop 1 from pinsChildSystemPrompts'
}

@test "child fixtures with a gap" {
    cp s/plain-turn/session.1.jsonl s/plain-turn/session.3.jsonl
    guard_says 'fixture-guard: s/plain-turn/session.3.jsonl: child session fixtures must be contiguous: session.2.jsonl is missing; renumber the children'
}

@test "an invalid child fixture name" {
    cp s/plain-turn/session.1.jsonl s/plain-turn/session.01.jsonl
    guard_says 'fixture-guard: s/plain-turn/session.01.jsonl: invalid child session fixture name; children are session.1.jsonl, session.2.jsonl, ... (rename or delete it)'
}

@test "a Windows transcript the row does not declare" {
    cp s/no-model/stdout.expected.jsonl s/no-model/stdout.expected.windows.jsonl
    guard_says 'fixture-guard: s/no-model/stdout.expected.windows.jsonl: stray platform variant: the row does not set pinsNativeWindowsStdout; set it or delete the file'
}

@test "a declared Windows transcript is missing" {
    table_set no-model '.pinsNativeWindowsStdout=true'
    guard_says 'fixture-guard: s/no-model/stdout.expected.windows.jsonl: missing, but the row sets pinsNativeWindowsStdout; add the Windows transcript or unset it'
}

@test "an unknown platform variant" {
    cp s/no-model/stdout.expected.jsonl s/no-model/stdout.expected.linux.jsonl
    guard_says 'fixture-guard: s/no-model/stdout.expected.linux.jsonl: stray fixture file the harness does not read (not a fixture name the table declares); rename or delete it'
}

@test "workspace and other files are the scenario's business" {
    mkdir -p s/no-model/workspace/sub
    echo x > s/no-model/workspace/sub/session.9.jsonl
    echo '{}' > s/no-model/notes.json
    run -0 --separate-stderr fixture-guard s
    assert_equal "$stderr" ''
}

# ---------------------------------------------------------------- contents

@test "a stdout line that is not an object" {
    echo '[1]' >> s/no-model/stdout.expected.jsonl
    guard_says 'fixture-guard: s/no-model/stdout.expected.jsonl:2: not a JSON object; stdout.expected.jsonl holds one normalized ACP frame per line'
}

@test "a stdout line that is not JSON" {
    echo '{' >> s/no-model/stdout.expected.jsonl
    guard_says 'fixture-guard: s/no-model/stdout.expected.jsonl:2: invalid JSON at column 2: unexpected end of input; stdout.expected.jsonl holds one normalized ACP frame per line'
}

@test "a fixture that is not projected" {
    sed -i '2s/^{"type":"request\/header",/{"type":"request\/header","seq":0,"time":5,/' s/plain-turn/session.jsonl
    guard_says 'fixture-guard: s/plain-turn/session.jsonl:2: not projected: the record keeps its seq/time envelope; rewrite the fixture with jsonl-project'
}

@test "a fixture that is not canonically packed" {
    cp "$CORPUS/acp-agent/snapshots/fs-read/session.jsonl" s/plain-turn/session.jsonl
    run -0 fixture-guard s
    unpack_row s/plain-turn/session.jsonl 12
    guard_says 'fixture-guard: s/plain-turn/session.jsonl:12: not in the canonical packed layout from this line on; rewrite the fixture with jsonl-pack'
}

@test "a fixture line that is not JSON" {
    echo '{"type":' >> s/plain-turn/session.1.jsonl
    guard_says 'fixture-guard: s/plain-turn/session.1.jsonl:3: invalid JSON at column 9: unexpected end of input'
}

@test "a fixture without its final newline" {
    printf %s "$(cat s/plain-turn/session.1.jsonl)" > s/plain-turn/session.1.jsonl
    guard_says 'fixture-guard: s/plain-turn/session.1.jsonl:2: no final newline; end the last record with LF'
}

@test "a fixture whose first line is not a session header" {
    sed -i '1s/"type":"session"/"type":"sessions"/' s/plain-turn/session.1.jsonl
    guard_says 'fixture-guard: s/plain-turn/session.1.jsonl:1: line 1 is not a session header ({"type":"session",...}); a session fixture starts with one'
}

@test "an untokenized system prompt" {
    sed -i '2s/"{{system}}"/"You are helpful"/' s/plain-turn/session.jsonl
    guard_says "fixture-guard: s/plain-turn/session.jsonl:2: request header carries its system prompt; tokenize it as \"{{system}}\" (scrub --fixture) and keep the text in the pin's system-prompt.expected.md"
}

@test "untokenized tool schemas, on a pin too" {
    sed -i '2s/"{{tools}}"/[]/' s/pin-turn/session.jsonl
    guard_says "fixture-guard: s/pin-turn/session.jsonl:2: request header carries its tool schemas; tokenize them as \"{{tools}}\" (scrub --fixture) and keep them in the pin's tool-schemas.expected.json" \
        "fixture-guard: s/pin-turn/session.jsonl:2: the pin's request header has no \"tools\": \"{{tools}}\" to restore its sidecar schemas into"
}

@test "session prefix messages stay as recorded, off a pin and on one (dsh compares them)" {
    sed -i '2s/"tools":"{{tools}}"/"tools":"{{tools}}","messages":[{"role":"user"}]/' s/plain-turn/session.jsonl s/pin-turn/session.jsonl
    grep -q '"messages":\[{"role":"user"}\]' s/plain-turn/session.jsonl
    grep -q '"messages":\[{"role":"user"}\]' s/pin-turn/session.jsonl
    run -0 --separate-stderr fixture-guard s
    assert_equal "$stderr" ''
}

@test "a macOS /private cwd spelling" {
    sed -i '1s/"{{cwd}}"/"\/private{{cwd}}"/' s/no-model/session.jsonl
    guard_says 'fixture-guard: s/no-model/session.jsonl:1: non-canonical cwd token "/private{{cwd}}"; write "{{cwd}}"'
}

@test "a tool result that accepted an unknown tool" {
    echo '{"type":"tool/result","data":{"message":{},"error":{"code":"UNKNOWN_TOOL"}}}' >> s/plain-turn/session.1.jsonl
    guard_says 'fixture-guard: s/plain-turn/session.1.jsonl:3: tool result reports UNKNOWN_TOOL; a snapshot fixture must not accept an unregistered tool'
}

@test "a zstd-compressed fixture" {
    zstd -q --rm s/plain-turn/session.1.jsonl -o s/plain-turn/x && mv s/plain-turn/x s/plain-turn/session.1.jsonl
    guard_says 'fixture-guard: s/plain-turn/session.1.jsonl: zstd-compressed; committed session fixtures are plain JSONL (decompress it with jsonl-project)'
}

# ---------------------------------------------------------------- pins

@test "two pins in one header class" {
    table_set shared-pin '.headerClass="main"'
    guard_says 'fixture-guard: s/scenarios.jsonl:2: header class "main" is pinned by both pin-turn and shared-pin; keep pinsHeader on one'
}

@test "a header class without a pin" {
    table_set no-model '.headerClass="lonely"'
    guard_says 'fixture-guard: s/scenarios.jsonl:4: header class "lonely" has no pin (needed by no-model); set pinsHeader on one of its scenarios or add its pinning scenario'
}

@test "a source left out of the tree" {
    table_set shared-pin '.systemPromptSource="<not-included>"'
    guard_says 'fixture-guard: s/scenarios.jsonl:2: shared-pin: systemPromptSource names "<not-included>", a pin left out of this tree, so the system prompt sidecar (system-prompt.expected.md) has no source here; add that scenario or name an included pin'
}

@test "an unknown source" {
    table_set shared-pin '.toolSchemasSource="nope"'
    guard_says 'fixture-guard: s/scenarios.jsonl:2: shared-pin: toolSchemasSource names unknown scenario "nope"; name a header-pinning scenario of the table'
}

@test "a source that is not a pin" {
    table_set shared-pin '.toolSchemasSource="no-model"'
    guard_says 'fixture-guard: s/scenarios.jsonl:2: shared-pin: toolSchemasSource names "no-model", which does not pin a header; name a header-pinning scenario'
}

@test "a source that does not own its sidecar" {
    # a third pin that takes its prompt from shared-pin, which takes it from pin-turn
    echo '{"name":"third","hasModelTurn":true,"recorded":true,"pinsHeader":true,"headerClass":"third","expectedHeaderChanges":1,"systemPromptSource":"shared-pin","toolSchemasSource":"pin-turn"}' >> s/scenarios.jsonl
    cp -r s/shared-pin s/third
    guard_says 'fixture-guard: s/scenarios.jsonl:7: third: systemPromptSource names "shared-pin", which does not own its system prompt sidecar (it takes it from "pin-turn"); name the owner'
}

@test "a source with a different header-change count" {
    echo '{"name":"third","hasModelTurn":true,"recorded":true,"pinsHeader":true,"headerClass":"third","toolSchemasSource":"pin-turn","systemPromptSource":"pin-turn"}' >> s/scenarios.jsonl
    cp -r s/no-model s/third
    sed -n 2p s/pin-turn/session.jsonl >> s/third/session.jsonl
    guard_says 'fixture-guard: s/scenarios.jsonl:7: third: systemPromptSource names "pin-turn", which declares 1 expected header changes, not 0; shared sidecars need equal counts' \
        'fixture-guard: s/scenarios.jsonl:7: third: toolSchemasSource names "pin-turn", which declares 1 expected header changes, not 0; shared sidecars need equal counts'
}

@test "a source field off a pin" {
    table_set no-model '.systemPromptSource="pin-turn"'
    guard_says 'fixture-guard: s/scenarios.jsonl:4: no-model: systemPromptSource is only valid on a header-pinning scenario; set pinsHeader or drop the field'
}

@test "duplicate sidecar content" {
    table_set shared-pin 'del(.systemPromptSource)'
    cp s/pin-turn/system-prompt.expected.md s/shared-pin/
    guard_says 'fixture-guard: s/shared-pin/system-prompt.expected.md: identical to s/pin-turn/system-prompt.expected.md; commit it once: name pin-turn as the systemPromptSource of the pins that use shared-pin, and delete this copy'
}

@test "a sidecar on a scenario that owns none" {
    cp s/pin-turn/system-prompt.expected.md s/no-model/
    guard_says "fixture-guard: s/no-model/system-prompt.expected.md: stray sidecar: no header pin takes its system prompt from no-model; delete it or name no-model as the class pin's systemPromptSource"
}

@test "an owner without its sidecar" {
    rm s/pin-turn/tool-schemas.expected.json
    guard_says "fixture-guard: s/pin-turn/tool-schemas.expected.json: missing, but pin-turn owns the tool-schema sidecar of a header pin; write it with sidecar-dedupe from the pin's raw capture"
}

@test "a schema sidecar not in canonical formatting" {
    jq -c . s/pin-turn/tool-schemas.expected.json > x && mv x s/pin-turn/tool-schemas.expected.json
    guard_says 'fixture-guard: s/pin-turn/tool-schemas.expected.json: is not in canonical JSON formatting (JSON.stringify with 2-space indent and a final newline); regenerate it with sidecar-dedupe'
}

@test "a prompt sidecar without its final newline" {
    printf %s "$(cat s/pin-turn/system-prompt.expected.md)" > s/pin-turn/system-prompt.expected.md
    guard_says 'fixture-guard: s/pin-turn/system-prompt.expected.md: no final newline; regenerate it with sidecar-dedupe'
}

@test "a prompt sidecar with too few sections" {
    printf 'SYS PROMPT\n' > s/pin-turn/system-prompt.expected.md
    guard_says 'fixture-guard: s/pin-turn/system-prompt.expected.md: holds 1 prompt sections, but pin-turn/session.jsonl has 2 request headers; regenerate it with sidecar-dedupe' \
        'fixture-guard: s/pin-turn/system-prompt.expected.md: holds 1 prompt sections, but shared-pin/session.jsonl has 2 request headers; regenerate it with sidecar-dedupe'
}

@test "a pin whose header changes differ from the row" {
    table_set pin-turn '.expectedHeaderChanges=0'
    table_set shared-pin '.expectedHeaderChanges=0'
    guard_says 'fixture-guard: s/pin-turn/session.jsonl: the pin carries 2 request headers; a pin carries 1 + expectedHeaderChanges = 1 (fix expectedHeaderChanges or the fixture)' \
        'fixture-guard: s/pin-turn/session.jsonl: the pin carries 1 changed request headers (reason "change"), but the row declares expectedHeaderChanges = 0' \
        'fixture-guard: s/shared-pin/session.jsonl: the pin carries 2 request headers; a pin carries 1 + expectedHeaderChanges = 1 (fix expectedHeaderChanges or the fixture)' \
        'fixture-guard: s/shared-pin/session.jsonl: the pin carries 1 changed request headers (reason "change"), but the row declares expectedHeaderChanges = 0'
}

@test "a child prompt identical to its class pin" {
    printf 'SYS PROMPT\n' > s/plain-turn/system-prompt.1.expected.md
    guard_says "fixture-guard: s/plain-turn/system-prompt.1.expected.md: identical to its class pin's system prompt; drop 1 from pinsChildSystemPrompts and delete it"
}

@test "child schemas equal to the class pin's are allowed (dsh's record writes them)" {
    cp s/pin-turn/tool-schemas.expected.json s/plain-turn/tool-schemas.1.expected.json
    run -0 --separate-stderr fixture-guard s
    assert_equal "$stderr" ''
}

@test "a child schema sidecar that pins nothing" {
    printf '{\n  "initial": [],\n  "changes": []\n}\n' > s/plain-turn/tool-schemas.1.expected.json
    guard_says 'fixture-guard: s/plain-turn/tool-schemas.1.expected.json: pins no schema ("initial" is empty); regenerate it with sidecar-dedupe'
}

@test "a child pin without its child fixture" {
    table_set plain-turn '.pinsChildToolSchemas=[1,2]'
    sed 's/"t1"/"t2"/' s/plain-turn/tool-schemas.1.expected.json > s/plain-turn/tool-schemas.2.expected.json
    guard_says 'fixture-guard: s/plain-turn: pinsChildToolSchemas names child 2, but there is no session.2.jsonl; drop 2 from pinsChildToolSchemas'
}

# ---------------------------------------------------------------- the table

@test "an unknown table field" {
    table_set no-model '.colour="red"'
    guard_says 'fixture-guard: s/scenarios.jsonl:4: unknown field "colour"; see acpsnap-scenarios(5) for the fields'
}

@test "a table field of the wrong type" {
    table_set no-model '.recorded="no"'
    guard_says 'fixture-guard: s/scenarios.jsonl:4: field "recorded" must be a boolean'
}

@test "child pins that are not indices" {
    table_set plain-turn '.pinsChildToolSchemas=[0]'
    guard_says 'fixture-guard: s/scenarios.jsonl:3: field "pinsChildToolSchemas" must be an array of distinct child indices (integers from 1)' \
        "fixture-guard: s/plain-turn/tool-schemas.1.expected.json: stray child sidecar: pinsChildToolSchemas does not declare child 1; declare it or delete the file"
}

@test "a duplicate scenario name" {
    local first; first=$(head -1 s/scenarios.jsonl)
    printf '%s\n' "$first" >> s/scenarios.jsonl
    guard_says 'fixture-guard: s/scenarios.jsonl:7: duplicate scenario name "pin-turn" (first on line 1); rename one'
}

@test "a missing required field" {
    table_set no-model 'del(.hasModelTurn)'
    guard_says 'fixture-guard: s/scenarios.jsonl:4: missing required field "hasModelTurn"'
}

# ---------------------------------------------------------------- names and paths (TRUST MODEL)

@test "a scenario name that breaks the name rule: a slash, a newline, a leading dot or dash" {
    table_set no-model '.name="../../tmp/victim"'
    table_set authored-error '.name="a\nb"'
    guard_says 'fixture-guard: s/scenarios.jsonl:4: scenario name "../../tmp/victim" breaks the name rule: a '"'/'"' in the name; see acpsnap-scenarios(5)' \
        'fixture-guard: s/scenarios.jsonl:6: scenario name "a\nb" breaks the name rule: a control character in the name; see acpsnap-scenarios(5)' \
        'fixture-guard: s/authored-error: a snapshot directory the table does not name' \
        'fixture-guard: s/no-model: a snapshot directory the table does not name'
    table_set pin-turn '.name="-rf"'
    run -1 fixture-guard --table s
    assert_line --index 0 'fixture-guard: s/scenarios.jsonl:1: scenario name "-rf" breaks the name rule: a name starting with '"'.'"' or '"'-'"'; see acpsnap-scenarios(5)'
}

@test "a NUL in a name or an env string, which C and the shell would cut" {
    table_set no-model '.name="no-model\u0000/../../victim"'
    table_set authored-error '.env={"A":"x\u0000y"}'
    run -1 --separate-stderr fixture-guard --table s
    assert_equal "$stderr" 'fixture-guard: s/scenarios.jsonl:4: field "name" must be a non-empty string (no NUL character)
fixture-guard: s/scenarios.jsonl:6: field "env" must be an object of string values (no NUL character)'
}

@test "configPath, workspaceParent, sources and env obey the path rules" {
    table_set no-model '.configPath="../../etc/passwd" | .workspaceParent="/etc" | .env={"LD_PRELOAD":"./x.so","ACPSNAP_SESSIONS_ROOT":"/tmp","OK_VAR":"1","1BAD":"x"}'
    table_set authored-error '.workspaceParent="$TMPDIR/../x"'
    run -1 --separate-stderr fixture-guard --table s
    assert_equal "$stderr" 'fixture-guard: s/scenarios.jsonl:4: field "configPath" "../../etc/passwd" must name a file of the snapshots directory (a plain name): a '"'/'"' in the name
fixture-guard: s/scenarios.jsonl:4: field "workspaceParent" "/etc" must be "$TMPDIR" or "$HOME", optionally followed by /<relative path>: it is not "$TMPDIR" or "$HOME"
fixture-guard: s/scenarios.jsonl:4: field "env" sets "LD_PRELOAD", which a scenario may not set (the loader'"'"'s, the shell'"'"'s and the harness'"'"'s own variables are reserved)
fixture-guard: s/scenarios.jsonl:4: field "env" sets "ACPSNAP_SESSIONS_ROOT", which a scenario may not set (the loader'"'"'s, the shell'"'"'s and the harness'"'"'s own variables are reserved)
fixture-guard: s/scenarios.jsonl:4: field "env" sets "1BAD", which is not a variable name ([A-Za-z_][A-Za-z0-9_]*)
fixture-guard: s/scenarios.jsonl:6: field "workspaceParent" "$TMPDIR/../x" must be "$TMPDIR" or "$HOME", optionally followed by /<relative path>: a '"'.'"' or '"'..'"' component in a path'
    table_set no-model 'del(.configPath, .workspaceParent, .env) | .workspaceParent="$HOME/sub/dir"'
    table_set authored-error '.workspaceParent="$TMPDIR"'
    run -0 fixture-guard --table s
}

@test "a scenario directory or file that is a symbolic link" {
    mv s/no-model elsewhere
    ln -s ../elsewhere s/no-model
    ln -s ../no-model/input.json s/plain-turn/.stdout.expected.jsonl.acpsnap-new
    run -1 --separate-stderr fixture-guard --table s
    assert_equal "$stderr" 'fixture-guard: s/plain-turn/.stdout.expected.jsonl.acpsnap-new: a symbolic link; a scenario'"'"'s files are regular files (links are not followed)
fixture-guard: s/no-model: a symbolic link; a scenario directory is a directory of the snapshots tree (links are not followed)'
    run -1 fixture-guard s
    assert_line 'fixture-guard: s/no-model: a symbolic link; a scenario directory is a directory of the snapshots tree (links are not followed)'
    assert_line 'fixture-guard: s/plain-turn/.stdout.expected.jsonl.acpsnap-new: a symbolic link; a scenario'"'"'s files are regular files (links are not followed)'
}

@test "--table checks the table alone: fixture problems are not its business" {
    rm s/no-model/stdout.expected.jsonl
    run -0 --separate-stderr fixture-guard --table s
    assert_equal "$stderr" ''
    table_set no-model '.colour="red"'
    run -1 --separate-stderr fixture-guard --table s
    assert_equal "$stderr" 'fixture-guard: s/scenarios.jsonl:4: unknown field "colour"; see acpsnap-scenarios(5) for the fields'
}

# ---------------------------------------------------------------- input.json

@test "a file to wait for outside the cwd" {
    echo '{"steps":[{"op":"initialize"},{"op":"waitForFile","path":"../x"},{"op":"cancel","waitForFile":{"path":"/tmp/x"}}]}' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:1: steps[1] (waitForFile): the file to wait for, "../x", must be a path beneath the cwd: a '"'.'"' or '"'..'"' component in a path' \
        'fixture-guard: s/no-model/input.json:1: steps[2] (cancel): the file to wait for, "/tmp/x", must be a path beneath the cwd: an absolute path'
}

@test "an unknown input op" {
    echo '{"steps":[{"op":"initialize"},{"op":"dance"}]}' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:1: steps[1]: unknown op "dance"; see acpsnap-scenarios(5) for the ops'
}

@test "an op without its required field" {
    echo '{"steps":[{"op":"prompt"}]}' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:1: steps[0] (prompt): missing "text"'
}

@test "an op with an unknown field" {
    printf '{"steps":[\n{"op":"prompt","text":"x","colour":1}]}\n' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:2: steps[0] (prompt): unknown field "colour"'
}

@test "an op field of the wrong type" {
    echo '{"steps":[{"op":"waitForTurnStart","minimumTurn":"2"}]}' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:1: steps[0] (waitForTurnStart): "minimumTurn" must be a positive integer'
}

@test "a bad permission answer" {
    echo '{"steps":[],"permissionAnswers":[{"kind":"yes"}]}' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:1: permissionAnswers[0] must be {"kind": "allow_once"|"allow_always"|"reject_once"|"reject_always"}'
}

@test "a bad client list, and a good one" {
    echo '{"steps":[],"client":["fs-read","disk"]}' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:1: "client" must be an array of distinct "fs-read", "fs-write", "terminal"'
    echo '{"steps":[],"client":"terminal"}' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:1: "client" must be an array of distinct "fs-read", "fs-write", "terminal"'
    echo '{"steps":[],"colour":1}' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:1: unknown top-level field "colour"; the script has "steps", "permissionAnswers" and "client"'
    echo '{"steps":[],"client":["terminal","fs-write"]}' > s/no-model/input.json
    run -0 fixture-guard s
}

@test "an input.json that is not JSON" {
    echo '{"steps":[' > s/no-model/input.json
    guard_says 'fixture-guard: s/no-model/input.json:2: invalid JSON: unexpected end of input'
}

@test "every problem is reported, then exit 1" {
    mkdir s/extra && : > s/extra/input.json
    rm s/no-model/input.json
    echo '[1]' >> s/blocked-log/stdout.expected.jsonl
    run -1 --separate-stderr fixture-guard s
    assert_equal "$(echo "$stderr" | wc -l)" 3
}

# ---------------------------------------------------------------- trouble

@test "trouble: no such directory" {
    run -2 --separate-stderr fixture-guard nope
    assert_equal "$stderr" 'fixture-guard: unable to open directory nope: No such file or directory'
}

@test "trouble: not a directory" {
    run -2 --separate-stderr fixture-guard s/scenarios.jsonl
    assert_equal "$stderr" 'fixture-guard: s/scenarios.jsonl: not a directory'
}

@test "trouble: no table" {
    rm s/scenarios.jsonl
    run -2 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: unable to read the scenario table s/scenarios.jsonl: No such file or directory'
}

@test "trouble: a malformed table" {
    echo '{' >> s/scenarios.jsonl
    run -2 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: s/scenarios.jsonl:7:2: invalid JSON: unexpected end of input'
}

@test "trouble: a table row that is not an object" {
    echo '[]' >> s/scenarios.jsonl
    run -2 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: s/scenarios.jsonl:7: a scenario row must be a JSON object'
}

@test "trouble: usage" {
    run -2 --separate-stderr fixture-guard
    assert_equal "$stderr" 'usage: fixture-guard [--list | --table | --rows | --no-lint | --lint-only] [--unreferenced=MODE] DIR...'
    run -2 --separate-stderr fixture-guard --list --discover s
    assert_equal "$stderr" 'usage: fixture-guard [--list | --table | --rows | --no-lint | --lint-only] [--unreferenced=MODE] DIR...'
}

@test "--help and --version" {
    run -0 fixture-guard --help
    assert_line --index 0 'usage: fixture-guard [--list | --table | --rows | --no-lint | --lint-only] [--unreferenced=MODE] DIR...'
    run -0 fixture-guard --version
    assert_output --regexp '^fixture-guard \(acpsnap\) [0-9.]+$'
}

# ---------------------------------------------------------------- --list

@test "--list prints each scenario, its class and roles" {
    run -0 --separate-stderr fixture-guard --list s
    assert_equal "$output" "$(printf '%s\n' \
        $'pin-turn\tmain\tpin,prompt-owner,schemas-owner,model,recorded,compares-log' \
        $'shared-pin\tshared\tpin,model,recorded,compares-log' \
        $'plain-turn\tmain\tmodel,recorded,compares-log,child-prompt-pin=1,child-schemas-pin=1' \
        $'no-model\tmain\tno-model,authored' \
        $'blocked-log\tmain\tno-model,authored,compares-log' \
        $'authored-error\tmain\tmodel,authored,compares-log,overridden')"
}

# ---------------------------------------------------------------- --discover

@test "--discover checks every session log under a tree" {
    mkdir -p r/a/b r/c
    cp "$CORPUS/acp-agent/snapshots/fs-read/session.jsonl" r/a/b/log.jsonl
    cp "$CORPUS/acp-agent/raw/fs-read/session.jsonl" r/c/persisted.jsonl
    echo '{"type":"other"}' > r/c/notes.jsonl
    echo 'not json' > r/c/plain.jsonl
    mkdir r/.git && cp r/c/persisted.jsonl r/.git/skipped.jsonl
    run -1 --separate-stderr fixture-guard --discover r
    assert_equal "$stderr" 'fixture-guard: r/c/persisted.jsonl:2: not projected: the record keeps its seq/time envelope; rewrite the fixture with jsonl-project'
    rm r/c/persisted.jsonl
    unpack_row r/a/b/log.jsonl 12
    run -1 --separate-stderr fixture-guard --discover r
    assert_equal "$stderr" 'fixture-guard: r/a/b/log.jsonl:12: not in the canonical packed layout from this line on; rewrite the fixture with jsonl-pack'
}

@test "--discover passes a canonical tree" {
    run -0 --separate-stderr fixture-guard --discover s
    assert_equal "$stderr" ''
}

@test "a packed row the codec cannot decode is one more problem" {
    cp "$CORPUS/acp-agent/snapshots/fs-read/session.jsonl" s/plain-turn/session.jsonl
    sed -i '12s/"dt":\[0,/"dt":[/' s/plain-turn/session.jsonl
    rm s/no-model/stdout.expected.jsonl
    run -1 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: s/plain-turn/session.jsonl:12: malformed reasoning-chunks row: dt length 27 does not match 29 members
fixture-guard: s/no-model/stdout.expected.jsonl: missing; every scenario needs its expected stdout'
}


@test "--rows prints each row's fields with defaults applied, US-separated, only when the table passes" {
    table_set no-model '.workspaceParent="$HOME/sub"'
    run -0 --separate-stderr fixture-guard --rows s
    assert_equal "$stderr" ""
    us=$'\x1f'
    assert_equal "$output" "$(printf '%s\n' \
        "pin-turn${us}true${us}true${us}true${us}${us}true${us}false${us}0${us}true" \
        "shared-pin${us}true${us}true${us}true${us}${us}true${us}false${us}0${us}true" \
        "plain-turn${us}true${us}true${us}true${us}\$TMPDIR${us}false${us}false${us}2${us}true" \
        "no-model${us}false${us}false${us}false${us}\$HOME/sub${us}false${us}false${us}0${us}true" \
        "blocked-log${us}false${us}false${us}true${us}${us}false${us}false${us}0${us}true" \
        "authored-error${us}true${us}false${us}true${us}${us}false${us}false${us}0${us}true")"
    # the same fields jq reads off the table
    run -0 jq -r 'select(type == "object") | [.name, (.hasModelTurn // false), (.recorded // false),
        (if has("comparesLog") then .comparesLog else (.hasModelTurn // false) and .sessionLog != false end),
        (.workspaceParent // ""), (.pinsHeader // false), (.pwshOnly // false),
        (((.pinsChildToolSchemas // []) + (.pinsChildSystemPrompts // [])) | length),
        .sessionLog != false] | map(tostring) | join("\u001f")' s/scenarios.jsonl
    assert_equal "$output" "$(fixture-guard --rows s)"
    table_set authored-error '.workspaceParent="/etc"'
    run -1 --separate-stderr fixture-guard --rows s
    assert_equal "$output" ""
    assert_equal "$stderr" 'fixture-guard: s/scenarios.jsonl:6: field "workspaceParent" "/etc" must be "$TMPDIR" or "$HOME", optionally followed by /<relative path>: it is not "$TMPDIR" or "$HOME"'
}

@test "a session fixture larger than the read window is checked and linted to its last line" {
    local f=s/plain-turn/session.jsonl pad i
    pad=$(head -c 3000 /dev/zero | tr '\0' x)
    { head -2 "$f"
      for ((i = 0; i < 400; i++)); do printf '{"type":"user/message","data":{"content":[{"type":"text","text":"%s"}]}}\n' "$pad"; done
      printf '{"type":"user/message","data":{"content":[{"type":"text","text":"in /home/alice/p"}]}}\n'
      tail -1 "$f"; } > "$f.new"
    mv "$f.new" "$f"
    [ "$(stat -c %s "$f")" -gt 1048576 ]
    guard_says 'fixture-guard: s/plain-turn/session.jsonl:403:69: a home path (/home/alice/p) in a fixture; normalize it, or allow it in .acpsnap-allow'
    printf '{"type":"user/message"}\r\n' >> "$f"
    guard_says 'fixture-guard: s/plain-turn/session.jsonl:405: CR-LF line ending; fixtures use LF only' \
        'fixture-guard: s/plain-turn/session.jsonl:403:69: a home path (/home/alice/p) in a fixture; normalize it, or allow it in .acpsnap-allow'
}

# ---------------------------------------------------------------- two processes

# many_scenarios N: s holds N scenarios, copies of the suite's no-model one
# (a tree of 64 or more is checked by two processes).
many_scenarios() {
    local i name
    for ((i = 1; i <= $1; i++)); do
        printf -v name 'm%03d' "$i"
        cp -r s/no-model "s/$name"
        jq -c --arg n "$name" 'select(.name == "no-model") | .name = $n' s/scenarios.jsonl >> s/scenarios.jsonl
    done
}

@test "two processes: a broken tree of 200 scenarios reports as one process does, in table order" {
    many_scenarios 200
    rm s/m003/input.json s/m197/stdout.expected.jsonl        # a check near each end
    printf '[1]\n' >> s/m100/stdout.expected.jsonl
    printf '%s\n' '{"t":"ran in /home/alice/p"}' >> s/m002/stdout.expected.jsonl   # the lint's
    printf '%s\n' '{"t":"ran in /home/alice/q"}' >> s/m199/stdout.expected.jsonl
    printf '%s\n' '{"t":"ran in /home/alice/r"}' >> s/m198/stdout.expected.jsonl   # allowed, near the end
    printf 'x' >> s/pin-turn/system-prompt.expected.md       # the sidecars'
    printf 'home m002/stdout.expected.jsonl:2\nkey nothing/here\nhome m198/*\n' > s/.acpsnap-allow
    local want='fixture-guard: s/m003/input.json: missing; every scenario needs its drive script
fixture-guard: s/m100/stdout.expected.jsonl:2: not a JSON object; stdout.expected.jsonl holds one normalized ACP frame per line
fixture-guard: s/m197/stdout.expected.jsonl: missing; every scenario needs its expected stdout
fixture-guard: s/pin-turn/system-prompt.expected.md: no final newline; regenerate it with sidecar-dedupe
fixture-guard: s/m199/stdout.expected.jsonl:2:14: a home path (/home/alice/q) in a fixture; normalize it, or allow it in .acpsnap-allow
fixture-guard: s/.acpsnap-allow:2: warning: stale allow entry: it allows nothing; remove it'
    run -1 --separate-stderr fixture-guard --serial s
    assert_equal "$stderr" "$want"
    for k in 1 2 3; do   # wherever the two processes meet
        run -1 --separate-stderr fixture-guard s
        assert_equal "$stderr" "$want"
    done
    run -1 --separate-stderr fixture-guard --no-lint s
    assert_equal "$stderr" "$(printf '%s\n' "$want" | head -4)"
}

@test "two processes: where one process would die, the output stops there" {
    many_scenarios 100
    printf '[1]\n' >> s/m002/stdout.expected.jsonl
    printf '{"steps":[]}\0\n' > s/m090/input.json           # trouble late in the table
    printf '[1]\n' >> s/m095/stdout.expected.jsonl
    run -2 --separate-stderr fixture-guard s
    assert_equal "$stderr" 'fixture-guard: s/m002/stdout.expected.jsonl:2: not a JSON object; stdout.expected.jsonl holds one normalized ACP frame per line
fixture-guard: s/m090/input.json:1:13: not a text or zstd file (NUL byte at offset 12)'
    run -2 --separate-stderr fixture-guard --serial s
    assert_equal "$stderr" 'fixture-guard: s/m002/stdout.expected.jsonl:2: not a JSON object; stdout.expected.jsonl holds one normalized ACP frame per line
fixture-guard: s/m090/input.json:1:13: not a text or zstd file (NUL byte at offset 12)'
    # trouble in the lint stops the output where the lint meets it, in the
    # scenario's checks, as a check's trouble does
    rm s/m090/input.json
    printf '\x28\xb5\x2f\xfdbad\n' > s/m050/replay.override.json
    run -2 --separate-stderr fixture-guard s
    local two=$stderr
    run -2 --separate-stderr fixture-guard --serial s
    assert_equal "$two" "$stderr"
    assert_equal "$stderr" 'fixture-guard: s/m002/stdout.expected.jsonl:2: not a JSON object; stdout.expected.jsonl holds one normalized ACP frame per line
fixture-guard: s/m050/replay.override.json: present but the row is not "overridden": true, and replay would apply it silently; set overridden or delete it
fixture-guard: s/m050/replay.override.json: truncated zstd frame at byte offset 0'
}

@test "files read at once (io_uring) report exactly as files read one by one (ACPSNAP_IO_URING=0)" {
    many_scenarios 70
    # a session log longer than a fetch window, broken at its end
    {
        cat s/m001/session.jsonl
        for ((i = 0; i < 4000; i++)); do printf '%s\n' '{"type":"turn/start","data":{"turn":1}}'; done
        printf '{"type":\n'
    } > s/m001/session.jsonl.new
    mv s/m001/session.jsonl.new s/m001/session.jsonl
    # more files than one fetch takes: the fixtures sort after twenty notes
    for i in $(seq -w 20); do printf 'x\n' > "s/m002/notes$i.txt"; done
    printf '%s\n' '{"t":"ran in /home/alice/p"}' >> s/m002/stdout.expected.jsonl
    rm s/m003/stdout.expected.jsonl
    printf '[1]\n' >> s/m069/stdout.expected.jsonl
    local want='fixture-guard: s/m001/session.jsonl:4002: invalid JSON at column 9: unexpected end of input
fixture-guard: s/m003/stdout.expected.jsonl: missing; every scenario needs its expected stdout
fixture-guard: s/m069/stdout.expected.jsonl:2: not a JSON object; stdout.expected.jsonl holds one normalized ACP frame per line
fixture-guard: s/m002/stdout.expected.jsonl:2:14: a home path (/home/alice/p) in a fixture; normalize it, or allow it in .acpsnap-allow'
    for opt in '' --serial; do
        run -1 --separate-stderr fixture-guard $opt s
        assert_equal "$stderr" "$want"
        ACPSNAP_IO_URING=0 run -1 --separate-stderr fixture-guard $opt s
        assert_equal "$stderr" "$want"
    done
}
