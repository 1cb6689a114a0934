#!/usr/bin/env bats
# Kill tests of the write path: `make acpsnap-record` is SIGKILLed (its whole
# process group) at random instants of its run, as its first staging entry
# appears, and at the swap itself (ACPSNAP_TEST_PAUSE_BEFORE_SWAP). After
# every kill each scenario is its old or its new state, whole; any other
# entry of the tree is a staging entry that fixture-guard reports; and the
# next run clears it and leaves fixture-guard clean.
#
# The tree: text-turn (a header pin owning both sidecars) and terse-turn (the
# pin of class "terse", which takes its tool schemas from text-turn), recorded
# through replay-serve. Then terse-turn's provider script answers otherwise
# and text-turn's schema sidecar is made stale, so that recording terse-turn
# writes two units: terse-turn/ (stdout and session) and text-turn/ (the
# sidecar: another pin's directory).
#
# "Old" is byte for byte. "New" is byte for byte too, except that a session
# fixture is compared in its normalized form (scrub --session): every
# recording has its own session ids and times. A session fixture of the
# other recording, or a torn one, still differs.
#
# ACPSNAP_KILL_SEED replays a run's random instants.
bats_require_minimum_version 1.5.0
load ../helpers/common

NAMES=(terse-turn text-turn)

text_entry() { # TEXT → a provider script entry answering TEXT
    jq -cn --arg t "$1" '{kind:"chunks",chunks:[{type:"block-start",index:0,blockType:"text"},
      {type:"text-delta",index:0,text:$t},{type:"block-end",index:0,block:{type:"text",text:$t}},
      {type:"finish",reason:{kind:"stop"}}]}'
}

setup_file() {
    [ -x "$BIN/acpsnap-agent" ] || skip "the reference agent is not built"
    local d=$BATS_FILE_TMPDIR n
    cd "$d"
    export TMPDIR=$d/tmp
    mkdir -p "$TMPDIR" snap/text-turn snap/terse-turn states
    cp "$BIN/acpsnap-agent" agent
    sed "s|^command = .*|command = $d/agent|" "$ROOT/scenarios/acpsnap-agent.profile" > snap/agent.profile
    cp "$ROOT/scenarios/terse.conf" snap/
    printf '%s\n' '{"name":"terse-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true,"headerClass":"terse","configPath":"terse.conf","toolSchemasSource":"text-turn"}' \
        '{"name":"text-turn","hasModelTurn":true,"recorded":true,"pinsHeader":true}' > snap/scenarios.jsonl
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Reply with PONG."}]}\n' > snap/text-turn/input.json
    printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"One word."}]}\n' > snap/terse-turn/input.json
    text_entry PONG > snap/text-turn/provider.jsonl
    text_entry OK > snap/terse-turn/provider.jsonl
    printf 'ACPSNAP_SNAPSHOTS := snap\nACPSNAP_BIN := %s\nACPSNAP_TARGET_PREFIX := acpsnap-\ninclude %s\n' "$BIN" "$ROOT/share/acpsnap.mk" > Makefile
    ACPSNAP_PROVIDER=replay-serve make -s acpsnap-record > first.log 2>&1 || { cat first.log >&3; return 1; }
    fixture-guard snap
    # the old state: a new answer to record, a stale sidecar to rewrite
    text_entry FINE > snap/terse-turn/provider.jsonl
    sed -i '0,/"description": "/s//"description": "Stale: /' snap/text-turn/tool-schemas.expected.json
    fixture-guard snap
    cp -a snap old
    # the new state
    ACPSNAP_PROVIDER=replay-serve make -s acpsnap-record SCENARIO=terse-turn > ref.log 2>&1 || { cat ref.log >&3; return 1; }
    grep -Eq '^recorded +terse-turn .*\(wrote stdout.expected.jsonl session.jsonl text-turn/tool-schemas.expected.json\)$' ref.log ||
        { cat ref.log >&3; return 1; }
    mv snap new
    for n in "${NAMES[@]}"; do
        scen_state "old/$n" raw > "states/old.$n"
        scen_state "new/$n" norm > "states/new.$n"
        cmp -s <(scen_state "old/$n" norm) "states/new.$n" && { echo "$n: the record does not change it" >&3; return 1; }
    done
    return 0
}

setup() {
    [ -x "$BIN/acpsnap-agent" ] || skip "the reference agent is not built"
    cd "$BATS_TEST_TMPDIR"
    F=$BATS_FILE_TMPDIR
    SEED=${ACPSNAP_KILL_SEED:-$$}
}

# A scenario directory as one line per entry: kind, mode, path and, for a
# file, a digest of its bytes (raw) or, for a session fixture under norm, of
# its normalized form. Equal lines, equal directories.
scen_state() { # DIR raw|norm
    [ -d "$1" ] || { echo missing; return 0; }
    (cd "$1" && {
        find . -mindepth 1 -printf '%y %m %p\n'
        find . -type f -print0 | xargs -0 -r sha256sum | sed 's/^/# /'
        if [ "$2" = norm ]; then
            for p in ./session*.jsonl; do
                [ -f "$p" ] && printf '@ %s %s\n' "$(scrub --session "$p" 2>&1 | sha256sum | cut -c1-16)" "$p"
            done
        fi
    } | awk '$1 == "#" { h[substr($0, 69)] = substr($2, 1, 16); next }
             $1 == "@" { n[substr($0, 20)] = $2; next }
             { k[NR] = $1; m[NR] = $2; p[NR] = substr($0, length($1) + length($2) + 3) }
             END { for (i in k) print k[i], m[i], p[i], (k[i] != "f" ? "" : p[i] in n ? n[p[i]] : h[p[i]]) }' | LC_ALL=C sort)
}
is_old() { cmp -s <(scen_state "snap/$1" raw) "$F/states/old.$1"; }
is_new() { cmp -s <(scen_state "snap/$1" norm) "$F/states/new.$1"; }

# What a scenario that is neither old nor new holds, file by file: old, new,
# torn (another content), stray (a file neither state has), missing.
describe() { # NAME
    local n=$1 k p raw norm
    local -a old=() new=() torn=() stray=() absent=()
    scen_state "snap/$n" raw > cur.raw
    scen_state "snap/$n" norm > cur.norm
    while read -r k _ p _; do
        [ "$k" = f ] || continue
        raw=$(grep -F " $p " cur.raw) norm=$(grep -F " $p " cur.norm)
        if grep -qxF "$norm" "$F/states/new.$n" && ! grep -qxF "$raw" "$F/states/old.$n"; then new+=("${p#./}")
        elif grep -qxF "$raw" "$F/states/old.$n" && ! grep -qxF "$norm" "$F/states/new.$n"; then old+=("${p#./}")
        elif grep -qF " $p " "$F/states/old.$n" "$F/states/new.$n"; then
            grep -qxF "$raw" "$F/states/old.$n" || torn+=("${p#./}")
        else stray+=("${p#./}"); fi
    done < cur.raw
    while read -r k _ p _; do
        [ "$k" = f ] && ! grep -qF " $p " cur.raw && absent+=("${p#./}")
    done < "$F/states/old.$n"
    printf 'neither old nor new:%s%s%s%s%s' "${old[*]:+ old ${old[*]};}" "${new[*]:+ new ${new[*]};}" \
        "${torn[*]:+ torn ${torn[*]};}" "${stray[*]:+ stray ${stray[*]};}" "${absent[*]:+ missing ${absent[*]};}"
}

# `make acpsnap-record` in the current directory, in a process group of its
# own (PID); not a job of this shell, which reaps it all the same.
start_record() {
    ( ACPSNAP_PROVIDER=replay-serve exec setsid make -s acpsnap-record SCENARIO=terse-turn ) > run.log 2>&1 &
    PID=$!
    disown "$PID"
}
# Is some process of the group still alive (a zombie is not)?
group_alive() { ps -A -o pgid=,stat= | awk -v g="$PID" '$1 == g && $2 !~ /^Z/ {n++} END {exit !n}'; }
kill_record() {
    local i
    kill -KILL -- -"$PID" 2>/dev/null || true
    for i in $(seq 500); do group_alive || return 0; sleep 0.01; done
    failure "the process group $PID outlived SIGKILL"
}
fresh_tree() {
    rm -rf snap tmp && cp -a "$F/old" snap && cp "$F/Makefile" . && mkdir tmp
    export TMPDIR=$PWD/tmp
}
failure() { printf '%s\n' "$*" >> failures; }

# After a kill: each scenario old or new, every other entry a staging entry
# fixture-guard reports, and fixture-guard says nothing else. Returns 0 when
# there are staging entries (the next run has to clear them), else 1.
check_tree() { # LABEL
    local label=$1 n e b guard grc=0 line staged=0
    guard=$(fixture-guard snap 2>&1) || grc=$?
    for n in "${NAMES[@]}"; do
        is_old "$n" || is_new "$n" && continue
        [ ! -e "snap/$n" ] && compgen -G "snap/.$n.acpsnap-old.*" > /dev/null && continue   # the fallback's window
        failure "$label: $n: $(describe "$n")"
    done
    for e in snap/* snap/.* snap/*/.*; do
        b=${e#snap/}
        case $b in .|..|*/.|*/..|scenarios.jsonl|agent.profile|terse.conf|terse-turn|text-turn) continue ;; esac
        [ -e "$e" ] || [ -L "$e" ] || continue
        staged=1
        grep -qE "^fixture-guard: snap/${b//./\\.}: (a staging (directory|file) left by an interrupted record/refresh; remove it|the whole previous )" <<<"$guard" ||
            failure "$label: stray $b: fixture-guard does not report it"
    done
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        [[ $line == *": a staging "*" left by an interrupted record/refresh; remove it" ]] && continue
        [[ $line == *": the whole previous "* ]] && continue
        [[ $line == "fixture-guard: snap/"*": missing scenario directory for table row "* ]] && compgen -G "snap/.*.acpsnap-old.*" > /dev/null && continue
        failure "$label: fixture-guard: ${line#fixture-guard: }"
    done <<<"$guard"
    [ $staged = 1 ] || [ $grc = 0 ] || failure "$label: fixture-guard exits $grc on a tree without staging entries"
    [ $staged = 1 ]
}

# The next write run clears the staging entries: afterwards the tree holds
# nothing else, each scenario is still old or new, and fixture-guard is clean.
# With "full" the run is a whole record, and the tree must be the new one.
check_next_run() { # LABEL [full]
    local label=$1 rc=0 n e
    if [ "${2:-}" = full ]; then
        ACPSNAP_PROVIDER=replay-serve make -s acpsnap-record SCENARIO=terse-turn > next.log 2>&1 || rc=$?
    else
        acpsnap-update -d snap terse-turn > next.log 2>&1 || rc=$?
    fi
    # (each scenario old or new may still mix a class: a member older than
    # its pin fails the replay's header check until the record is run whole)
    [ $rc = 0 ] || { [ $rc = 1 ] && [ "${2:-}" != full ] && grep -q 'differs from its pin' next.log; } ||
        { failure "$label: the next run exits $rc: $(tr '\n' '|' < next.log)"; return 0; }
    grep -q 'left by an interrupted record/refresh$' next.log || failure "$label: the next run clears nothing"
    for e in snap/.* snap/*/.*; do
        case ${e##*/} in .|..) continue ;; esac
        [ -e "$e" ] || [ -L "$e" ] || continue
        failure "$label: ${e#snap/} is still there after the next run"
    done
    fixture-guard snap > /dev/null 2>&1 || failure "$label: fixture-guard is not clean after the next run: $(fixture-guard snap 2>&1 | tr '\n' '|')"
    for n in "${NAMES[@]}"; do
        if [ "${2:-}" = full ]; then is_new "$n" || failure "$label: $n: after a whole next run, $(describe "$n")"
        else is_old "$n" || is_new "$n" || failure "$label: $n: after the next run, $(describe "$n")"; fi
    done
}

report() { # KILLS FAILURES
    [ -s "$2" ] || return 0
    echo "seed $SEED; $(wc -l < "$2") failures in $1 kills:"
    cat "$2"
    echo "by kind:"
    local f
    while IFS= read -r f; do
        case $f in
        *"neither old nor new"*) echo "a scenario neither old nor new (mixed, torn, or with stray files)" ;;
        *"does not report it") echo "a stray entry fixture-guard does not report" ;;
        *": fixture-guard: "*) echo "fixture-guard reports something else" ;;
        *"still there after the next run") echo "an entry the next run leaves" ;;
        *"the next run clears nothing") echo "the next run clears nothing" ;;
        *"never paused"*) echo "no pause before the swap" ;;
        *) echo "${f#*: }" ;;
        esac
    done < "$2" | sort | uniq -c
    return 1
}

# One lane of random kills, in directory lane<L>: a whole run first, for its
# duration under the same load, then kills I = L, L+LANES, ... of KILLS, kill
# I at a random instant of the I-th KILLS-th of that duration (+10%).
lane() { # L LANES KILLS
    local l=$1 lanes=$2 k=$3 i t0 ms at staged=0
    mkdir -p "lane$l" && cd "lane$l" && : > failures
    RANDOM=$((SEED + l))
    fresh_tree
    t0=${EPOCHREALTIME/./}
    ACPSNAP_PROVIDER=replay-serve make -s acpsnap-record SCENARIO=terse-turn > ref.log 2>&1 || failure "lane $l: the whole run fails: $(tr '\n' '|' < ref.log)"
    ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
    check_tree "lane $l whole run" && failure "lane $l: the whole run leaves staging entries"
    for n in "${NAMES[@]}"; do is_new "$n" || failure "lane $l: $n: after the whole run, $(describe "$n")"; done
    for ((i = l; i <= k; i += lanes)); do
        at=$(( ((i - 1) * 1000 + RANDOM % 1000) * ms * 11 / 10 / (k * 1000) ))
        fresh_tree
        start_record
        sleep "$(printf '%d.%03d' $((at / 1000)) $((at % 1000)))"
        kill_record
        if check_tree "kill $i at $at of $ms ms"; then staged=$((staged + 1)); check_next_run "kill $i at $at of $ms ms"; fi
    done
    echo "lane $l: run $ms ms, $(( (k - l) / lanes + 1 )) kills, $staged left staging entries" > summary
}

@test "atomic: SIGKILL at 50 random instants of a record leaves each scenario old or new, and the guard reports what is left" {
    local k=50 lanes=2 l
    for ((l = 1; l <= lanes; l++)); do ( set +eE; trap - ERR; lane "$l" "$lanes" "$k" ) & done
    wait
    cat lane*/summary >&3
    cat lane*/failures > failures
    report "$k" failures
    for ((l = 1; l <= lanes; l++)); do [ -s "lane$l/summary" ] || fail "lane $l did not finish"; done
}

# Waits until the run pauses before a swap (PAUSE exists): 1 when it ends first.
wait_pause() { # PAUSE
    local t
    for t in $(seq 1500); do
        [ -e "$1" ] && return 0
        group_alive || return 1
        sleep 0.02
    done
    return 1
}

@test "atomic: SIGKILL at the swap and as staging begins leaves each scenario old or new, and the next run clears it" {
    local i d pause=$BATS_TEST_TMPDIR/pause unit n=0
    : > failures
    # at the test hook, before each swap of the run (terse-turn/ and text-turn/)
    for unit in 1 2; do
        fresh_tree
        rm -f "$pause"
        export ACPSNAP_TEST_PAUSE_BEFORE_SWAP=$pause
        start_record
        unset ACPSNAP_TEST_PAUSE_BEFORE_SWAP
        for i in $(seq "$unit"); do
            wait_pause "$pause" || { failure "swap $unit: the run never paused before swap $i: $(tr '\n' '|' < run.log)"; break; }
            [ "$i" = "$unit" ] || rm -f "$pause"
        done
        kill_record
        n=$((n + 1))
        if check_tree "kill at swap $unit"; then check_next_run "kill at swap $unit" full
        else failure "kill at swap $unit: no staging entry was left"; fi
    done
    # as the first staging entry appears, then 5, 10, ... 35 ms later
    for d in 0 5 10 15 20 25 30 35; do
        fresh_tree
        start_record
        until compgen -G 'snap/.*.acpsnap-*' > /dev/null || compgen -G 'snap/*/.*.acpsnap-*' > /dev/null; do
            kill -0 "$PID" 2>/dev/null || break
        done
        [ "$d" = 0 ] || sleep "0.0$(printf '%02d' "$d")"
        kill_record
        n=$((n + 1))
        if check_tree "kill ${d} ms into staging"; then check_next_run "kill ${d} ms into staging"; fi
    done
    report "$n" failures
}
