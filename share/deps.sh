#!/bin/sh
# Installs the Debian packages acpsnap needs, when any is missing.
# Quiet and fast (one dpkg-query) when everything is present.
set -e
PKGS="build-essential clang libzstd-dev libjq-dev libonig-dev libcurl4-openssl-dev libmicrohttpd-dev bats bats-support bats-assert jq zstd time bc valgrind curl git"
missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $PKGS 2>/dev/null | awk '$1 != "ii" {print $2}')
for p in $PKGS; do dpkg-query -W "$p" >/dev/null 2>&1 || missing="$missing $p"; done
missing=$(echo $missing)
[ -z "$missing" ] && exit 0
echo "deps: installing $missing" >&2
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
