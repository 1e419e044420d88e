#!/bin/sh
# Tier A on a root host, in the private mount namespace `unshare --mount --propagation private` made for this run:
# bind each folder the run needs under STAGE (a fresh tmpfs), so the sandbox user reaches it whatever the folders
# above it allow (/root is 0700), then start bubblewrap as that user, without capabilities.
# usage: stage.sh STAGE UID GID N SOURCE_1 ... SOURCE_N -- BWRAP-ARGV...
set -eu
stage=$1 uid=$2 gid=$3 n=$4
shift 4
mount -t tmpfs -o mode=0755,size=64k skillyard-stage "$stage"
i=0
dirs=""
while [ "$i" -lt "$n" ]; do dirs="$dirs $stage/$i"; i=$((i + 1)); done
# shellcheck disable=SC2086  # word splitting of $dirs is the point (no folder name holds a space: they are numbers)
[ -z "$dirs" ] || mkdir $dirs
i=0
while [ "$i" -lt "$n" ]; do mount --bind "$1" "$stage/$i"; shift; i=$((i + 1)); done
shift  # --
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all --bounding-set=-all "$@"
