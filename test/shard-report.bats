#!/usr/bin/env bats
# Shards, timings, progress and reports of acpsnap-replay, and acpsnap-report
# (junit, tap, merge). The shard assignment is tested on a generated
# 200-scenario tree through --list (no agent runs); the reports on a small
# tree that runs: model-free handshake copies and the text-turn pin.
bats_require_minimum_version 1.5.0
load helpers/common

XSD=$ROOT/test/data/junit.xsd

# tree DIR N: the text-turn pin (its header class needs one) and N-1
# handshake copies, scn-001..., all passing.
tree() {
    local d=$1 n=$2 i name
    mkdir -p "$d"
    cp -r "$ROOT/scenarios/text-turn" "$d/text-turn"
    sed "s|^command = .*|command = $BATS_FILE_TMPDIR/agent|" "$ROOT/scenarios/acpsnap-agent.profile" > "$d/agent.profile"
    echo '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}' > "$d/scenarios.jsonl"
    for ((i = 1; i < n; i++)); do
        printf -v name 'scn-%03d' "$i"
        mkdir "$d/$name"
        cp "$ROOT/scenarios/handshake/input.json" "$ROOT/scenarios/handshake/session.jsonl" \
            "$ROOT/scenarios/handshake/stdout.expected.jsonl" "$d/$name/"
        printf '{"name":"%s","hasModelTurn":false,"recorded":false}\n' "$name" >> "$d/scenarios.jsonl"
    done
}

setup_file() {
    # a private copy of the agent: the tree's binary may be relinked meanwhile
    [ ! -x "$BIN/acpsnap-agent" ] || cp "$BIN/acpsnap-agent" "$BATS_FILE_TMPDIR/agent"
    tree "$BATS_FILE_TMPDIR/big" 200
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    export TMPDIR=$BATS_TEST_TMPDIR/tmp
    mkdir -p "$TMPDIR"
    unset ACPSNAP_SHARD ACPSNAP_REPORT ACPSNAP_TIMINGS ACPSNAP_TIMINGS_IN
    BIG=$BATS_FILE_TMPDIR/big
}

need_agent() { [ -x "$BATS_FILE_TMPDIR/agent" ] || skip "the reference agent is not built"; }

# small: text-turn, scn-001..scn-006 passing, scn-003 failing (its expected
# stdout edited), and "pwsh-only" skipped (pwshOnly, where pwsh is missing).
small() {
    tree snap 7
    sed -i 's/"id":2/"id":3/' snap/scn-003/stdout.expected.jsonl
    mkdir snap/pwsh-only
    cp snap/scn-001/* snap/pwsh-only/
    echo '{"name":"pwsh-only","hasModelTurn":false,"recorded":false,"pwshOnly":true}' >> snap/scenarios.jsonl
}

# the names of shard I of N (extra options after)
shard_list() { acpsnap-replay -d "$BIG" --list --shard "$@"; }

@test "shards: four shards by name hash are disjoint, cover the selection and keep table order" {
    acpsnap-replay -d "$BIG" --list > all
    [ "$(wc -l < all)" = 200 ]
    local i
    for i in 1 2 3 4; do
        shard_list $i/4 > s$i
        # table order: the shard is a subsequence of the selection
        [ "$(grep -Fxf s$i all)" = "$(cat s$i)" ]
    done
    assert_equal "$(cat s1 s2 s3 s4 | LC_ALL=C sort)" "$(LC_ALL=C sort all)"
    assert_equal "$(cat s1 s2 s3 s4 | LC_ALL=C sort | uniq -d)" ""
    # FNV-1a of the name, mod 4: the same split on every machine
    assert_equal "$(wc -l < s1) $(wc -l < s2) $(wc -l < s3) $(wc -l < s4)" "$SPLIT_200"
    # a glob narrows the selection first, then it is sharded
    acpsnap-replay -d "$BIG" --list 'scn-1*' > sel
    for i in 1 2 3; do acpsnap-replay -d "$BIG" --list --shard $i/3 'scn-1*'; done | LC_ALL=C sort > union
    assert_equal "$(cat union)" "$(LC_ALL=C sort sel)"
}
# the shard sizes of the 200-scenario tree by name hash (pinned: a change of
# the hash or of its byte order would move scenarios between machines)
SPLIT_200="50 50 50 50"

@test "shards: the name hash is FNV-1a of the name's bytes" {
    # FNV-1a 32 of "a" is 0xe40c292c = 3826002220; mod 7 = 5: shard 6
    mkdir -p one/a
    cp "$ROOT/scenarios/handshake/"* one/a/
    cp -r "$ROOT/scenarios/text-turn" one/
    printf '%s\n' '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}' \
        '{"name":"a","hasModelTurn":false,"recorded":false}' > one/scenarios.jsonl
    cp "$ROOT/scenarios/acpsnap-agent.profile" one/
    run -0 acpsnap-replay -d one --list --shard 6/7 a
    assert_output a
    run -0 acpsnap-replay -d one --list --shard 7/7 a
    assert_output ''
    run -0 acpsnap-replay -d one --list --shard 5/8 a
    assert_output a
}

@test "shards: with a timings file, longest first onto the lightest shard; within 20% of the mean" {
    local i n ms
    # skewed durations: a few long scenarios, many short ones
    acpsnap-replay -d "$BIG" --list | while IFS= read -r n; do
        i=$((i + 1))
        ms=$(( (i * 7919) % 997 + 10 ))
        [ $((i % 37)) != 0 ] || ms=$((ms + 4000))
        printf '%s\t%s\n' "$n" "$ms"
    done > timings
    for i in 1 2 3 4; do shard_list $i/4 --timings-in timings > t$i; done
    assert_equal "$(cat t1 t2 t3 t4 | LC_ALL=C sort)" "$(cut -f1 timings | LC_ALL=C sort)"
    assert_equal "$(cat t1 t2 t3 t4 | LC_ALL=C sort | uniq -d)" ""
    local tot=() sum=0 max=0
    for i in 1 2 3 4; do
        tot[i]=$(awk -F '\t' 'NR == FNR { m[$0] = 1; next } ($1 in m) { s += $2 } END { print s + 0 }' t$i timings)
        sum=$((sum + tot[i]))
        [ "${tot[i]}" -le "$max" ] || max=${tot[i]}
    done
    # the largest shard's total within 20% of the mean
    [ $((max * 4 * 100)) -le $((sum * 120)) ] || fail "shard totals ${tot[*]}: the largest is more than 20% over the mean"
    # the ACPSNAP_ variables do the same as the options
    ACPSNAP_SHARD=3/4 ACPSNAP_TIMINGS_IN=timings run -0 acpsnap-replay -d "$BIG" --list
    assert_equal "$output" "$(cat t3)"
}

@test "shards: the greedy assignment, exactly; an unknown scenario gets the median" {
    local i
    tree t 4    # text-turn scn-001 scn-002 scn-003
    printf 'scn-001\t100\nscn-002\t300\ntext-turn\t250\n' > timings
    # scn-003 gets the median, 250. Longest first, ties by name: scn-002 300
    # onto shard 1, scn-003 250 onto shard 2 (empty), text-turn 250 onto
    # shard 2 (250 < 300), scn-001 100 onto shard 1 (300 < 500)
    run -0 acpsnap-replay -d t --list --shard 1/2 --timings-in timings
    assert_output $'scn-001\nscn-002'
    run -0 acpsnap-replay -d t --list --shard 2/2 --timings-in timings
    assert_output $'text-turn\nscn-003'
    # an empty timings file: every scenario counts the same
    : > timings
    for i in 1 2 3; do acpsnap-replay -d t --list --shard $i/3 --timings-in timings; done > union
    assert_equal "$(LC_ALL=C sort union)" "$(acpsnap-replay -d t --list | LC_ALL=C sort)"
    # equal durations: by name, each onto the lowest numbered lightest shard
    printf 'scn-001\t5\nscn-002\t5\nscn-003\t5\ntext-turn\t5\n' > timings
    run -0 acpsnap-replay -d t --list --shard 1/3 --timings-in timings
    assert_output $'text-turn\nscn-001'
}

@test "shards: bad forms are trouble, exit 2, with a precise message" {
    local s
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --shard 0/3
    assert_equal "$stderr" 'acpsnap-replay: --shard 0/3: shards are numbered from 1'
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --shard 4/3
    assert_equal "$stderr" 'acpsnap-replay: --shard 4/3: there is no shard 4 of 3 (1 <= i <= n)'
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --shard x/y
    assert_equal "$stderr" 'acpsnap-replay: --shard x/y: expected i/n, shard i of n (1 <= i <= n)'
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --shard 1/0
    assert_equal "$stderr" 'acpsnap-replay: --shard 1/0: the shard count n must be at least 1'
    for s in 1 /2 1/ 1/2/3 -1/2 ' 1/2' 1/2x 1234567/2; do
        run -2 --separate-stderr acpsnap-replay -d "$BIG" --list --shard "$s"
        assert_equal "$stderr" "acpsnap-replay: --shard $s: expected i/n, shard i of n (1 <= i <= n)"
    done
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --list --shard ''
    assert_equal "$stderr" 'acpsnap-replay: --shard needs a value'
    ACPSNAP_SHARD=5/4 run -2 --separate-stderr acpsnap-replay -d "$BIG" --list
    assert_equal "$stderr" 'acpsnap-replay: ACPSNAP_SHARD 5/4: there is no shard 5 of 4 (1 <= i <= n)'
    # through make, as SHARD=; never interpreted by a shell
    printf 'ACPSNAP_SNAPSHOTS := %s\nACPSNAP_BIN := %s\nACPSNAP_TARGET_PREFIX := acpsnap-\ninclude %s\n' "$BIG" "$BIN" "$ROOT/share/acpsnap.mk" > Makefile
    run -2 make -s acpsnap-list 'SHARD=0/4'
    assert_line 'acpsnap-replay: --shard 0/4: shards are numbered from 1'
    run -2 make -s acpsnap-list 'SHARD=$(touch pwned)1/2;touch pwned'
    [ ! -e pwned ]
    run -0 make -s acpsnap-list SHARD=2/4
    assert_equal "$output" "$(shard_list 2/4)"
}

@test "shards: a bad timings file or report is trouble before anything runs" {
    printf 'scn-001\t12\nscn-002 13\n' > timings
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --shard 1/2 --timings-in timings
    assert_equal "$stderr" 'acpsnap-replay: timings:2: expected a scenario name, a tab and milliseconds'
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --shard 1/2 --timings-in missing
    assert_equal "$stderr" 'acpsnap-replay: missing: unable to read the timings file'
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --report xml:r.xml
    assert_equal "$stderr" 'acpsnap-replay: report xml:r.xml: expected junit:FILE or tap:FILE'
    ACPSNAP_REPORT='junit:' run -2 --separate-stderr acpsnap-replay -d "$BIG"
    assert_equal "$stderr" 'acpsnap-replay: report junit:: expected junit:FILE or tap:FILE'
    run -2 --separate-stderr acpsnap-replay -d "$BIG" --report junit:no/such/r.xml
    assert_equal "$stderr" 'acpsnap-replay: report junit:no/such/r.xml: no/such: no such directory'
}

@test "shards: an empty shard is a successful run of 0 scenarios" {
    need_agent
    tree t 2    # text-turn, scn-001
    local i empty=
    for i in 1 2 3 4 5 6 7 8; do
        [ -n "$(acpsnap-replay -d t --list --shard $i/8)" ] || { empty=$i; break; }
    done
    [ -n "$empty" ]
    run -0 --separate-stderr acpsnap-replay -d t --shard $empty/8 --report junit:r.xml --report tap:r.tap
    assert_output --regexp "^replay: 0 scenarios \(shard $empty/8 of 2\): 0 passed, 0 failed, 0 skipped \([0-9.]+ s\)$"
    assert_equal "$stderr" ''
    run -0 xmllint --noout --schema "$XSD" r.xml
    assert_equal "$(sed -n 2p r.xml)" '<testsuites name="acpsnap" tests="0" failures="0" errors="0" time="0.000">'
    assert_equal "$(cat r.tap)" $'TAP version 13\n1..0'
    # through make: SHARD=, ACPSNAP_REPORT=, ACPSNAP_TIMINGS= taken as they are
    printf 'ACPSNAP_SNAPSHOTS := t\nACPSNAP_BIN := %s\nACPSNAP_TARGET_PREFIX := acpsnap-\ninclude %s\n' "$BIN" "$ROOT/share/acpsnap.mk" > Makefile
    run -0 make -s acpsnap-replay SHARD=$empty/8 'ACPSNAP_REPORT=junit:$(x)`r`.xml' ACPSNAP_TIMINGS=t.tsv
    assert_line --regexp "^replay: 0 scenarios \(shard $empty/8 of 2\)"
    run -0 xmllint --noout --schema "$XSD" '$(x)`r`.xml'
    [ -f t.tsv ] && [ ! -s t.tsv ]
}

@test "reports: a run with a pass, a failure and a skip; JUnit validates against the schema, TAP says the same" {
    need_agent
    command -v pwsh >/dev/null && skip "pwsh is installed: pwshOnly scenarios run"
    small
    run -1 acpsnap-replay -d snap --report junit:r.xml,tap:r.tap
    assert_line --regexp '^FAIL +scn-003 '
    assert_line --regexp '^skip +pwsh-only +[0-9.]+ s  \(needs pwsh\)$'
    run -0 xmllint --noout --schema "$XSD" r.xml
    run -0 sed -E 's/ time="[0-9]+\.[0-9]{3}"//' r.xml
    assert_line --index 1 '<testsuites name="acpsnap" tests="8" failures="1" errors="0">'
    assert_line --index 2 '<testsuite name="snap" tests="8" failures="1" errors="0" skipped="1">'
    assert_line '  <testcase name="scn-001" classname="snap"/>'
    assert_line '  <testcase name="pwsh-only" classname="snap"><skipped message="needs pwsh"/></testcase>'
    # the failure's text is the scenario's detail block, the diff
    run -0 xmllint --xpath 'string(//testcase[@name="scn-003"]/failure)' r.xml
    assert_line '--- scn-003/stdout.expected.jsonl'
    assert_line '-{"jsonrpc":"2.0","id":3,"result":{"sessionId":"{{sessionId}}"}}'
    assert_line '+{"jsonrpc":"2.0","id":2,"result":{"sessionId":"{{sessionId}}"}}'
    assert_line 'to accept this output: make refresh SCENARIO=scn-003'
    run -0 xmllint --xpath 'count(//testcase[@time])' r.xml
    assert_output 8
    # TAP: table order, the plan, the skip, the failure's diagnostics
    run -0 cat r.tap
    assert_line --index 0 'TAP version 13'
    assert_line --index 1 '1..8'
    assert_line --index 2 'ok 1 - text-turn'
    assert_line 'not ok 4 - scn-003'
    assert_line '  status: FAIL'
    assert_line '  exit: 1'
    assert_line '    -{"jsonrpc":"2.0","id":3,"result":{"sessionId":"{{sessionId}}"}}'
    assert_line 'ok 8 - pwsh-only # SKIP needs pwsh'
}

@test "reports: four shard reports merge into the unsharded report, testcase for testcase" {
    need_agent
    small
    run -1 acpsnap-replay -d snap --report junit:all.xml
    local i
    for i in 1 2 3 4; do
        run acpsnap-replay -d snap --shard $i/4 --report junit:shard$i.xml
        [ "$status" -le 1 ]
        run -0 xmllint --noout --schema "$XSD" shard$i.xml
    done
    run -0 acpsnap-report merge -o merged.xml shard1.xml shard2.xml shard3.xml shard4.xml
    run -0 xmllint --noout --schema "$XSD" merged.xml
    # times differ between runs: compare with them left out
    acpsnap-report merge --no-time all.xml > a
    acpsnap-report merge --no-time merged.xml > b
    run -0 diff a b
    [ "$(grep -c '<testcase ' a)" = 8 ]
    # the merge sums the testcase times exactly
    local want
    want=$(sed -nE 's/^  <testcase .* time="([0-9]+)\.([0-9]{3})".*/\1\2/p' merged.xml | awk '{ s += $1 } END { printf "%d.%03d", s / 1000, s % 1000 }')
    assert_equal "$(sed -nE '3s/.* time="([0-9.]+)">$/\1/p' merged.xml)" "$want"
    # merging one report is the identity
    acpsnap-report merge all.xml > again
    run -0 cmp all.xml again
}

@test "reports: escaping: markup, quotes, control characters, invalid UTF-8 and U+FFFE give valid XML" {
    mkdir r
    printf '%s\n' 'a&b' 'q"<t>' 'ctl' > r/.names
    printf 'FAIL 1200\n' > 'r/a&b'; echo 1 > 'r/a&b.rc'
    printf 'x & y < z > "w" \x27s\n\ttab\r\nbell\x07 esc\x1b[0m\nbad \xff\xfe utf8\nnonchar \xef\xbf\xbe end\n' > 'r/a&b.detail'
    printf 'skip 0 (needs "pwsh" & <more>)\n' > 'r/q"<t>'; echo 0 > 'r/q"<t>.rc'
    printf 'FAIL 3\n' > r/ctl; echo 2 > r/ctl.rc
    printf 'agent said \x01\x02\n' > r/ctl.detail
    run -0 acpsnap-report junit -c 'x<&>"' r
    printf '%s\n' "$output" > r.xml
    run -0 xmllint --noout --schema "$XSD" r.xml
    run -0 xmllint --xpath 'string(//testcase[@name="a&b"]/failure)' r.xml
    assert_output $'x & y < z > "w" \'s\n\ttab\r\nbell\\x07 esc\\x1b[0m\nbad \xef\xbf\xbd\xef\xbf\xbd utf8\nnonchar \\ufffe end'
    run -0 xmllint --xpath "string(//testcase[@name='q\"<t>']/skipped/@message)" r.xml
    assert_output 'needs "pwsh" & <more>'
    run -0 xmllint --xpath 'string(//testcase[@name="ctl"]/error)' r.xml
    assert_output 'agent said \x01\x02'
    run -0 xmllint --xpath 'string(//testcase[@name="ctl"]/@classname)' r.xml
    assert_output 'x<&>"'
    # TAP: a name's # is escaped, control characters shown
    printf 'ok 5\n' > 'r/has#hash'; echo 0 > 'r/has#hash.rc'; echo 'has#hash' >> r/.names
    run -0 acpsnap-report tap r
    assert_line 'ok 4 - has\#hash'
    assert_line '    agent said \x01\x02'
    assert_line 'ok 2 - q"<t> # SKIP needs "pwsh" & <more>'
}

@test "reports: report and timings files are written whole, by a rename" {
    need_agent
    tree t 3
    mkdir out
    echo old > out/r.xml
    ln out/r.xml out/r.link          # a write in place would show through the link
    echo old > out/t.tsv
    ln out/t.tsv out/t.link
    run -0 acpsnap-replay -d t --report junit:out/r.xml --timings out/t.tsv
    assert_equal "$(cat out/r.link)" old
    assert_equal "$(cat out/t.link)" old
    run -0 xmllint --noout --schema "$XSD" out/r.xml
    assert_equal "$(ls -A out | LC_ALL=C sort | tr '\n' ' ')" 'r.link r.xml t.link t.tsv '
    # the timings: name<TAB>ms, sorted by name
    run -0 cat out/t.tsv
    assert_equal "$(cut -f1 out/t.tsv | tr '\n' ' ')" 'scn-001 scn-002 text-turn '
    run -0 grep -cE $'^[a-z0-9-]+\t[0-9]+$' out/t.tsv
    assert_output 3
    # acpsnap-report -o the same way; nothing left behind when it fails
    mkdir res
    run -2 --separate-stderr acpsnap-report junit -o out/r.xml no-such-dir
    assert_equal "$stderr" 'acpsnap-report: no-such-dir: no such results directory'
    run -2 --separate-stderr acpsnap-report merge -o out/m.xml out/t.tsv
    assert_equal "$stderr" 'acpsnap-report: out/t.tsv: not a complete JUnit report of acpsnap-report junit'
    assert_equal "$(ls -A out | LC_ALL=C sort | tr '\n' ' ')" 'r.link r.xml t.link t.tsv '
}

@test "progress: -j2 prefixes each verdict line with [k/n] in completion order; -j1 does not; the five slowest" {
    need_agent
    tree t 7
    run -0 acpsnap-replay -d t -j 2 --timings tim
    [ "$(grep -cE '^\[[1-7]/7\] ok +[a-z0-9-]+ +[0-9]+\.[0-9]{3} s$' <<<"$output")" = 7 ]
    assert_equal "$(grep -oE '^\[[0-9]+/7\]' <<<"$output" | tr -d '[]' | cut -d/ -f1 | tr '\n' ' ')" '1 2 3 4 5 6 7 '
    assert_line --regexp '^replay: 7 scenarios: 7 passed, 0 failed, 0 skipped \([0-9.]+ s\)$'
    # the slowest line: five names with their times, slowest first, as the timings say
    local want
    want=$(LC_ALL=C sort -t $'\t' -k 2,2nr -k 1,1 tim | head -5 | awk -F '\t' '{ printf "%s%s %d.%03d s", (NR > 1 ? ", " : ""), $1, $2 / 1000, $2 % 1000 }')
    assert_line "slowest: $want"
    run -0 acpsnap-replay -d t -j 1
    [ "$(grep -cE '^ok +[a-z0-9-]+ +[0-9]+\.[0-9]{3} s$' <<<"$output")" = 7 ]
    refute_output --partial '/7]'
}

@test "acpsnap-report: usage, bad commands and options" {
    run -0 --separate-stderr acpsnap-report --help
    assert_line --index 0 --partial 'usage: acpsnap-report junit'
    run -2 --separate-stderr acpsnap-report
    assert_equal "${stderr%%$'\n'*}" 'acpsnap-report: no command'
    run -2 --separate-stderr acpsnap-report xml r
    assert_equal "${stderr%%$'\n'*}" 'acpsnap-report: unknown command xml'
    run -2 --separate-stderr acpsnap-report junit a b
    assert_equal "$stderr" 'acpsnap-report: junit takes one results directory'
    run -2 --separate-stderr acpsnap-report tap --no-time r
    assert_equal "$stderr" 'acpsnap-report: --no-time is an option of junit and merge'
    run -2 --separate-stderr acpsnap-report merge
    assert_equal "$stderr" 'acpsnap-report: merge needs at least one JUnit file'
    run -2 --separate-stderr acpsnap-report merge missing.xml
    assert_equal "$stderr" 'acpsnap-report: missing.xml: unable to read it'
    # a truncated report is refused
    mkdir r; echo a > r/.names; echo 'ok 1' > r/a; echo 0 > r/a.rc
    acpsnap-report junit r | head -n 3 > cut.xml
    run -2 --separate-stderr acpsnap-report merge cut.xml
    assert_equal "$stderr" 'acpsnap-report: cut.xml: not a complete JUnit report of acpsnap-report junit'
    # an empty results directory: an empty, valid report
    mkdir e
    run -0 acpsnap-report junit e
    printf '%s\n' "$output" > e.xml
    run -0 xmllint --noout --schema "$XSD" e.xml
}

@test "ci templates: valid YAML, four shards through make replay SHARD=i/4, a merge job" {
    local f
    for f in github-actions.yml gitlab-ci.yml; do
        [ -f "$ROOT/share/ci/$f" ] || fail "no share/ci/$f"
        grep -q 'SHARD=' "$ROOT/share/ci/$f"
        grep -q 'acpsnap-report merge' "$ROOT/share/ci/$f"
        grep -q 'ACPSNAP_REPORT=junit:' "$ROOT/share/ci/$f"
    done
    python3 -c 'import yaml' 2>/dev/null || skip "no python3 yaml module: the YAML parse is not checked"
    for f in github-actions.yml gitlab-ci.yml; do
        run -0 python3 -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' "$ROOT/share/ci/$f"
    done
    run -0 python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); print(sorted(d["jobs"]["replay"]["strategy"]["matrix"]["shard"]))' "$ROOT/share/ci/github-actions.yml"
    assert_output '[1, 2, 3, 4]'
    run -0 python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); print(d["replay"]["parallel"])' "$ROOT/share/ci/gitlab-ci.yml"
    assert_output 4
}

@test "ci templates: make install puts them under share/acpsnap/ci" {
    run -0 make -s -n -C "$ROOT" install DESTDIR="$BATS_TEST_TMPDIR/d" PREFIX=/usr
    assert_output --partial "install -d $BATS_TEST_TMPDIR/d/usr/share/acpsnap/ci"
    assert_output --partial 'share/ci/github-actions.yml'
    assert_output --partial 'share/ci/gitlab-ci.yml'
}

@test "progress: -jN and --jobs=N are -j N; a bad count is trouble" {
    cd "$ROOT"
    run -0 acpsnap-replay -d scenarios -j2 --list text-turn
    assert_output text-turn
    run -0 acpsnap-replay -d scenarios --jobs=2 --list text-turn
    assert_output text-turn
    run -2 --separate-stderr acpsnap-replay -d scenarios -j0 --list
    assert_equal "$stderr" 'acpsnap-replay: invalid job count: 0'
}
