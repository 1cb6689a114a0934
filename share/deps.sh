#!/bin/sh
# What acpsnap needs to build and test.
#
#   deps.sh           installs the missing Debian packages (apt-get, as root or
#                     through sudo); quiet and fast (one dpkg-query) when
#                     everything is present. Without dpkg-query it checks instead.
#   deps.sh --check   any system: names each missing header, library and
#                     command, and exits 1 when one is missing. CC (default cc)
#                     compiles the probes; BATS_LIB_PATH (default /usr/lib/bats)
#                     is where bats-support and bats-assert must be.
#   --agents          also what make check-agents needs: the npm command, which
#                     installs the examples' agents (the Debian package npm
#                     when the command is missing).
set -e
check_only= agents=
for a in "$@"; do
    case $a in
    --check) check_only=1 ;;
    --agents) agents=1 ;;
    *) echo "usage: deps.sh [--check] [--agents]" >&2; exit 2 ;;
    esac
done
PKGS="build-essential pkg-config clang libzstd-dev libjq-dev libonig-dev libcurl4-openssl-dev libmicrohttpd-dev bash-builtins bats bats-support bats-assert parallel jq zstd time bc valgrind curl git libxml2-utils"

check() {
    CC=${CC:-cc}
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/acpsnap-deps.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    missing=0
    miss() { echo "deps: missing $*" >&2; missing=1; }
    note() { echo "deps: note: $*" >&2; }
    have() { command -v "$1" >/dev/null 2>&1; }

    for c in "${CC%% *}" make bash jq zstd bats curl git clang flock xmllint; do
        have "$c" || miss "command: $c"
    done
    # header [cflags]: compiles #include <header>
    header() {
        printf '#include <%s>\nint main(void) { return 0; }\n' "$1" > "$tmp/h.c"
        # shellcheck disable=SC2086
        $CC -fsyntax-only $2 "$tmp/h.c" 2>/dev/null
    }
    # library -lx: links a program against it
    library() {
        printf 'int main(void) { return 0; }\n' > "$tmp/l.c"
        # shellcheck disable=SC2086
        $CC -o "$tmp/l" "$tmp/l.c" "$1" 2>/dev/null
    }
    pc() { pkg-config "$@" 2>/dev/null || true; }
    if have "${CC%% *}"; then
        header zstd.h || miss "header: zstd.h (libzstd development files)"
        library -lzstd || miss "library: -lzstd (libzstd)"
        header jq.h || miss "header: jq.h (libjq development files)"
        library -ljq || miss "library: -ljq (libjq)"
        header microhttpd.h "$(pc --cflags libmicrohttpd)" || miss "header: microhttpd.h (libmicrohttpd development files)"
        library -lmicrohttpd || miss "library: -lmicrohttpd (libmicrohttpd)"
        header curl/curl.h "$(pc --cflags libcurl)" || miss "header: curl/curl.h (libcurl development files)"
        library -lcurl || miss "library: -lcurl (libcurl: replay-serve's recording mode; the agent's live mode loads it at run time)"
    fi
    if have clang; then
        printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' > "$tmp/f.c"
        clang -fsanitize=fuzzer,address,undefined -o "$tmp/f" "$tmp/f.c" 2>/dev/null \
            || miss "library: clang's libFuzzer and sanitizer runtimes (-fsanitize=fuzzer,address,undefined)"
    fi
    for l in bats-support bats-assert; do
        found=
        old_ifs=$IFS; IFS=:
        for d in ${BATS_LIB_PATH:-/usr/lib/bats}; do
            if [ -f "$d/$l/load.bash" ] || [ -f "$d/$l" ]; then found=1; fi
        done
        IFS=$old_ifs
        [ -n "$found" ] || miss "bats library: $l (in BATS_LIB_PATH=${BATS_LIB_PATH:-/usr/lib/bats})"
    done
    [ -z "$agents" ] || have npm || miss "command: npm (make check-agents installs the examples' agents with it)"
    have pkg-config || note "no pkg-config: linking -lzstd -lmicrohttpd as they are"
    parallel --version 2>/dev/null | grep -q 'GNU parallel' || note "no GNU parallel: the bats suites run one test at a time"
    have valgrind || note "no valgrind: test/agent-valgrind.bats is skipped"
    bash -c 'IFS=:; for d in ${BASH_LOADABLES_PATH:-/usr/lib/bash}; do [ -r "$d/mktemp" ] && [ -r "$d/mkdir" ] && [ -r "$d/rm" ] && exit 0; done; exit 1' 2>/dev/null \
        || note "no loadable builtins for bash (Debian: bash-builtins): the pipelines make and remove their scratch with mktemp, mkdir and rm processes"
    [ $missing -eq 0 ] || { echo "deps: install the above (INSTALL lists the Debian package names)" >&2; exit 1; }
}

if [ -n "$check_only" ]; then
    check
    exit 0
fi
if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: no dpkg-query, so no automatic install; checking instead" >&2
    check
    exit 0
fi

# npm by its command: Node.js from elsewhere may bring its own
if [ -n "$agents" ] && ! command -v npm >/dev/null 2>&1; then PKGS="$PKGS npm"; fi
missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $PKGS 2>/dev/null | awk '$1 != "ii" {print $2}')
for p in $PKGS; do dpkg-query -W "$p" >/dev/null 2>&1 || missing="$missing $p"; done
missing=$(echo $missing)
[ -z "$missing" ] && exit 0
echo "deps: installing $missing" >&2
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
