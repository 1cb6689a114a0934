#!/usr/bin/env bats
# What every tool of bin/ shares: -h is --help (the usage on stdout, exit 0),
# a bad option exits 2 with a message, and a man page names it.
bats_require_minimum_version 1.5.0
load helpers/common

tools() { # the tools of bin/: one per C source, and the pipeline scripts
    local f
    for f in "$ROOT"/bin/*.c; do basename "$f" .c; done
    for f in "$ROOT"/bin/acpsnap-*; do [[ $f == *.c ]] || basename "$f"; done
}

@test "cli: every tool takes -h as --help" {
    local t help
    for t in $(tools); do
        run -0 --separate-stderr "$t" --help
        help=$output
        [ -n "$help" ] || fail "$t --help printed nothing"
        run -0 --separate-stderr "$t" -h
        [ "$output" = "$help" ] || fail "$t -h is not $t --help"
        assert_equal "$stderr" ""
    done
}

@test "cli: every tool has a man page" {
    local t
    for t in $(tools); do
        run -0 grep -rlE "^\.Nm $t( ,)?\$" "$ROOT/share/man"
    done
}

@test "cli: a bad option exits 2 with a message on stderr" {
    local t
    for t in $(tools); do
        run -2 --separate-stderr "$t" --no-such-option
        [ -n "$stderr" ] || fail "$t: no message for a bad option"
    done
}

@test "cli: acpsnap-replay --help says what each option does" {
    run -0 --separate-stderr acpsnap-replay --help
    assert_line --index 0 --partial 'usage: acpsnap-replay [-d SNAPDIR]'
    local o
    for o in --snapshots --profile --jobs --mode --list --shard --timings-in --timings --report --keep --verbose; do
        assert_line --regexp "^ +(-[a-z], )?$o( |\$)"
    done
    assert_line 'Exit status: 0 every scenario passed, 1 one failed, 2 trouble.'
}
