#!/usr/bin/env bats
# Every command of every man page's EXAMPLES section is run, in a prepared
# directory, and must succeed (or exit with the status the page says); a
# transcript's output must be what the page shows. The page source carries
# the few test directives (roff comments): see helpers/man-examples.bash.
#
# The directory each page runs in (a fresh copy per page, also its $HOME):
#   scenarios/               the shipped scenarios; their profile's agent is
#                            the acpsnap-agent found on PATH
#   snapshots/               the conformance corpus's dsh snapshot tree
#   corpus/                  the conformance corpus (test/data/corpus)
#   session.jsonl            a fixture with a body (scenarios/text-turn)
#   a/, b/                   two acp-drive runs of scenarios/text-turn
#   session.jsonl.zstd, .sessions/x/session.jsonl.zstd,
#   .sessions/abc/session.jsonl.zstd     an agent's log (a/'s), zstd frames
# and it is a git work tree with everything added.
# The installed share directory, /usr/local/share/acpsnap/, is the source
# tree's share/.
bats_require_minimum_version 1.5.0
load helpers/common
load helpers/man-examples

setup_file() {
    command -v acpsnap-agent >/dev/null || skip "the reference agent is not built"
    local t=$BATS_FILE_TMPDIR/template agent
    export TMPDIR=$BATS_FILE_TMPDIR/tmp
    mkdir -p "$t" "$TMPDIR"
    cd "$t"
    cp -r "$ROOT/scenarios" scenarios
    # the profile's agent, where its command line says, is the one on PATH
    agent=$(sed -n 's/^command = //p' scenarios/acpsnap-agent.profile)
    mkdir -p "scenarios/$(dirname "$agent")"
    ln -s "$(command -v acpsnap-agent)" "scenarios/$agent"
    cp -r "$CORPUS/acp-agent/snapshots" snapshots
    ln -s "$CORPUS" corpus
    cp scenarios/text-turn/session.jsonl session.jsonl
    acp-drive -p scenarios/acpsnap-agent.profile -o a scenarios/text-turn >/dev/null
    acp-drive -p scenarios/acpsnap-agent.profile -o b scenarios/text-turn >/dev/null
    jsonl-pack -z a/session.jsonl > session.jsonl.zstd
    mkdir -p .sessions/x .sessions/abc
    cp session.jsonl.zstd .sessions/x/
    cp session.jsonl.zstd .sessions/abc/
    git init -q . && git add -A
}

# run_page man1/x.1: its examples in a fresh copy of the template.
run_page() {
    local page=$ROOT/share/man/$1 w=$BATS_TEST_TMPDIR/w
    [ -f "$page" ] || fail "no page $page"
    grep -q '^\.Sh EXAMPLES' "$page" || fail "$1 has no EXAMPLES section"
    man_examples_script "$page" | sed "s|/usr/local/share/acpsnap/|$ROOT/share/|g" > "$BATS_TEST_TMPDIR/examples.bash" ||
        fail "$1: the examples cannot be extracted"
    cp -a "$BATS_FILE_TMPDIR/template" "$w"
    cd "$w"
    mkdir -p "$w/.tmp"
    # a reader's shell, not CI's: a page's record example is not refused
    CI= HOME=$w TMPDIR=$w/.tmp run timeout 300 bash "$BATS_TEST_TMPDIR/examples.bash" < /dev/null
    [ "$status" -eq 0 ] || { echo "$output"; fail "$1: an example failed (status $status)"; }
}

@test "man-examples: every page under share/man has an EXAMPLES section and a test here" {
    local p n
    for p in "$ROOT"/share/man/man*/*; do
        n=${p#"$ROOT/share/man/"}
        grep -q '^\.Sh EXAMPLES' "$p" || fail "$n has no EXAMPLES section"
        grep -qF "{ run_page $n; }" "$BATS_TEST_FILENAME" || fail "$n has no test in man-examples.bats"
    done
}

@test "man-examples: the skipped examples are few, and each says why" {
    local n
    n=$(cat "$ROOT"/share/man/man*/* | grep -c '^\.\\" test: skip' || true)
    [ "$n" -le 3 ] || fail "$n skipped examples: at most 3"
    run -1 grep -rqE '^\.\\" test: skip *$' "$ROOT"/share/man
}

@test "man-examples: acp-drive(1)" { run_page man1/acp-drive.1; }
@test "man-examples: acpsnap-agent(1)" { run_page man1/acpsnap-agent.1; }
@test "man-examples: acpsnap-exchange(1)" { run_page man1/acpsnap-exchange.1; }
@test "man-examples: acpsnap-jdiff(1)" { run_page man1/acpsnap-jdiff.1; }
@test "man-examples: acpsnap-replay(1)" { run_page man1/acpsnap-replay.1; }
@test "man-examples: acpsnap-report(1)" { run_page man1/acpsnap-report.1; }
@test "man-examples: acpsnap-review(1)" { run_page man1/acpsnap-review.1; }
@test "man-examples: fixture-guard(1)" { run_page man1/fixture-guard.1; }
@test "man-examples: jsonl-pack(1)" { run_page man1/jsonl-pack.1; }
@test "man-examples: jsonl-project(1)" { run_page man1/jsonl-project.1; }
@test "man-examples: replay-derive(1)" { run_page man1/replay-derive.1; }
@test "man-examples: replay-serve(1)" { run_page man1/replay-serve.1; }
@test "man-examples: scrub(1)" { run_page man1/scrub.1; }
@test "man-examples: sidecar-dedupe(1)" { run_page man1/sidecar-dedupe.1; }
@test "man-examples: acpsnap-profile(5)" { run_page man5/acpsnap-profile.5; }
@test "man-examples: acpsnap-replay(5)" { run_page man5/acpsnap-replay.5; }
@test "man-examples: acpsnap-scenarios(5)" { run_page man5/acpsnap-scenarios.5; }
@test "man-examples: acpsnap-session(5)" { run_page man5/acpsnap-session.5; }
@test "man-examples: acpsnap(7)" { run_page man7/acpsnap.7; }
@test "man-examples: acpsnap-agents(7)" { run_page man7/acpsnap-agents.7; }

# The harness itself: a broken example must fail the test.
fake_page() { # body... → $BATS_TEST_TMPDIR/fake.1
    { printf '%s\n' '.Dd November 30, 2026' '.Dt FAKE 1' '.Os acpsnap' '.Sh NAME' '.Nm fake' '.Nd fake' '.Sh EXAMPLES'
      printf '%s\n' "$@"; printf '%s\n' '.Sh SEE ALSO' '.Xr scrub 1'; } > "$BATS_TEST_TMPDIR/fake.1"
}
run_fake() {
    man_examples_script "$BATS_TEST_TMPDIR/fake.1" > "$BATS_TEST_TMPDIR/fake.bash" || return 2
    cd "$BATS_TEST_TMPDIR" && bash fake.bash
}

@test "man-examples harness: a failing command fails, wherever it is" {
    fake_page '.Dl true' '.Dl false'
    run -1 run_fake
    assert_output --partial 'fake.1:9'
    fake_page '.Bd -literal' 'false && echo unreached' 'true' '.Ed'
    run -1 run_fake
    assert_output --partial 'false && echo unreached'
    fake_page '.Bd -literal' 'for i in 1 2; do' '    [ $i = 2 ] || false' 'done' '.Ed'
    run -1 run_fake
    fake_page '.Dl false | cat'
    run -1 run_fake
    fake_page '.Dl true' '.Dl test 1 \-eq 1 && printf \(aq%s\en\(aq \(dqok\(dq | grep \-qx ok'
    run -0 run_fake
}

@test "man-examples harness: status directives and transcripts are checked" {
    fake_page '.\" test: status 3' '.Dl (exit 3)'
    run -0 run_fake
    fake_page '.\" test: status 3' '.Dl true'
    run -1 run_fake
    assert_output --partial 'exit status 0, expected 3'
    fake_page '.Bd -literal' '$ cat f' 'a b' '$ wc -w < f' '2' '.Ed'
    run -0 run_fake
    fake_page '.Bd -literal' '$ cat f' 'a c' '.Ed'
    run -1 run_fake
    assert_output --partial '+a b'
    fake_page '.Bd -literal' '$ echo one' 'two' '.Ed'
    run -1 run_fake
    assert_output --partial 'the output differs from the page'
    fake_page '.\" test: file d/x.txt' '.Bd -literal' 'x' '.Ed' '.Dl grep -qx x d/x.txt'
    run -0 run_fake
    fake_page '.\" test: skip needs the network' '.Dl false'
    run -0 run_fake
}

@test "man-examples harness: what it cannot run is an error, not a pass" {
    fake_page '.\" test: skip' '.Dl false'
    run -2 run_fake
    fake_page '.Dl echo \(xx'
    run -2 run_fake
    fake_page '.Dl echo "a b"'
    run -2 run_fake
    fake_page '.Bd -literal' 'echo a |' '.Ed'
    run -2 run_fake
    fake_page '.Bd -literal' '.Pp' '.Ed'
    run -2 run_fake
}
