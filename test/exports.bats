#!/usr/bin/env bats
# The library exports nothing dead: every as_* symbol that common/ defines has
# a caller outside the fuzz targets, in another object (tools, the agent,
# unit tests, the library itself) or in its own file beyond its definition.
bats_require_minimum_version 1.5.0
load helpers/common

# Exports only fuzz targets call, kept because a target needs them:
# as_sess_form, the decoded form the codec target re-packs a log in;
# as_sess_templates, which it turns off to compare with the scanner's path;
# as_sess_row_tokens, a packed row's tokens it compares with a fresh scan;
# as_lint_simd, which the lint target turns off to compare the block scan
# of the triggers with the byte-by-byte one.
FUZZ_ONLY="as_sess_form as_sess_templates as_sess_row_tokens as_lint_simd"

@test "exports: every exported as_* symbol has a caller outside fuzz targets" {
    local obj=$ROOT/${ACPSNAP_BUILD:-build/rel}/obj
    [ -d "$obj/common" ] || skip "no objects (run make first)"
    local o s dead=()
    # every object's undefined as_* symbols, read once: symbol → its users
    # (an object that defines a symbol does not also leave it undefined)
    local -A users=()
    while read -r o s; do users[$s]+=" $o"; done < <(find "$obj" -name '*.o' -exec nm -A -u {} + |
        awk '{sub(/:$/, "", $1)} $NF ~ /^as_/ {print $1, $NF}')
    for o in "$obj"/common/*.o; do
        local src=$ROOT/common/$(basename "$o" .o).c
        for s in $(nm -g --defined-only "$o" | awk '$3 ~ /^as_/ {print $3}'); do
            local used=0
            [ -z "${users[$s]:-}" ] || used=1
            # uses in its own file: lines naming it that are neither its
            # definition (at column 0) nor a comment
            if [ $used = 0 ] && grep -nw -- "$s" "$src" | grep -vE '^[0-9]+:[A-Za-z_]' | grep -qvE '^[0-9]+:\s*//'; then used=1; fi
            # kept for a fuzz target that needs it (and must still use it)
            if [ $used = 0 ] && [[ " $FUZZ_ONLY " == *" $s "* ]] && grep -qw -- "$s" "$ROOT"/test/fuzz/*.c; then used=1; fi
            [ $used = 1 ] || dead+=("$s ($(basename "$src"))")
        done
    done
    printf 'dead export: %s\n' "${dead[@]}"
    [ ${#dead[@]} -eq 0 ]
}
