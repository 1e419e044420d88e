#!/bin/sh
# The last step inside the boundary: become the skill's program under the run's limits.
# usage: launch.sh [--cgroup DIR] [--user UID GID] PRLIMIT-OPTION... -- PROGRAM [ARGUMENT...]
# --cgroup (a root host at tiers B and C): join the run's pids cgroup, while still root.
# --user (tier B): then drop to the sandbox user, without groups or capabilities.
# prlimit (util-linux) sets each rlimit and execs the program: no second interpreter.
if [ "$1" = "--cgroup" ]; then
  echo $$ > "$2/cgroup.procs"
  shift 2
fi
if [ "$1" = "--user" ]; then
  uid=$2 gid=$3
  shift 3
  exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all --bounding-set=-all prlimit "$@"
fi
exec prlimit "$@"
