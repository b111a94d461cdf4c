# Shared by the integration tests. scripts/test starts the mini-cluster and exports
# SLURM_CONF, DL_ROOT and DL_BUILD_DIR before running bats.

: "${SLURM_CONF:?run the integration tests through scripts/test (SLURM_CONF is not set)}"
: "${DL_ROOT:?DL_ROOT is not set}"
: "${DL_BUILD_DIR:?DL_BUILD_DIR is not set}"
export SLURM_CONF

# What differs between the supported Slurm releases, as the tests see it
# (docs/compatibility.md): since 23.02 a job's GPUs read gres/gpu:N, before gres:gpu:N.
slurm_release=$(sinfo --version | sed -n 's/^slurm[a-z-]* \([0-9]*\.[0-9]*\).*/\1/p')
if [ "${slurm_release%%.*}" -ge 23 ]; then GPU_TRES=gres/gpu; else GPU_TRES=gres:gpu; fi

# A bounded srun: a hang fails the test instead of stalling CI. Quiet: srun's own
# informational lines (a step that waited for nodes still completing the previous test's
# jobs says so) are not the program's output; its errors still show.
run_srun() { timeout "${SRUN_TIMEOUT:-120}" srun --quiet "$@"; }

# Submits a batch job and prints its id; extra arguments go to sbatch.
submit() { sbatch --parsable "$@" | cut -d';' -f1; }

job_state() { scontrol show job "$1" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_field() { scontrol show job "$1" -o 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

# Waits until job $1 is in one of the states $2 (a regex, e.g. 'COMPLETED|FAILED').
wait_state() {
  local job=$1 want=$2 limit=${3:-120} state=""
  local deadline=$((SECONDS + limit))
  while [ $SECONDS -lt $deadline ]; do
    state=$(job_state "$job")
    if [[ $state =~ ^($want)$ ]]; then return 0; fi
    sleep 0.5
  done
  echo "job $job is '$state' after ${limit}s, expected $want" >&2
  scontrol show job "$job" >&2 || true
  return 1
}

# The queue holds no job of the current user (nothing was submitted).
queue_empty() { [ -z "$(squeue -h -u "$(id -un)" -o %i)" ]; }

# For a teardown: when the test failed, the end of each named file (a job's output) and the
# job's processes go to the failure report, so a failure in CI shows what the program did.
# $job, when set, names the job.
show_on_failure() {
  [ -n "${BATS_TEST_COMPLETED:-}" ] && return 0
  local f
  for f in "$@"; do
    [ -e "$f" ] || continue
    echo "--- the last lines of $f" >&2
    tail -n 40 "$f" >&2
  done
  if [ -n "${job:-}" ]; then
    echo "--- the processes of job $job" >&2
    local pids
    pids=$(for p in $(pgrep -f .); do
      tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_JOB_ID=$job" && echo "$p"
    done | paste -sd,)
    [ -n "$pids" ] && ps -o pid,ppid,stat,etime,wchan:24,args -p "$pids" >&2
  fi
  return 0
}

# Whether the cluster refuses jobs of users with no association (minicluster --accounting).
enforces_associations() { scontrol show config | grep -Eq '^AccountingStorageEnforce += .*associations'; }

# A check of tests/integration/checks/ on files in the current directory:
# `checks search invariants EXP` runs checks/search.py's invariants("EXP").
checks() { PYTHONPATH="$DL_ROOT/tests/integration${PYTHONPATH:+:$PYTHONPATH}" python3 -m "checks.$1" "${@:2}"; }

cancel_all() { scancel --full --quiet -u "$(id -un)" 2>/dev/null || true; }

# A command as the unprivileged test users dltest and dlother (hostile tests).
as_dltest() { runuser -u dltest -- env SLURM_CONF="$SLURM_CONF" "$@"; }
as_dlother() { runuser -u dlother -- env SLURM_CONF="$SLURM_CONF" "$@"; }

# Polls a shell condition for up to $1 seconds.
wait_until() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  while [ $SECONDS -lt $deadline ]; do
    if eval "$@" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "not true after ${limit}s: $*" >&2
  return 1
}

# The cluster's slurmctld: the first line of its pid file (24.11 writes a new pid over the
# old one without truncating the file).
ctld_pid() { head -n 1 "$(sed -n 's/^SlurmctldPidFile=//p' "$SLURM_CONF")"; }

# Slurm before 24.11.6 can hang slurmctld for good in a shutdown, and 24.11.5 (Debian 13's)
# also in a reconfigure: slurmscriptd answers its flush before slurmctld waits for the
# answer, and it waits forever (SchedMD bug 21875). True when a thread of slurmctld $1
# waits there, as gdb reads its stacks.
ctld_hung_in_flush() {
  command -v gdb >/dev/null || return 1
  timeout 60 gdb -p "$1" -batch -ex 'thread apply all bt' 2>/dev/null | grep -q ' in slurmscriptd_flush ('
}

# Kills slurmctld $1, hung in that bug, and says so in the test's output (TAP comments).
kill_hung_ctld() {
  echo "# slurmctld $1 hung in slurmscriptd_flush (Slurm bug 21875, fixed in 24.11.6): killed" >&3
  kill -9 "$1"
  wait_until 10 "! kill -0 $1"
}

# A slurmctld that does not answer: one hung in that bug is killed and started again; one
# that does not answer for any other reason fails the caller.
recover_ctld() {
  local p
  p=$(ctld_pid)
  wait_until 20 'scontrol ping | grep -q "is UP"' 2>/dev/null && return 0 # only slow
  if ! kill -0 "$p" 2>/dev/null || ! ctld_hung_in_flush "$p"; then
    echo "slurmctld $p does not answer" >&2
    return 1
  fi
  kill_hung_ctld "$p"
  slurmctld -f "$SLURM_CONF"
  wait_until 30 'scontrol ping | grep -q "is UP"'
}

# scontrol reconfigure; when slurmctld hangs in it (the bug above), it starts again with
# the new configuration.
reconfigure() { scontrol reconfigure || recover_ctld; }

# Stops slurmctld (pid $1) with SIGTERM and waits up to 30 s for it to exit; after that it
# is killed (SIGKILL) and this fails, unless it hung in the bug above.
stop_ctld() {
  local p=$1 deadline=$((SECONDS + 30))
  kill -TERM "$p"
  while kill -0 "$p" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      if ctld_hung_in_flush "$p"; then
        kill_hung_ctld "$p"
        return 0
      fi
      echo "slurmctld $p still running 30 s after SIGTERM" >&2
      kill -9 "$p"
      return 1
    fi
    sleep 0.1
  done
}

# The PIDs of the processes named $2 that belong to job $1 (by the SLURM_JOB_ID in their
# environment), oldest first: other clusters on this host run the same programs.
job_pids() {
  local pid
  for pid in $(pgrep -x "$2"); do
    tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "SLURM_JOB_ID=$1" && echo "$pid"
  done
  return 0
}

# The job's comment (it contains spaces, so job_field does not do).
job_comment() { scontrol show job "$1" | sed -n 's/^ *Comment=//p'; }

# spank_dl.so with more plugstack arguments ($1) for one test (slurmstepd, srun and sbatch
# read plugstack.conf at each start); plugstack_restore puts the cluster's line back.
plugstack() { echo "$(dirname "$SLURM_CONF")/plugstack.conf"; }
# Both replace the file by a rename: slurmd's job epilog (`slurmstepd spank epilog`)
# reads it at any job's end, and a half-written one fails the epilog, which drains the node.
plugstack_with() {
  cp "$(plugstack)" "$BATS_TEST_TMPDIR/plugstack.conf"
  sed "s|spank_dl.so |spank_dl.so $1 |" "$BATS_TEST_TMPDIR/plugstack.conf" >"$(plugstack).new"
  mv "$(plugstack).new" "$(plugstack)"
}
plugstack_restore() {
  [ -f "$BATS_TEST_TMPDIR/plugstack.conf" ] || return 0
  cp "$BATS_TEST_TMPDIR/plugstack.conf" "$(plugstack).new"
  mv "$(plugstack).new" "$(plugstack)"
  rm -f "$BATS_TEST_TMPDIR/plugstack.conf"
}

# Runs CMD in the mount namespace and root of process PID, in directory DIR: what a
# daemon sees. (A stack's root is a chroot: entering the namespace alone would leave this
# process's root.)
as_seen_by() {
  local pid=$1 dir=$2
  shift 2
  nsenter --target "$pid" --mount --root --wd -- sh -c 'cd "$0" && exec "$@"' "$dir" "$@"
}

# What a one-node DL step uses, a line each: dlrun's path, slurm_dl's file, the libdlckpt
# it maps, the spank_dl.so its slurmstepd maps, and the MPI type cli_filter/dl chose. Run
# through the caller's `hidden` (a view of the cluster's mount namespace).
step_uses() {
  hidden timeout 60 srun -N1 --dl-gpus=1 sh -c 'command -v dlrun
    /usr/bin/python3 -c "import slurm_dl, slurm_dl.ckpt as c
c._lib()
print(slurm_dl.__file__)
print(*sorted({l.split()[-1] for l in open(\"/proc/self/maps\") if \"libdlckpt\" in l}))"
    grep -o "/[^ ]*spank_dl.so" /proc/$PPID/maps | sort -u
    echo "mpi=$SLURM_MPI_TYPE"'
}
