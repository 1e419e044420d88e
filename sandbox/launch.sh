#!/bin/sh
# The last step inside the boundary, as the sandbox's user: become the skill's program under the run's limits.
# usage: launch.sh PRLIMIT-OPTION... -- PROGRAM [ARGUMENT...]
# prlimit (util-linux) sets each rlimit and execs the program: no second interpreter, one exec more than none.
exec prlimit "$@"
