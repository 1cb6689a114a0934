# man-examples.bash - runs the EXAMPLES section of an mdoc page as a test.
#
# man_examples_extract PAGE   prints the examples as records:
#     @item dl|block LINE       a .Dl line or a .Bd -literal block, at LINE
#     @file NAME | @status N | @skip REASON    test directives (see below)
#     |text                     one line of the example, roff escapes decoded
#     @end
# man_examples_script PAGE    prints a bash script that runs them, one
#                             command at a time, in the current directory.
#
# Test directives are roff comments, invisible on the rendered page:
#     .\" test: file NAME     the next block is the content of file NAME
#                             (data the following commands use), not commands
#     .\" test: status N      the next command must exit N (default 0)
#     .\" test: skip REASON   the next block or .Dl line is not run; REASON
#                             (required) says why, e.g. it needs an API key
# Before a .Bd or .Dl a directive applies to that example; inside a block,
# status applies to the command that starts on the next line.
#
# A block is a list of shell commands, one after the other: a command ends
# where its lines form complete shell syntax (so pipelines continued with |,
# && or \, and for/while loops, are one command). A block whose first line
# starts with "$ " is a transcript: each "$ " line is a command and the lines
# after it are its expected output (stdout and stderr together), compared
# exactly; a command line ending in \ goes on in the next line. "$ cat FILE"
# followed by its output creates FILE with that output when it is missing
# (and, like any transcript, checks it when it is there).
# Every command must exit 0 unless a status directive says otherwise; the
# script runs under set -e -o pipefail, so a failure inside a loop or a
# pipeline counts too.

man_examples_extract() {
    awk -v page="$1" '
    function fail(msg) { printf "%s:%d: %s\n", page, NR, msg > "/dev/stderr"; bad = 1; exit 2 }
    function decode(s,    out, c, n, name) {
        out = ""
        while ((n = index(s, "\\")) > 0) {
            out = out substr(s, 1, n - 1); c = substr(s, n + 1, 1); s = substr(s, n + 2)
            if (c == "e" || c == "\\") out = out "\\"
            else if (c == "-") out = out "-"
            else if (c == "&") out = out ""
            else if (c == " ") out = out " "
            else if (c == "(" || c == "[") {
                if (c == "(") { name = substr(s, 1, 2); s = substr(s, 3) }
                else { n = index(s, "]"); if (!n) fail("unterminated \\[ escape"); name = substr(s, 1, n - 1); s = substr(s, n + 1) }
                if (name == "dq") out = out "\""
                else if (name == "aq") out = out "\047"
                else if (name == "ga") out = out "`"
                else if (name == "ti") out = out "~"
                else if (name == "ha") out = out "^"
                else if (name == "rs") out = out "\\"
                else if (name == "em") out = out "--"
                else fail("escape \\(" name " in an example: the test cannot run it")
            }
            else fail("escape \\" c " in an example: the test cannot run it")
        }
        return out s
    }
    function directive(line,    d) {
        d = line; sub(/^\.\\" test: */, "", d)
        if (d ~ /^file [^ ]+$/) { sub(/^file /, "", d); return "@file " d }
        if (d ~ /^status [0-9]+$/) { sub(/^status /, "", d); return "@status " d }
        if (d ~ /^skip [^ ]/) { sub(/^skip /, "", d); return "@skip " d }
        fail("unknown test directive: " line)
    }
    /^\.Sh / { inex = ($0 ~ /^\.Sh +EXAMPLES *$/); if (inblock) fail(".Sh inside a literal block"); next }
    !inex { next }
    inblock && /^\.Ed/ { print "@end"; inblock = 0; next }
    /^\.\\" test:/ { d = directive($0); if (inblock) print d; else pending = pending d "\n"; next }
    /^\.\\"/ { next }
    inblock && /^[.\047]/ { fail("a macro inside an example block: " $0) }
    inblock { print "|" decode($0); next }
    /^\.Bd +-literal/ { printf "@item block %d\n%s", NR, pending; pending = ""; inblock = 1; next }
    /^\.Dl / {
        s = $0; sub(/^\.Dl +/, "", s)
        if (s ~ /"/) fail("a raw \" in a .Dl line (mdoc eats it): use \\(dq or a literal block")
        n = split(s, w, / +/)
        for (i = 1; i <= n; i++)
            if (w[i] ~ /^(Ar|Fl|Li|Ns|No|Pa|Cm|Ql|Sq|Dq|Pq|Op|Em|Sy|Xr|Ev|Va|Ic)$/)
                fail("mdoc macro name " w[i] " in a .Dl line: use a literal block")
        printf "@item dl %d\n%s|%s\n@end\n", NR, pending, decode(s); pending = ""; next
    }
    /^\.Bd/ && pending != "" { fail("a test directive before a non-literal display") }
    END { if (!bad && inblock) fail("unterminated literal block"); if (!bad && pending != "") fail("a test directive with no example after it") }
    ' "$1"
}

# The script: a prologue, then one step per command.
man_examples_script() {
    local page=$1 recs line item= where= file= status= skip= buf= kind= n=0
    local -a lines=()
    recs=$(man_examples_extract "$page") || return 2
    cat <<'EOF'
set -e -o pipefail
__cur=
trap '__s=$?; set +e; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; if [ $__s -ne 0 ]; then printf "man-examples: %s\n%s\n" "$__where" "$__cur" >&2; fi; exit $__s' EXIT
__expect() { # want got: the status a command must exit with
    [ "$2" -eq "$1" ] || { printf "man-examples: exit status %s, expected %s\n" "$2" "$1" >&2; exit 1; }
}
EOF
    while IFS= read -r line; do
        case $line in
        "@item "*) set -- $line; kind=$2; where="$page:$3"; lines=(); file=; status=; skip= ;;
        "@file "*) file=${line#@file } ;;
        "@status "*) lines+=("$line") ;;
        "@skip "*) skip=${line#@skip } ;;
        "|"*) lines+=("${line#|}") ;;
        "@end")
            if [ -n "$skip" ]; then
                printf '# %s: skipped: %s\n' "$where" "$skip"; continue
            fi
            if [ -n "$file" ]; then
                printf '__where=%q; __cur=%q\n' "$where" "(writing $file)"
                printf 'mkdir -p -- "$(dirname -- %q)"\n' "$file"
                printf 'cat > %q <<'"'"'__ACPSNAP_EOF'"'"'\n' "$file"
                printf '%s\n' "${lines[@]}" | grep -v '^@status '
                printf '__ACPSNAP_EOF\n'
                continue
            fi
            _man_examples_steps "$where" "${lines[@]}" || return 2
            ;;
        esac
    done <<<"$recs"
    echo 'trap - EXIT; set +e; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; exit 0'
}

# One block's commands: transcript ("$ " lines) or plain.
_man_examples_steps() {
    local where=$1; shift
    local l cmd= want=0 first=1 transcript=0 out= catfile= nout=0
    local -a outs=()
    for l in "$@"; do
        case $l in @status*) continue ;; '') continue ;; esac
        [[ $l == '$ '* ]] && transcript=1; break
    done
    _emit() { # cmd want [expected-output-or-unset] [catfile]
        printf '__where=%q; __cur=%q\n' "$where" "$1"
        if [ -n "$4" ]; then
            printf '[ -e %q ] || cat > %q <<'"'"'__ACPSNAP_EOF'"'"'\n%s\n__ACPSNAP_EOF\n' "$4" "$4" "$3"
        fi
        if [ "$transcript" = 1 ]; then
            printf 'set +e; { %s\n} > .man-example.out 2>&1; __s=$?; set -e; __expect %s $__s\n' "$1" "$2"
            if [ "$nout" = 0 ]; then
                printf 'diff -u --label expected --label actual /dev/null .man-example.out >&2 || { echo "man-examples: the page shows no output" >&2; exit 1; }\n'
            else
                printf 'diff -u --label expected --label actual - .man-example.out <<'"'"'__ACPSNAP_EOF'"'"' >&2 || { echo "man-examples: the output differs from the page" >&2; exit 1; }\n%s\n__ACPSNAP_EOF\n' "$3"
            fi
            printf 'rm -f .man-example.out\n'
        elif [ "$2" = 0 ]; then
            printf '%s\n' "$1"
            printf '__s=$?; __expect 0 $__s\n'
        else
            printf 'set +e; %s\n__s=$?; set -e; __expect %s $__s\n' "$1" "$2"
        fi
    }
    if [ "$transcript" = 1 ]; then
        local have=0
        for l in "$@"; do
            if [[ $l == '@status '* ]]; then
                [ "$have" = 1 ] && { _emit "$cmd" "$want" "$out" "$catfile"; have=0; want=0; }
                want=${l#@status }; continue
            fi
            if [[ $l == '$ '* ]]; then
                [ "$have" = 1 ] && { _emit "$cmd" "$want" "$out" "$catfile"; want=0; }
                cmd=${l#\$ }; out=; catfile=; have=1; first=1; nout=0
                [[ $cmd =~ ^cat\ ([^\ \|\<\>\;\&]+)$ ]] && catfile=${BASH_REMATCH[1]}
                continue
            fi
            [ "$have" = 1 ] || { echo "$where: output before the first \$ command" >&2; return 2; }
            if [ "$first" = 1 ] && [[ $cmd == *\\ ]]; then cmd+=$'\n'$l; continue; fi
            if [ "$first" = 1 ]; then out=$l; first=0; else out+=$'\n'$l; fi; nout=1
        done
        [ "$have" = 1 ] && _emit "$cmd" "$want" "$out" "$catfile"
        return 0
    fi
    for l in "$@"; do
        if [[ $l == '@status '* ]]; then
            [ -n "$cmd" ] && { echo "$where: a status directive inside a command" >&2; return 2; }
            want=${l#@status }; continue
        fi
        if [ -z "$cmd" ]; then [ -n "$l" ] || continue; cmd=$l; else cmd+=$'\n'$l; fi
        [[ $cmd == *\\ ]] && continue
        bash -n <<<"$cmd" 2>/dev/null || continue
        _emit "$cmd" "$want"; cmd=; want=0
    done
    [ -z "$cmd" ] || { printf '%s: an incomplete shell command:\n%s\n' "$where" "$cmd" >&2; return 2; }
}
