#!/bin/sh
# The last step inside the boundary, as the sandbox's user: become the skill's program under the run's limits.
# usage: launch.sh [--cgroup DIR] PRLIMIT-OPTION... -- PROGRAM [ARGUMENT...]
# --cgroup (tier C on a root host, which RLIMIT_NPROC does not bind): join the run's pids cgroup first.
# prlimit (util-linux) sets each rlimit and execs the program: no second interpreter, one exec more than none.
if [ "$1" = "--cgroup" ]; then
  echo $$ > "$2/cgroup.procs"
  shift 2
fi
exec prlimit "$@"
