#!/usr/bin/env bash
# Per-scenario cost of a replay (target: <= 10 ms per scenario at -j1): the
# whole pipeline (acp-drive + scrub + compare) at -j1 and -j2 (median of 5
# suite runs / scenario count), acp-drive alone, the agent's own start-up,
# the cost of any process here for scale, peak RSS of acp-drive, and the
# processes started per scenario (an strace count, when strace exists).
# Uses scenarios/ when it has a table, else a small tree recorded here
# through replay-serve. Prints figures; asserts nothing.
set -euo pipefail
root=$PWD
bin=$root/${ACPSNAP_BUILD:-build/rel}/bin
export PATH="$bin:$PATH"
tmp=${BENCH_TMP:-$(mktemp -d)}/replay
mkdir -p "$tmp"
export TMPDIR=$tmp/t
mkdir -p "$TMPDIR"
[ -x "$bin/acpsnap-agent" ] || { echo "replay: the reference agent is not built; skipped"; exit 0; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# microseconds, read without starting a process (bash's EPOCHREALTIME)
now_us() { NOW=${EPOCHREALTIME/./}; }

if [ -r scenarios/scenarios.jsonl ]; then
    snap=$root/scenarios
    profile=$root/scenarios/acpsnap-agent.profile
else
    snap=$tmp/snap
    mkdir -p "$snap"
    cp "$bin/acpsnap-agent" "$tmp/agent"
    sed "s|^command = .*|command = $tmp/agent|" scenarios/acpsnap-agent.profile > "$snap/agent.profile"
    profile=$snap/agent.profile
    : > "$snap/scenarios.jsonl"
    for i in 1 2 3 4 5 6; do
        n=turn-$i
        mkdir -p "$snap/$n"
        pin=false; [ $i = 1 ] && pin=true
        printf '{"name":"%s","hasModelTurn":true,"recorded":true,"pinsHeader":%s}\n' "$n" "$pin" >> "$snap/scenarios.jsonl"
        printf '{"steps":[{"op":"initialize"},{"op":"newSession"},{"op":"prompt","text":"Run echo %s, then say DONE."}]}\n' "$i" > "$snap/$n/input.json"
        jq -cn --arg c "echo $i" '{kind:"chunks",chunks:([{type:"block-start",index:0,blockType:"reasoning"}]
          + [range(40) | {type:"reasoning-delta",index:0,text:" thinking"}]
          + [{type:"block-start",index:1,blockType:"tool-call"},
             {type:"tool-call-delta",index:1,id:"call_1",name:"bash",argumentsDelta:""},
             {type:"tool-call-delta",index:1,id:"call_1",name:"bash",argumentsDelta:({command:$c}|tojson)},
             {type:"finish",reason:{kind:"tool-calls"}}])}' > "$snap/$n/provider.jsonl"
        jq -cn '{kind:"chunks",chunks:([{type:"block-start",index:0,blockType:"text"}]
          + [range(20) | {type:"text-delta",index:0,text:"DONE "}] + [{type:"finish",reason:{kind:"stop"}}])}' >> "$snap/$n/provider.jsonl"
    done
    ACPSNAP_PROVIDER=replay-serve "$bin/acpsnap-record" -d "$snap" > "$tmp/record.out" 2>&1 || { cat "$tmp/record.out"; exit 1; }
fi
names=$("$bin/acpsnap-replay" -d "$snap" -p "$profile" --list)
count=$(wc -l <<<"$names")
echo "replay: $count scenarios from $snap"

# the agent's own start-up: a replay-mode agent reading end of input at once
first=${names%%$'\n'*}
"$bin/acp-drive" -p "$profile" -o "$tmp/out" "$snap/$first" >/dev/null 2>&1 || true
agent_us=()
if [ -r "$tmp/out/replay.jsonl" ]; then
    for k in 1 2 3 4 5; do
        mkdir -p "$tmp/agent-sessions"
        now_us; t0=$NOW
        ACPSNAP_SNAPSHOT=replay ACPSNAP_REPLAY_SCRIPT=$tmp/out/replay.jsonl ACPSNAP_SESSIONS_ROOT=$tmp/agent-sessions "$bin/acpsnap-agent" < /dev/null > /dev/null 2>&1 || true
        now_us; agent_us+=($((NOW - t0)))
    done
fi
# the cost of starting any process here, for scale
true_us=()
for k in 1 2 3 4 5; do now_us; t0=$NOW; /bin/true; now_us; true_us+=($((NOW - t0))); done

# acp-drive alone, per scenario
drive_ms=() rss=()
for n in $names; do
    t=()
    for k in 1 2 3 4 5; do
        now_us; t0=$NOW
        "$bin/acp-drive" -p "$profile" -o "$tmp/out" "$snap/$n" > /dev/null 2>&1 || true
        now_us; t+=($((NOW - t0)))
    done
    /usr/bin/time -f %M -o "$tmp/rss" "$bin/acp-drive" -p "$profile" -o "$tmp/out" "$snap/$n" > /dev/null 2>&1 || true
    rss+=("$(cat "$tmp/rss")")
    drive_ms+=("$(printf '%s\n' "${t[@]}" | median)")
done
us() { printf '%d.%03d ms' $(($1 / 1000)) $(($1 % 1000)); }
printf '  acp-drive per scenario (median of 5, us): %s\n' "${drive_ms[*]}"
printf '  acp-drive alone per scenario: %s (median over scenarios); peak RSS %s KB\n' \
    "$(us "$(printf '%s\n' "${drive_ms[@]}" | median)")" "$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)"
[ ${#agent_us[@]} = 0 ] || printf '  the agent'"'"'s own start-up (replay mode, end of input at once): %s (median of 5)\n' \
    "$(us "$(printf '%s\n' "${agent_us[@]}" | median)")"
true_med=$(printf '%s\n' "${true_us[@]}" | median)
printf '  any process here (/bin/true, for scale): %s (median of 5)\n' "$(us "$true_med")"

# the whole pipeline, sequential and with -j2
for j in 1 2; do
    t=()
    for k in 1 2 3 4 5; do
        now_us; t0=$NOW
        "$bin/acpsnap-replay" -d "$snap" -p "$profile" -j $j > "$tmp/replay.out" 2>&1 || { cat "$tmp/replay.out"; break; }
        now_us; t+=($((NOW - t0)))
    done
    m=$(printf '%s\n' "${t[@]}" | median)
    # per scenario, also as a multiple of starting any process: what a
    # machine whose fork and exec cost more or less than this one's sees
    printf '  acpsnap-replay -j%d: suite %s (median of 5), %s per scenario (target: <= 10 ms), %s times /bin/true\n' \
        "$j" "$(us "$m")" "$(us $((m / count)))" "$(awk -v a="$m" -v n="$count" -v t="$true_med" 'BEGIN { printf "%.1f", a / n / (t > 0 ? t : 1) }')"
done

# The file system's share: the same -j1 suite with its scratch (TMPDIR: the
# runs' directories, the agent's cwd and sessions root) on a tmpfs, runs
# interleaved with ones on the default TMPDIR so that both see one phase of
# the machine. /tmp here is often a disk file system, where each directory
# and file a run creates and removes costs the journal (and, mounted with
# discard, a discard request on removal).
shm=${BENCH_TMPFS:-/dev/shm}
if [ "$(stat -f -c %T "$shm" 2>/dev/null)" = tmpfs ] && [ -w "$shm" ] && fs=$(mktemp -d "$shm/acpsnap-bench.XXXXXX"); then
    td=() ts=()
    for k in 1 2 3 4 5; do
        now_us; t0=$NOW
        "$bin/acpsnap-replay" -d "$snap" -p "$profile" -j1 > "$tmp/replay.out" 2>&1 || { cat "$tmp/replay.out"; break; }
        now_us; td+=($((NOW - t0)))
        now_us; t0=$NOW
        TMPDIR=$fs "$bin/acpsnap-replay" -d "$snap" -p "$profile" -j1 > "$tmp/replay.out" 2>&1 || { cat "$tmp/replay.out"; break; }
        now_us; ts+=($((NOW - t0)))
    done
    rm -rf "$fs"
    a=$(printf '%s\n' "${td[@]}" | median) b=$(printf '%s\n' "${ts[@]}" | median)
    printf '  acpsnap-replay -j1, TMPDIR on tmpfs (%s): %s per scenario against %s with TMPDIR on %s, runs interleaved (%s the time)\n' \
        "$shm" "$(us $((b / count)))" "$(us $((a / count)))" "$(stat -f -c %T "$TMPDIR")" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2fx", b / a }')"
else
    echo "  acpsnap-replay -j1, TMPDIR on tmpfs: no writable tmpfs at $shm; not measured"
fi

# processes per scenario: execve calls that succeeded, over the whole -j1
# suite and over one scenario (the difference is the per-scenario share)
if command -v strace >/dev/null; then
    execs() { # GLOB...
        strace -f -qq -e trace=execve -o "$tmp/strace" "$bin/acpsnap-replay" -d "$snap" -p "$profile" -j1 "$@" > /dev/null 2>&1 || true
        grep -c 'execve(.*= 0$' "$tmp/strace" || true
    }
    all=$(execs) one=$(execs "$first")
    if [ "$count" -gt 1 ]; then
        printf '  processes: %d for the suite (%d.%d per scenario); %d for one scenario; %d.%d more per added scenario\n' \
            "$all" $((all / count)) $((all * 10 / count % 10)) "$one" \
            $(( (all - one) / (count - 1) )) $(( (all - one) * 10 / (count - 1) % 10 ))
    else
        printf '  processes: %d for the one scenario\n' "$all"
    fi
else
    echo "  processes: strace not found; not counted"
fi
echo "  reference (dsh): about 1200 ms per scenario plus several seconds of test-runner start-up"
