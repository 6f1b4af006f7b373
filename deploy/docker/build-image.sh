#!/usr/bin/env bash
# Builds the trader image with docker (BuildKit) or podman, for the GPU or the CPU torch build,
# passing the host's pip configuration and CA bundle as build secrets (never into a layer).
#
#   deploy/docker/build-image.sh        (make image; settings from the environment)
#
#   IMAGE_ENGINE  docker | podman (default: docker if its daemon answers, else podman)
#   TORCH         gpu (default: PyPI's CUDA torch, sm_120 checked) | cpu (torch's CPU build)
#   BASE          registry (default: python:3.11-slim-bookworm) | local (a Debian 12 base made
#                 here, build-local-base.sh) | auto (local unless the registry answers)
#   IMAGE         the tag (default trader:latest, trader:cpu for TORCH=cpu)
#   TARGET        runtime (default) | compile (+ the C toolchain torch.compile needs)
#   TORCH_INDEX_URL  torch's index (default: the configured ones; for TORCH=cpu without a host
#                 pip configuration, https://download.pytorch.org/whl/cpu)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
say() { printf 'build-image: %s\n' "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }

TORCH=${TORCH:-gpu}
BASE=${BASE:-registry}
TARGET=${TARGET:-runtime}
# Fully qualified: podman may have no short-name aliases.
REGISTRY_IMAGE=docker.io/library/python:3.11-slim-bookworm
LOCAL_BASE=trader-base:bookworm

engine=${IMAGE_ENGINE:-}
if [[ -z $engine ]]; then
    if command -v docker >/dev/null && timeout 10 docker version --format '{{.Server.Version}}' \
        >/dev/null 2>&1; then
        engine=docker
    elif command -v podman >/dev/null; then
        engine=podman
    else
        die "no container engine: neither a docker daemon nor podman answers"
    fi
fi
[[ $engine == docker || $engine == podman ]] || die "IMAGE_ENGINE=$engine: docker or podman"
command -v "$engine" >/dev/null || die "IMAGE_ENGINE=$engine is not installed"

if [[ $engine == podman ]]; then
    conf=$("$here/podman-conf.sh")
    if [[ -n $conf ]]; then
        export CONTAINERS_CONF=$conf
        say "podman with $conf (runc, ulimits within this host's hard limits)"
    fi
fi

case $TORCH in
    gpu) arch=sm_120 tag=trader:latest ;;
    cpu) arch=cpu tag=trader:cpu ;;
    *) die "TORCH=$TORCH: gpu or cpu" ;;
esac
IMAGE=${IMAGE:-$tag}

# Answers within seconds where a registry is reachable; no pull waits on a long timeout.
registry_answers() {
    python3 - <<'PY'
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen("https://registry-1.docker.io/v2/", timeout=8)
except urllib.error.HTTPError:
    pass  # 401: it answers, and wants a token
except OSError:
    sys.exit(1)
PY
}
if [[ $BASE == auto ]]; then
    if "$engine" image inspect "$REGISTRY_IMAGE" >/dev/null 2>&1 || registry_answers; then
        BASE=registry
    else
        BASE=local
        say "no image registry answers: building on the local base"
    fi
fi
case $BASE in
    registry) base=$REGISTRY_IMAGE ;;
    local)
        IMAGE_ENGINE=$engine "$here/build-local-base.sh" "$LOCAL_BASE"
        base=$LOCAL_BASE
        ;;
    *) die "BASE=$BASE: registry, local or auto" ;;
esac

# The host's pip configuration: a private folder, removed on exit, read only by the engine.
secrets=$(mktemp -d)
trap 'rm -rf "$secrets"' EXIT
python3 "$here/pip_secrets.py" "$secrets" >"$secrets/folders" \
    || die "reading the host's pip configuration (deploy/docker/pip_secrets.py)"
mapfile -t folders <"$secrets/folders"
if [[ -s $secrets/pip.conf ]]; then
    say "passing the host's pip configuration and CA bundle as build secrets"
else
    say "no pip configuration on this host: the build uses PyPI"
fi
index=${TORCH_INDEX_URL-}
if [[ $TORCH == cpu && -z ${TORCH_INDEX_URL+set} && ! -s $secrets/pip.conf ]]; then
    index=https://download.pytorch.org/whl/cpu
fi

args=(
    build --target "$TARGET" --tag "$IMAGE" --file "$root/Dockerfile"
    --build-arg "PYTHON_IMAGE=$base" --build-arg "TORCH_REQUIRE_ARCH=$arch"
    --build-arg "TORCH_INDEX_URL=$index"
    --secret "id=pip.conf,src=$secrets/pip.conf" --secret "id=pip-cert,src=$secrets/pip-cert"
)
if [[ $engine == podman ]]; then
    # Docker's format keeps the HEALTHCHECK (OCI's has none); the indexes' folders read-only.
    args+=(--format docker --layers)
    for folder in "${folders[@]}"; do
        args+=(--volume "$folder:$folder:ro")
    done
else
    export DOCKER_BUILDKIT=1
    ((${#folders[@]} == 0)) || die "the host's pip configuration names local folders" \
        "(${folders[*]}): docker build cannot mount them; build with IMAGE_ENGINE=podman," \
        "or serve them over HTTP and name that URL in pip's configuration"
fi

say "building $IMAGE ($TORCH torch, target $TARGET, base $base) with $engine"
start=$SECONDS
hint=
[[ $BASE == registry ]] && hint=" (where $REGISTRY_IMAGE cannot be pulled: BASE=local)"
"$engine" "${args[@]}" "$root" || die "$engine build of $IMAGE$hint"
say "built $IMAGE in $((SECONDS - start)) s"
