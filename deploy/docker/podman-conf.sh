#!/usr/bin/env bash
# Prints the containers.conf podman needs on this host (deploy/docker/containers.conf), or
# nothing where podman's defaults work. They fail without CAP_SYS_RESOURCE when the host's hard
# limits are below the ulimits podman asks for (nofile 1048576, nproc 4194304): the runtime
# cannot raise them and no container starts; and crun fails on cgroups v1 or hybrid (the conf
# names runc). A CONTAINERS_CONF of the user's own is kept.
set -euo pipefail

if [[ -n ${CONTAINERS_CONF:-} ]]; then
    printf '%s\n' "$CONTAINERS_CONF"
    exit 0
fi
capabilities=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
sys_resource=$(((16#$capabilities >> 24) & 1))
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
low() { [[ $1 != unlimited ]] && (($1 < $2)); }
unified=$(stat -fc %T /sys/fs/cgroup)
if [[ $unified != cgroup2fs ]] \
    || { ((sys_resource == 0)) && { low "$nofile" 1048576 || low "$nproc" 4194304; }; }; then
    printf '%s\n' "$(cd "$(dirname "$0")" && pwd)/containers.conf"
fi
