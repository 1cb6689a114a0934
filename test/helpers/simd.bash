# simd.bash - what the scanner's level suites share (test/simd*.bats): the
# levels this CPU runs, and a filter's output compared across them.

UNIT="$ROOT/${ACPSNAP_BUILD:-build/rel}/test/simd_unit"
HDR='{"type":"session","version":0,"id":"x","cwd":"/tmp/x"}'

# The levels this CPU runs (a forced level it lacks exits 2).
levels() {
    local l
    for l in avx512 avx2 sse2 scalar; do
        printf '%s\n' "$HDR" | ACPSNAP_SIMD=$l jsonl-project >/dev/null 2>&1 && echo "$l"
    done
    return 0
}

# each CMD…: runs CMD at level $l, then prints its exit status. In a
# sanitized build, LeakSanitizer checks the run at the first level alone
# (what a run allocates does not depend on the level; the check at exit is
# most of a short sanitized run's time).
each() {
    local rc=0 lsan=
    [ "$l" = "${ok[0]:-}" ] || lsan=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
    ASAN_OPTIONS=${lsan:-${ASAN_OPTIONS:-}} ACPSNAP_SIMD=$l "$@" || rc=$?
    echo "rc $rc"
}

# log_filters FILE / stdout_filters FILE: every filter of that kind of file,
# at level $l, with its exit status
log_filters() {
    each jsonl-project "$1"
    each jsonl-pack "$1"
    each jsonl-pack --unpack "$1"
    each jsonl-pack --check "$1"
    each replay-derive "$1"
    each scrub --session --cwd /tmp/acp-snap-cwd-x "$1"
}
stdout_filters() { each scrub --stdout "$1"; }

# same_on_levels FN FILE: FN's output on FILE is the same at every level
same_on_levels() {
    local l
    for l in "${ok[@]}"; do "$1" "$2" > "$BATS_TEST_TMPDIR/out.$l" 2>&1; done
    for l in "${ok[@]}"; do
        cmp "$BATS_TEST_TMPDIR/out.${ok[0]}" "$BATS_TEST_TMPDIR/out.$l" || { echo "$2: $l differs from ${ok[0]}"; return 1; }
    done
}
