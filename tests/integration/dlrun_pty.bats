#!/usr/bin/env bats
# dlrun typed at the shell of `srun --pty --dl-gpus=2 bash`, driven through tmux as the
# unprivileged user dltest: one rank per visible GPU on the node, with torchrun's
# variables and rank-prefixed lines, checkpoints and resume; Ctrl-C checkpoints (the
# Python client's trainer) and stops every rank, leaving no process, as does a killed
# launcher; a torch DDP program over gloo across the two local ranks; a rank 0 that
# cannot start. dlrun typed at the shell of an interactive `salloc`, the job-level
# launcher: Ctrl-C stops the ranks on both nodes, and leaving the shell ends the job.

load helpers

setup_file() {
  # dltest runs the programs, so they live where dltest can read them.
  export PTYDIR
  PTYDIR=$(mktemp -d /tmp/dlrun_pty.XXXXXX)
  chmod 755 "$PTYDIR"
  cat >"$PTYDIR/rank_env.py" <<'EOF'
import os
e = os.environ
gpus = e.get("CUDA_VISIBLE_DEVICES", "").split(",")
print("env", e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"],
      e["MASTER_ADDR"], e["MASTER_PORT"], "gpu=" + gpus[int(e["LOCAL_RANK"])],
      "ckpt=" + e.get("DL_CKPT_DIR", "none"),
      "pmix=" + e.get("PMIX_RANK", "none"), flush=True)
EOF
  cat >"$PTYDIR/resume.py" <<'EOF'
import os
print("resume", os.environ["RANK"], os.environ.get("DL_RESUME_FROM", "none"), flush=True)
EOF
  cat >"$PTYDIR/forever.py" <<'EOF'
import os, time
print("ready", os.environ["RANK"], os.getpid(), flush=True)
while True:
    time.sleep(1)
EOF
  cat >"$PTYDIR/slow_stop.py" <<'EOF'
import os, signal, sys, time
def stop(sig, frame):
    print("stopping", os.environ["RANK"], sig, flush=True)
    time.sleep(2)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
print("ready", os.environ["RANK"], flush=True)
while True:
    time.sleep(1)
EOF
  cat >"$PTYDIR/ddp.py" <<'EOF'
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("allreduce", dist.get_rank(), dist.get_world_size(), int(t.item()), flush=True)
dist.destroy_process_group()
EOF
}
teardown_file() { rm -rf "$PTYDIR"; }

setup() { SESSION=dlpty-$$-$BATS_TEST_NUMBER; }
# A tmux server of this file's own: other test runs on this host share root's default one
# and may end it under us.
tmux() { command tmux -L "dlpty-$$" "$@"; }
teardown() {
  # What a failed test left behind (the leftovers of a broken launcher outlive the job).
  if [ -n "${JOB:-}" ]; then
    for pid in $(pty_pids dlrun) $(pty_pids python3); do kill -KILL "$pid" 2>/dev/null || true; done
  fi
  tmux kill-session -t "$SESSION" 2>/dev/null || true
  runuser -u dltest -- env SLURM_CONF="$SLURM_CONF" scancel --quiet -u dltest 2>/dev/null || true
}

# The processes named $1 of the shell's job on this cluster (other clusters on this host
# may have a job of the same id).
pty_pids() {
  local pid
  for pid in $(pgrep -u dltest -x "$1"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
      grep -cxE "SLURM_JOB_ID=$JOB|SLURM_CONF=$SLURM_CONF" | grep -qx 2 && echo "$pid"
  done
  return 0
}

screen() { tmux capture-pane -p -J -S -200 -t "$SESSION"; }

# Waits until the pane shows a line matching the extended regex $1 $2 times (once by default).
wait_screen() {
  local pattern=$1 count=${2:-1} limit=${3:-60}
  local deadline=$((SECONDS + limit))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(screen | grep -cE -- "$pattern")" -ge "$count" ] && return 0
    sleep 0.2
  done
  echo "the pane does not show '$pattern' $count time(s) after ${limit}s:" >&2
  screen >&2
  return 1
}

# Types a command line and waits for its "rc=N" line, numbered so that each is new.
typed=0
type_line() {
  typed=$((typed + 1))
  tmux send-keys -t "$SESSION" "$1; echo rc$typed=\$?" Enter
}
wait_rc() { wait_screen "^rc$typed=[0-9]+" 1 "${1:-60}"; }
rc_of() { screen | sed -n "s/^rc$typed=\([0-9]*\).*/\1/p" | tail -n 1; }

# A shell of `srun --pty --dl-gpus=2 bash` as dltest, in the programs' directory; or, with
# arguments, of the command they give (salloc's).
start_pty() {
  local shell="srun --pty --dl-gpus=2 --chdir=$PTYDIR bash --norc --noprofile"
  [ $# -eq 0 ] || shell="$*"
  tmux new-session -d -s "$SESSION" -x 200 -y 50 -c "$PTYDIR" \
    "runuser -u dltest -- env SLURM_CONF=$SLURM_CONF PS1='pty\$ ' $shell; sleep 600"
  wait_screen '^pty\$' 1 60
  tmux send-keys -t "$SESSION" 'echo "job=$SLURM_JOB_ID node=$SLURMD_NODENAME"' Enter
  wait_screen '^job=[0-9]+ node=' 1 20
  JOB=$(screen | sed -n 's/^job=\([0-9]*\) node=.*/\1/p' | head -n 1)
  NODE=$(screen | sed -n 's/^job=[0-9]* node=\(.*\)/\1/p' | head -n 1)
}

# srun --pty --dl-gpus=2 bash: dlrun runs one rank per GPU; Ctrl-C checkpoints, stops every rank and
# leaves nothing
@test "srun --pty: a rank per GPU; Ctrl-C stops cleanly" {
  start_pty
  type_line "$DL_BUILD_DIR/launcher/dlrun /usr/bin/python3 rank_env.py"
  wait_rc
  [ "$(rc_of)" = 0 ]
  lines=$(screen | grep -E '^\[rank [01]@[^]]*\] env ')
  # Two ranks on the shell's node, each line prefixed with its own rank; LOCAL_RANK
  # matches RANK and picks its own GPU among the two the step sees.
  [ "$(echo "$lines" | awk '{print $1, $2, $4, $5, $6, $7, $10}' | sort | tr '\n' ';')" = \
    "[rank 0@$NODE] 0 0 2 2 gpu=0;[rank 1@$NODE] 1 1 2 2 gpu=1;" ]
  # One rendezvous on loopback, the port one of those Slurm reserved for the step.
  [ "$(echo "$lines" | awk '{print $8, $9}' | sort -u | wc -l)" -eq 1 ]
  [ "$(echo "$lines" | awk '{print $8}' | sort -u)" = 127.0.0.1 ]
  port=$(echo "$lines" | awk '{print $9}' | head -n 1)
  resv=$(scontrol show step "$JOB.0" | sed -n 's/.*ResvPorts=\([0-9-]*\).*/\1/p')
  [ "$port" -ge "${resv%-*}" ] && [ "$port" -le "${resv#*-}" ]
  # The job's checkpoint directory, as in the per-task path; not the shell's PMIx rank.
  ckpt_dir=$(echo "$lines" | awk '{print $11}' | sort -u | sed 's/^ckpt=//')
  [[ $ckpt_dir == */dltest/$JOB ]]
  [ -d "$ckpt_dir" ]
  [ "$(echo "$lines" | awk '{print $12}' | sort -u)" = "pmix=none" ]

  # Checkpoints as in the per-task path: both ranks save step 5 into DL_CKPT_DIR, and the
  # next run resumes from it on every rank.
  type_line "$DL_BUILD_DIR/launcher/dlrun sh -c '$DL_BUILD_DIR/tests/integration/ckpt_writer \
    save --dir \$DL_CKPT_DIR --step 5 --rank \$RANK --world \$WORLD_SIZE >/dev/null'"
  wait_rc
  [ "$(rc_of)" = 0 ]
  type_line "$DL_BUILD_DIR/launcher/dlrun /usr/bin/python3 resume.py"
  wait_rc
  [ "$(rc_of)" = 0 ]
  [ "$(screen | grep -E '^\[rank [01]@[^]]*\] resume ' | awk '{print $4, $5}' | sort | tr '\n' ';')" = \
    "0 $ckpt_dir/step-000000005;1 $ckpt_dir/step-000000005;" ]

  # Ctrl-C during a run of the Python client's trainer: both ranks checkpoint at the same
  # step, then every rank stops.
  type_line "$DL_BUILD_DIR/launcher/dlrun /usr/bin/python3 $DL_ROOT/tests/integration/dlrun_trainer.py \
    --steps 100000 --step-ms 20"
  wait_screen '^\[rank [01]@[^]]*\] start rank=' 2 60
  pids=$(pty_pids python3)
  [ "$(echo "$pids" | wc -l)" -eq 2 ]
  [ "$(pty_pids dlrun | wc -l)" -eq 3 ] # the launcher and one per rank
  tmux send-keys -t "$SESSION" C-c
  wait_rc 30
  # Stopped, not requeued (an interactive job cannot be): 143, said once by the launcher.
  [ "$(rc_of)" = 143 ]
  saved=$(screen | sed -n 's/^\[rank [01]@[^]]*\] checkpoint rank=\([01]\) step=\([0-9]*\)$/\1 \2/p')
  [ "$(echo "$saved" | awk '{print $1}' | sort | tr '\n' ' ')" = "0 1 " ]
  [ "$(echo "$saved" | awk '{print $2}' | sort -u | wc -l)" -eq 1 ]
  screen | grep -q 'dlrun: SIGINT: the 2 local ranks have ended (rank 0 exited with 143, rank 1 exited with 143): exit code 143'
  for pid in $pids; do [ ! -e "/proc/$pid" ]; done
  [ -z "$(pty_pids dlrun)" ]
  [ -z "$(pty_pids python3)" ]
  # A launcher killed outright: its ranks get SIGTERM and stop their programs.
  type_line "$DL_BUILD_DIR/launcher/dlrun /usr/bin/python3 forever.py"
  wait_screen '^\[rank [01]@[^]]*\] ready ' 2 60
  launcher=""
  for pid in $(pty_pids dlrun); do
    ppid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status")
    [ "$(cat "/proc/$ppid/comm")" = dlrun ] || launcher=$pid
  done
  [ -n "$launcher" ]
  kill -KILL "$launcher"
  wait_rc 30
  [ "$(rc_of)" = 137 ]
  wait_until 30 '[ -z "$(pty_pids dlrun)" ] && [ -z "$(pty_pids python3)" ]'
  # The shell is still there and answers.
  type_line true
  wait_rc 10
}

# salloc -N2 --dl-gpus=2 bash: dlrun starts a rank per task; Ctrl-C in the terminal stops every rank
# once, exit 143; exit ends the job
@test "salloc: a rank per task; Ctrl-C stops every rank" {
  start_pty salloc -N2 --ntasks-per-node=1 --dl-gpus=2 bash --norc --noprofile
  # The shell runs here, outside any step: dlrun is the job-level launcher.
  type_line "$DL_BUILD_DIR/launcher/dlrun /usr/bin/python3 $DL_ROOT/tests/integration/dlrun_trainer.py \
    --steps 100000 --step-ms 20"
  wait_screen '^\[rank [01]@[^]]*\] start rank=[01] world=2 ' 2 60
  [ "$(screen | grep -E '^\[rank [01]@[^]]*\] start rank=' | sed 's/@.*\] start rank=/ /' | sort |
    tr '\n' ';')" = "[rank 0 0 world=2 restart=0 resume=None;[rank 1 1 world=2 restart=0 resume=None;" ] ||
    { screen; false; }
  # One on each node of the allocation.
  [ "$(screen | sed -n 's/^\[rank [01]@\([^]]*\)\] start rank=.*/\1/p' | sort -u | wc -l)" -eq 2 ]
  pids=$(pty_pids python3)
  [ "$(echo "$pids" | wc -l)" -eq 2 ]
  # The launcher and one per rank.
  [ "$(pty_pids dlrun | wc -l)" -eq 3 ]
  # The terminal sends SIGINT to its foreground process group, where only dlrun is.
  tmux send-keys -t "$SESSION" C-c
  wait_rc 30
  [ "$(rc_of)" = 143 ] || { screen; false; }
  # Said once, by the launcher; the ranks were stopped by it (SIGTERM), not by srun.
  [ "$(screen | grep -c 'dlrun: SIGINT: stopping every rank')" -eq 1 ]
  [ -z "$(screen | grep -E 'srun: (interrupt|sending Ctrl-C|forcing)')" ]
  saved=$(screen | sed -n 's/^\[rank [01]@[^]]*\] checkpoint rank=\([01]\) step=\([0-9]*\)$/\1 \2/p')
  [ "$(echo "$saved" | awk '{print $1}' | sort | tr '\n' ' ')" = "0 1 " ]
  [ "$(echo "$saved" | awk '{print $2}' | sort -u | wc -l)" -eq 1 ]
  for pid in $pids; do [ ! -e "/proc/$pid" ]; done
  [ -z "$(pty_pids dlrun)" ]
  [ -z "$(pty_pids python3)" ]
  # Ctrl-C twice, as people do, while the ranks take their time to stop: the second one
  # must not reach srun, which would send it to the ranks and then kill them (exit 137).
  type_line "$DL_BUILD_DIR/launcher/dlrun /usr/bin/python3 slow_stop.py"
  wait_screen '^\[rank [01]@[^]]*\] ready ' 2 60
  tmux send-keys -t "$SESSION" C-c
  wait_screen '^\[rank [01]@[^]]*\] stopping [01] 15' 2 10
  tmux send-keys -t "$SESSION" C-c
  wait_rc 30
  [ "$(rc_of)" = 143 ] || { screen; false; }
  [ -z "$(screen | grep -E 'srun: (interrupt|sending Ctrl-C|forcing)')" ]
  [ -z "$(pty_pids dlrun)" ]
  [ -z "$(pty_pids python3)" ]
  # What is typed still reaches rank 0's program (through dlrun to srun's stdin).
  type_line "$DL_BUILD_DIR/launcher/dlrun /usr/bin/python3 -c 'import sys; print(\"got\", sys.stdin.readline().strip(), flush=True)'"
  wait_screen '^\[rank [01]@[^]]*\] dlrun: RUNNING' 1 60
  tmux send-keys -t "$SESSION" hello Enter
  wait_rc 30
  [ "$(rc_of)" = 0 ] || { screen; false; }
  screen | grep -qE '^\[rank 0@[^]]*\] got hello$'
  # The job still runs until its shell is left.
  [ "$(job_state "$JOB")" = RUNNING ]
  tmux send-keys -t "$SESSION" exit Enter
  wait_screen "Relinquishing job allocation $JOB" 1 30
  wait_until 30 '[ "$(job_state "$JOB")" != RUNNING ] && [ "$(job_state "$JOB")" != COMPLETING ]'
  [ "$(job_state "$JOB")" = COMPLETED ] || [ -z "$(job_state "$JOB")" ]
}

# srun --pty --dl-gpus=2 bash: a torch DDP program all-reduces over gloo across the two local ranks
@test "srun --pty: torch DDP over gloo on two ranks" {
  start_pty
  type_line "$DL_BUILD_DIR/launcher/dlrun /usr/bin/python3 ddp.py"
  wait_rc 120
  [ "$(rc_of)" = 0 ]
  [ "$(screen | grep -E '^\[rank [01]@[^]]*\] allreduce ' | awk '{print $4, $5, $6}' |
    sort | tr '\n' ';')" = "0 2 3;1 2 3;" ] || { screen; false; }
}

# a one-task step whose rank 0 cannot choose the rendezvous: each rank says why, dlrun exits 1
@test "one-task step without a rendezvous: says why" {
  # `; exit` keeps bash from exec'ing dlrun, which would make it the step's task.
  run run_srun --dl-gpus=2 bash -c "SLURM_STEP_RESV_PORTS=bad $DL_BUILD_DIR/launcher/dlrun true; exit"
  [ "$status" -eq 1 ]
  why='SLURM_STEP_RESV_PORTS=bad: expected port ranges such as 12000-12003 or 12000-12001,12005'
  [[ $output == *"[rank 0@"*"] dlrun: error: $why"* ]]
  [[ $output == *"[rank 1@"*"] dlrun: error: rank 0 could not start: $why"* ]]
  [[ $output == *"dlrun: the 2 local ranks have ended (rank 0 exited with 1, rank 1 exited with 1): exit code 1"* ]]
}
