#!/usr/bin/env bats
# dlrun's control channel against a stranger: another user who finds rank 0's control
# port (a port scan, `ss -tln`) and sends garbage, forged messages, or holds a
# connection open must not stop, steer or mark the job (issue 12, item 7).

load helpers

setup() {
  cd "$BATS_TEST_TMPDIR"
  chmod 755 "$BATS_TEST_TMPDIR"
  DLRUN=$DL_BUILD_DIR/launcher/dlrun
}
teardown() {
  [ -n "${holder:-}" ] && kill "$holder" 2>/dev/null || true
  cancel_all
}

# The TCP ports that process $1 listens on.
listening_ports() {
  ss -tlnpH | grep "pid=$1," | awk '{print $4}' | sed 's/.*://' | sort -u
}

# As the unprivileged user dlother: connect to 127.0.0.1:$1 and send $2 (printf format).
as_stranger() {
  runuser -u dlother -- timeout 10 bash -c \
    "exec 3<>/dev/tcp/127.0.0.1/$1 && printf '$2' >&3 && sleep 0.3" 2>/dev/null || true
}

# a stranger on rank 0's control port (garbage, forged HELLO/WANT/EXIT, a held connection) changes
# nothing
@test "a stranger on rank 0's control port changes nothing" {
  # Rank 1 starts dlrun only once the stranger is done: until then rank 0 waits in the
  # PMIx fence with its control port open, the window a stranger has.
  cat >job.sh <<JOB
#!/bin/sh
if [ "\$SLURM_PROCID" = 1 ]; then
  while [ ! -e $PWD/go ]; do sleep 0.2; done
else
  echo \$\$ >$PWD/rank0.pid
fi
exec $DLRUN --status-interval=1s sh -c 'echo rank=\$RANK restarts=\$DL_RESTART_COUNT; sleep 3'
JOB
  chmod +x job.sh
  job=$(submit -N2 --ntasks-per-node=1 --requeue -o out.txt --wrap "srun --mpi=pmix $PWD/job.sh")
  wait_until 60 '[ -s rank0.pid ] && [ -n "$(listening_ports "$(cat rank0.pid)")" ]'
  ports=$(listening_ports "$(cat rank0.pid)")
  echo "rank 0 listens on: $ports"
  fake_key=$(printf '%064d' 0)
  for port in $ports; do
    # A connection that is opened and closed at once (a port scan).
    as_stranger "$port" ''
    as_stranger "$port" '\x00\xff\xfe garbage\nmore garbage\n'
    # Well formed but without the step's secret: the old HELLO, a forged key, and what
    # would follow it (a checkpoint-and-requeue, a failure, status text).
    as_stranger "$port" 'HELLO 1 n9\nWANT 1 pwned-requeue\nEXIT 3 pwned-fail\n'
    as_stranger "$port" "HELLO 1 $fake_key n9\\nWANT 1 pwned-requeue\\nEXIT 3 pwned-fail\\n"
    as_stranger "$port" 'WANT 1 pwned-requeue\nEND 1 pwned-end\n'
    # And one that stays open, silent, until the job has finished.
    runuser -u dlother -- timeout 60 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; sleep 60" &
    holder=$!
  done
  touch go
  wait_state "$job" COMPLETED 60
  [ "$(grep -c 'rank=' out.txt)" -eq 2 ]
  grep -q 'rank=0 restarts=0' out.txt
  grep -q 'rank=1 restarts=0' out.txt
  [ "$(job_field "$job" Restarts)" = 0 ]
  ! job_comment "$job" | grep -q pwned || false
  ! grep -q pwned out.txt || false
  # Rank 0 said whom it turned away.
  grep -q 'closed a connection to the control port from 127.0.0.1' out.txt
}
