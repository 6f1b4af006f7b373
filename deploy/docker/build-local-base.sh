#!/usr/bin/env bash
# Makes a stand-in for python:3.11-slim-bookworm where no image registry answers: Debian 12
# (debootstrap from the host's own Debian mirror), imported into podman, with Debian's Python
# 3.11, its venv module and ca-certificates. Reused when the tag is already there.
#
#   deploy/docker/build-local-base.sh [TAG]     (default trader-base:bookworm; needs root)
set -euo pipefail

TAG=${1:-trader-base:bookworm}
ENGINE=${IMAGE_ENGINE:-podman}
# What the image's Python needs from Debian; the rest of the image comes from pip.
PACKAGES=python3,python3-venv,ca-certificates

say() { printf 'build-local-base: %s\n' "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }

if "$ENGINE" image inspect "$TAG" >/dev/null 2>&1; then
    say "reusing the local base $TAG (remove it to rebuild: $ENGINE rmi $TAG)"
    exit 0
fi
[[ $ENGINE == podman ]] || die "the local base is imported with podman (IMAGE_ENGINE=$ENGINE)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
((EUID == 0)) || die "debootstrap needs root"

# The host's Debian mirror, from its apt sources (deb822 or one-line), else Debian's own.
mirror=$(
    cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | sed -n 's#^URIs:[[:space:]]*\(https\?://[^[:space:]]*/debian\)/\?$#\1#p' | head -n1
)
if [[ -z $mirror ]]; then
    mirror=$(
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | sed -n 's#^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\(https\?://[^[:space:]]*/debian\)/\?[[:space:]]\+bookworm[[:space:]].*#\2#p' \
            | head -n1
    )
fi
mirror=${mirror:-http://deb.debian.org/debian}

root=$(mktemp -d /var/tmp/trader-base.XXXXXX)
trap 'rm -rf "$root" "$root.log"' EXIT
say "making $TAG: debootstrap bookworm from $mirror (a few minutes)"
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -n 20 "$root.log" >&2; rm -f "$root.log"; die "debootstrap bookworm from $mirror"; }
rm -f "$root.log"
# What a slim image leaves out: package lists and caches.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
tar --numeric-owner -C "$root" -c . \
    | podman import --quiet --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$TAG" >/dev/null \
    || die "podman import of the bookworm root"
say "made the local base $TAG: Debian's /usr/bin/python3.11 stands in for the official image's"
