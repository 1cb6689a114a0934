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
    local users=() o s u dead=()
    mapfile -t users < <(find "$obj" -name '*.o' | LC_ALL=C sort)
    for o in "$obj"/common/*.o; do
        local src=$ROOT/common/$(basename "$o" .o).c
        for s in $(nm -g --defined-only "$o" | awk '$3 ~ /^as_/ {print $3}'); do
            local used=0
            for u in "${users[@]}"; do
                [ "$u" = "$o" ] && continue
                if nm -u "$u" | awk -v s="$s" '$2 == s {f=1} END {exit !f}'; then used=1; break; fi
            done
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
