#!/usr/bin/env bats
# spank_dl.so: the --dl-* options from #SBATCH lines, sbatch, srun and salloc; checked
# at submit time; delivered to the controller and to every task; the checkpoint
# directory made for the job's user.

load helpers

setup() {
  cd "$BATS_TEST_TMPDIR"
  mcdir=$(dirname "$SLURM_CONF")
  ckpt_root=$mcdir/ckpt
}
teardown() {
  cancel_all
  runuser -u dltest -- scancel --quiet -u dltest 2>/dev/null || true
  tmux kill-session -t dlpty 2>/dev/null || true
  [ -z "${p:-}" ] || rm -f "$p"*
  if [ -f "$BATS_TEST_TMPDIR/squash.pid" ]; then
    in_nodes_ns umount -l "$mcdir/squash" 2>/dev/null || true
    kill "$(cat "$BATS_TEST_TMPDIR/squash.pid")" 2>/dev/null || true
    rm -rf "$mcdir/squash" "$mcdir/squash.src"
    plugstack_restore
  fi
  if [ -d "$ckpt_root.site" ]; then
    rm -rf "$ckpt_root"
    mv "$ckpt_root.site" "$ckpt_root"
  fi
  # What a hostile test planted (or left when it failed) must not break the next test.
  if [ -e "$ckpt_root/dltest" ] && [ "$(stat -c '%U %a' "$ckpt_root/dltest")" != "dltest 700" ]; then
    rm -rf "$ckpt_root/dltest"
  fi
}

# The spec the controller holds for a job, as the node prolog received it.
controller_spec() { sed -n "s/^$1 SPANK_//p" "$mcdir/log/prolog-spec.log" | sort; }


# bats test_tags=stacks
@test "#SBATCH --dl-* lines reach every task and the controller" {
  cat >job.sh <<'EOS'
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --dl-gpus=4
#SBATCH --dl-placement=spread
#SBATCH --dl-experiment=resnet
#SBATCH --dl-trial=7
#SBATCH --dl-ckpt-every=30m
#SBATCH --dl-preemptible
#SBATCH --output=out.txt
srun --ntasks-per-node=2 sh -c 'env | grep ^DL_ | sort | tr "\n" " "; echo'
EOS
  job=$(submit job.sh)
  wait_state "$job" COMPLETED 60
  [ "$(wc -l <out.txt)" -eq 4 ]
  [ "$(sort -u out.txt | wc -l)" -eq 1 ]
  line=$(head -n 1 out.txt)
  for kv in DL_GPUS=4 DL_PLACEMENT=spread DL_EXPERIMENT=resnet DL_TRIAL=7 DL_CKPT_EVERY=1800 \
    DL_PREEMPTIBLE=1 DL_CKPT_KEEP=3 DL_GRACE=120 DL_MAX_RESTARTS=3 DL_WATCHDOG=0 \
    DL_SPEC_VERSION=1 "DL_CKPT_DIR=$ckpt_root/root/$job"; do
    [[ " $line " == *" $kv "* ]] || { echo "missing $kv in: $line"; false; }
  done
  spec=$(controller_spec "$job")
  echo "$spec" | grep -qx 'DL_GPUS=4'
  echo "$spec" | grep -qx 'DL_PLACEMENT=spread'
  echo "$spec" | grep -qx 'DL_PREEMPTIBLE=1'
  echo "$spec" | grep -qx 'DL_CKPT_EVERY=1800'
}

# sbatch --dl-* on the command line overrides DL_* defaults from the environment
@test "--dl-* overrides DL_* from the environment" {
  job=$(DL_GPUS=2 DL_EXPERIMENT=fromenv submit --dl-gpus=3 -o out.txt --wrap 'echo $DL_GPUS $DL_EXPERIMENT')
  wait_state "$job" COMPLETED 60
  [ "$(cat out.txt)" = "3 fromenv" ]
  controller_spec "$job" | grep -qx 'DL_GPUS=3'
}

@test "srun --dl-* gives every task on every node the same spec" {
  run run_srun -N4 --ntasks-per-node=2 --dl-gpus=8 --dl-elastic=4:8 --dl-grace=90s \
    sh -c 'echo "$SLURMD_NODENAME $DL_GPUS $DL_ELASTIC $DL_GRACE $DL_CKPT_DIR $SLURM_JOB_ID"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | wc -l)" -eq 8 ]
  [ "$(echo "$output" | cut -d' ' -f2-5 | sort -u)" = \
    "8 4:8 90 $ckpt_root/root/$(echo "$output" | head -n 1 | cut -d' ' -f6)" ]
  [ "$(echo "$output" | cut -d' ' -f1 | sort -u | tr '\n' ' ')" = "n1 n2 n3 n4 " ]
}

@test "salloc --dl-* then srun inside the allocation" {
  run timeout 60 salloc -N2 --dl-gpus=2 --dl-trial=t1 \
    srun sh -c 'echo "$DL_GPUS $DL_TRIAL"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | grep -v '^salloc:' | sort -u)" = "2 t1" ]
}

@test "interactive srun --pty --dl-gpus=2 bash" {
  tmux new-session -d -s dlpty -x 150 -y 20 \
    "env SLURM_CONF=$SLURM_CONF srun --pty --dl-gpus=2 bash --norc --noprofile; sleep 60"
  for _ in $(seq 40); do
    tmux capture-pane -p -t dlpty | grep -q 'bash-' && break
    sleep 0.25
  done
  tmux send-keys -t dlpty 'echo "tty=$(tty | cut -c1-8) gpus=$DL_GPUS spank=$DL_SPANK_VERSION"' Enter
  for _ in $(seq 40); do
    tmux capture-pane -p -t dlpty | grep -q '^tty=' && break
    sleep 0.25
  done
  tmux capture-pane -p -t dlpty | grep -q '^tty=/dev/pts gpus=2 spank=[0-9]'
  tmux send-keys -t dlpty 'exit' Enter
}

# Issue 12, item 9b: a job that asks nothing of slurm-dl stays an ordinary Slurm job.
# a job without --dl-* options stays ordinary: no DL_* variable, no comment, no directory
@test "a job without --dl-* stays ordinary" {
  root=$(sed -n 's/.*default_ckpt_root=\([^ ]*\).*/\1/p' "$(dirname "$SLURM_CONF")/plugstack.conf")
  [ -d "$root" ]
  before=$(find "$root" | sort)
  # Without the test harness's own DL_* variables (DL_ROOT, ...): no DL_* input at all.
  plain() { env -i PATH="$PATH" SLURM_CONF="$SLURM_CONF" "$@"; }
  run plain timeout 120 srun -N2 sh -c 'env | grep "^DL_" || echo none'
  [ "$status" -eq 0 ]
  [ "$output" = "none
none" ]
  job=$(plain sbatch --parsable -N1 -o out.txt \
    --wrap 'env | grep "^DL_" || echo none; srun sh -c "env | grep ^DL_ || echo none"')
  wait_state "$job" COMPLETED 60
  [ "$(cat out.txt)" = "none
none" ]
  [ -z "$(job_comment "$job")" ]
  [ "$(find "$root" | sort)" = "$before" ]
}

# a user the user database does not know submits an ordinary job as without slurm-dl
@test "an unknown user submits as without slurm-dl" {
  ! getent passwd 54321 || false
  stranger() { (cd / && setpriv --reuid=54321 --regid=54321 --clear-groups "$@"); }
  # The plugin looks nothing up for a job without --dl-* options or DL_* variables. Under
  # accounting, Slurm refuses the user (no association) with its own message alone.
  run stranger sbatch --parsable --hold -o /dev/null --wrap true
  if enforces_associations; then
    [ "$status" -ne 0 ]
    [ "$output" = "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified" ]
  else
    [ "$status" -eq 0 ]
    scancel "$output"
  fi
  # A DL job needs the user's name and home (the checkpoint path): one line, nothing queued.
  run stranger sbatch --hold -o /dev/null --dl-gpus=1 --wrap true
  [ "$status" -ne 0 ]
  echo "$output" | grep -qF "dl: slurm_spank_init_post_opt: couldn't look up uid 54321 in the user database"
  ! squeue -h -o %U | grep -qx 54321 || false
}

# Every invalid value of every option: sbatch, srun and salloc fail with exactly one
# line naming the option, the value and what is allowed, and nothing is queued.
# every invalid value is rejected at submit time with one line and nothing queued
# bats test_tags=stacks
@test "every invalid value: one line, nothing queued" {
  while IFS='|' read -r args message; do
    [ -n "$args" ] || continue
    for cmd in sbatch srun salloc; do
      # shellcheck disable=SC2086
      run timeout 30 $cmd $args --wrap true
      [ "$cmd" = sbatch ] || run timeout 30 $cmd $args true
      [ "$status" -ne 0 ] || { echo "$cmd $args was accepted"; false; }
      [ "$output" = "$cmd: error: dl: $message" ] ||
        { echo "$cmd $args printed: $output"; false; }
      queue_empty
    done
  done <<EOF
--dl-gpus=abc|--dl-gpus=abc: expected a whole number from 1 to 64
--dl-gpus=0|--dl-gpus=0: expected a whole number from 1 to 64
--dl-gpus=65|--dl-gpus=65: expected a whole number from 1 to 64
--dl-placement=random|--dl-placement=random: expected one of pack, spread, switch, even
--dl-ckpt-dir=relative|--dl-ckpt-dir=relative: expected an absolute path
--dl-ckpt-dir=/tmp/../etc|--dl-ckpt-dir=/tmp/../etc: '.' and '..' are not allowed in the path
--dl-ckpt-dir=/etc/dl|--dl-ckpt-dir=/etc/dl: not under an allowed checkpoint root ($ckpt_root, /root)
--dl-ckpt-every=soon|--dl-ckpt-every=soon: expected a duration such as 90s, 30m or 2h, from 1s to 30d
--dl-ckpt-every=0s|--dl-ckpt-every=0s: expected a duration such as 90s, 30m or 2h, from 1s to 30d
--dl-ckpt-keep=0|--dl-ckpt-keep=0: expected a whole number from 1 to 1000
--dl-grace=-5|--dl-grace=-5: expected a duration such as 90s, 30m or 2h, from 1s to 1d
--dl-max-restarts=many|--dl-max-restarts=many: expected a whole number from 0 to 1000
--dl-elastic=8:2|--dl-elastic=8:2: expected MIN:MAX, two whole numbers from 1 to 64 with MIN <= MAX
--dl-elastic=4|--dl-elastic=4: expected MIN:MAX, two whole numbers from 1 to 64 with MIN <= MAX
--dl-gpus=16 --dl-elastic=2:8|--dl-gpus=16: outside the range --dl-elastic=2:8
--dl-experiment=a/b|--dl-experiment=a/b: expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'
--dl-trial=x:y|--dl-trial=x:y: expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'
--dl-trial=..|--dl-trial=..: expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'
--dl-watchdog=forever|--dl-watchdog=forever: expected a duration such as 90s, 30m or 2h, from 0s to 30d
EOF
}

# an invalid DL_* default in the environment is rejected the same way
@test "an invalid DL_* default is rejected too" {
  run env DL_PREEMPTIBLE=maybe sbatch --wrap true
  [ "$status" -ne 0 ]
  [ "$output" = "sbatch: error: dl: DL_PREEMPTIBLE=maybe: expected 1/yes/true or 0/no/false" ]
  queue_empty
}

# the checkpoint directory belongs to the job's user, mode 0700, one per job
# bats test_tags=stacks
@test "the checkpoint directory: the user's, 0700" {
  cd /home/dltest
  run as_dltest srun -N2 --dl-gpus=2 -J trainer sh -c 'echo "$DL_CKPT_DIR $SLURM_JOB_ID"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | sort -u | wc -l)" -eq 1 ]
  set -- $(echo "$output" | head -n 1)
  # <root>/<user>/<job id>: not the job name, which every run of a script shares.
  [ "$1" = "$ckpt_root/dltest/$2" ]
  [ "$(stat -c '%U %a' "$1")" = "dltest 700" ]
  [ "$(stat -c '%U %a' "$ckpt_root/dltest")" = "dltest 700" ]
}

# array tasks of one script get different default checkpoint directories
@test "array tasks get their own directories" {
  cd /home/dltest
  job=$(as_dltest sbatch --parsable --array=1-2 --dl-gpus=1 -o /home/dltest/arr-%a.out \
    --wrap 'echo "dir=$DL_CKPT_DIR default=$DL_CKPT_DIR_DEFAULT"')
  wait_until 60 '[ -s /home/dltest/arr-1.out ] && [ -s /home/dltest/arr-2.out ]'
  grep -qx "dir=$ckpt_root/dltest/${job}_1 default=1" /home/dltest/arr-1.out
  grep -qx "dir=$ckpt_root/dltest/${job}_2 default=1" /home/dltest/arr-2.out
  rm -f /home/dltest/arr-*.out
}

# a symlink planted in the checkpoint path is refused and nothing runs
@test "a planted symlink is refused, nothing runs" {
  cd /home/dltest
  as_dltest mkdir -p "$ckpt_root/dltest"
  rm -rf "$ckpt_root/dltest/evil"
  as_dltest ln -s /root "$ckpt_root/dltest/evil"
  # Visible at submit time: refused there, nothing queued.
  run as_dltest sbatch --parsable --dl-gpus=1 --dl-ckpt-dir="$ckpt_root/dltest/evil/x" \
    -o /home/dltest/evil.out --wrap 'echo the job ran'
  [ "$status" -ne 0 ]
  [[ $output == *"$ckpt_root/dltest/evil is a symbolic link (owner dltest"*"refusing to follow it"* ]]
  [ ! -e /root/x ]
  run as_dltest srun -N1 --dl-gpus=1 --dl-ckpt-dir="$ckpt_root/dltest/evil/x" true
  [ "$status" -ne 0 ]
  rm -f "$ckpt_root/dltest/evil" /home/dltest/evil.out
}

# another user's directory at <root>/<victim> is refused, naming it and its owner
@test "another user's <root>/<victim> is refused" {
  cd /home/dltest
  rm -rf "$ckpt_root/dltest"
  runuser -u dlother -- mkdir -m 0755 "$ckpt_root/dltest"
  run as_dltest sbatch --parsable --dl-gpus=1 -o /home/dltest/victim.out --wrap 'echo ran'
  [ "$status" -ne 0 ]
  [[ $output == *"$ckpt_root/dltest belongs to dlother (uid $(id -u dlother)), not to the job's user dltest"* ]]
  # Through srun inside an allocation made before the plant, the node refuses it too.
  [ -z "$(ls -A "$ckpt_root/dltest")" ]
  # A component of the user's own that others may write to.
  rm -rf "$ckpt_root/dltest"
  as_dltest mkdir -m 0777 "$ckpt_root/dltest"
  as_dltest chmod 0777 "$ckpt_root/dltest"
  run as_dltest sbatch --parsable --dl-gpus=1 -o /home/dltest/victim.out --wrap 'echo ran'
  [ "$status" -ne 0 ]
  [[ $output == *"$ckpt_root/dltest (owner dltest"*"mode 0777) is writable by other users"* ]]
  rm -rf "$ckpt_root/dltest" /home/dltest/victim.out
}

# a checkpoint root that dlother made is refused, naming it and its owner; nothing is written there
@test "a root dlother made is refused" {
  cd /home/dltest
  rm -rf "$ckpt_root/dltest"
  job=$(as_dltest sbatch --parsable --hold -w n1 --dl-gpus=1 -o /home/dltest/squat.out \
    --wrap 'echo ran; touch "$DL_CKPT_DIR/ran"')
  # The root is gone (a new node, a clean-up of /var/tmp) and dlother made it, like /tmp:
  # as its owner, dlother could rename <root>/dltest and put a directory of its own there.
  mv "$ckpt_root" "$ckpt_root.site"
  mkdir "$ckpt_root"
  chown dlother: "$ckpt_root"
  chmod 1777 "$ckpt_root"
  why="$ckpt_root belongs to dlother (uid $(id -u dlother)), neither root nor dltest (uid $(id -u dltest)): its owner could replace what lies below it; refusing to use it as a root"
  run as_dltest sbatch --parsable --dl-gpus=1 -o /home/dltest/squat2.out --wrap 'echo ran'
  [ "$status" -ne 0 ]
  [[ $output == *"$why"* ]]
  # Submitted before: refused on the node.
  scontrol release "$job"
  wait_state "$job" FAILED 60
  grep -qF "error: dl: slurm_spank_task_init: $why" /home/dltest/squat.out
  ! grep -q '^ran' /home/dltest/squat.out || false
  [ -z "$(ls -A "$ckpt_root")" ]
  node_up 1
  rm -f /home/dltest/squat.out /home/dltest/squat2.out
}

# slurmd makes a missing default checkpoint root, owned by root with mode 1777
@test "slurmd makes a missing root, root 1777" {
  mv "$ckpt_root" "$ckpt_root.site"
  "$DL_ROOT/scripts/minicluster" kill-node n4
  "$DL_ROOT/scripts/minicluster" start-node n4
  [ "$(stat -c '%U %a' "$ckpt_root")" = "root 1777" ]
  cd /home/dltest
  run as_dltest srun -N1 -w n4 --dl-gpus=1 sh -c 'echo "$DL_CKPT_DIR"; touch "$DL_CKPT_DIR/ran"'
  [ "$status" -eq 0 ]
  [ -e "$output/ran" ]
  # One that dlother made meanwhile stays as it is, and slurmd says whose it is.
  rm -rf "$ckpt_root"
  mkdir -m 0755 "$ckpt_root"
  chown dlother: "$ckpt_root"
  "$DL_ROOT/scripts/minicluster" kill-node n4
  "$DL_ROOT/scripts/minicluster" start-node n4
  [ "$(stat -c '%U %a' "$ckpt_root")" = "dlother 755" ]
  grep -qF "error: dl: default_ckpt_root: $ckpt_root belongs to dlother (uid $(id -u dlother)), not to root: its owner could replace" \
    "$mcdir/log/slurmd-n4.log"
}

# on a file system that squashes root, as NFS does, slurmstepd reads nothing of the job's as root
@test "root_squash: slurmstepd reads nothing as root" {
  squash=$mcdir/squash
  mkdir -p "$squash" "$squash.src"
  chmod 1777 "$squash.src"
  # Mounted where the nodes' slurmd see it (in_nodes_ns), and used from there.
  in_nodes_ns "$DL_ROOT/tests/integration/root_squash_fs.py" "$squash.src" "$squash" \
    "$BATS_TEST_TMPDIR/as-root.log" 2>"$BATS_TEST_TMPDIR/squash.err" 3>&- &
  echo $! >"$BATS_TEST_TMPDIR/squash.pid"
  wait_until 20 "in_nodes_ns mountpoint -q '$squash'"
  plugstack_with "allowed_ckpt_roots=$squash"
  cd /home/dltest
  # <root>/dltest 0700, which root cannot open there; the job's TMPDIR in it.
  in_nodes_ns runuser -u dltest -- mkdir -m 0700 "$squash/dltest" "$squash/dltest/tmp"
  : >"$BATS_TEST_TMPDIR/as-root.log"
  job=$(in_nodes_ns runuser -u dltest -- env SLURM_CONF="$SLURM_CONF" TMPDIR="$squash/dltest/tmp" sbatch --parsable -w n1 --dl-gpus=1 \
    --dl-ckpt-dir="$squash/dltest/run" -o /home/dltest/squash.out \
    --wrap 'srun -n1 sh -c "touch \$DL_CKPT_DIR/ran"; echo ran')
  wait_state "$job" COMPLETED 60
  # Nothing was asked of the file system as root: not the checks of the path, not the
  # clean-up of channel files at the step's end.
  cat "$BATS_TEST_TMPDIR/as-root.log"
  [ ! -s "$BATS_TEST_TMPDIR/as-root.log" ]
  grep -qx ran /home/dltest/squash.out
  [ "$(stat -c '%U %a' "$squash.src/dltest/run")" = "dltest 700" ]
  [ -e "$squash.src/dltest/run/ran" ]
  rm -f /home/dltest/squash.out
}

# slurmd says, when it loads the plugin, that the default checkpoint root is not shared
@test "slurmd says the default root is not shared" {
  # The mini-cluster's root is a directory on this machine's own disk (statfs type).
  for n in n1 n2 n3 n4; do
    [ "$(grep -c "error: dl: default_ckpt_root $ckpt_root is on [a-z0-9/]*, a \(node-local file system\|file system not known to be shared\): a job requeued onto other nodes will not find its checkpoints there" \
      "$mcdir/log/slurmd-$n.log")" -ge 1 ]
  done
}

# Runs a command in the mount namespace of the nodes' slurmd: on another stack the
# daemons run in one of their own (scripts/lib/stack.sh), which a mount made here misses.
in_nodes_ns() { nsenter -t "$(head -n 1 "$mcdir/run/slurmd-n1.pid")" -m -r -- env -C "$PWD" "$@"; }

# Node n$1 is not drained (a failing init_post_opt used to drain it: "batch job complete
# failure", so a planted link would take nodes away from everyone).
node_up() { [[ ! $(sinfo -h -n "n$1" -o %T) =~ drain ]]; }

# dlother plants a link or a directory at <root>/dltest between submit and run: the job fails naming
# it, the node stays up
@test "a link planted before the run fails the job" {
  cd /home/dltest
  rm -rf "$ckpt_root/dltest" /home/dlother/plant
  runuser -u dlother -- mkdir -m 0755 /home/dlother/plant
  for plant in link dir; do
    rm -f /home/dltest/swap.out
    # Nothing to refuse at submit time: <root>/dltest does not exist yet.
    job=$(as_dltest sbatch --parsable --hold -w n1 --dl-gpus=1 -o /home/dltest/swap.out \
      --wrap 'echo ran; touch "$DL_CKPT_DIR/ran"')
    if [ $plant = link ]; then
      runuser -u dlother -- ln -s /home/dlother/plant "$ckpt_root/dltest"
      why="$ckpt_root/dltest is a symbolic link (owner dlother (uid $(id -u dlother))); refusing to follow it"
    else
      runuser -u dlother -- mkdir -m 0755 "$ckpt_root/dltest"
      why="$ckpt_root/dltest belongs to dlother (uid $(id -u dlother)), not to the job's user dltest"
    fi
    scontrol release "$job"
    wait_state "$job" FAILED 60
    grep -qF "error: dl: slurm_spank_task_init: $why" /home/dltest/swap.out
    ! grep -q '^ran' /home/dltest/swap.out || false
    [ -z "$(ls -A /home/dlother/plant)" ]
    [ ! -L "$ckpt_root/dltest" ] || [ "$(readlink "$ckpt_root/dltest")" = /home/dlother/plant ]
    [ "$(stat -c %U "$ckpt_root/dltest")" = dlother ]
    node_up 1
    rm -rf "$ckpt_root/dltest"
  done
  rm -rf /home/dlother/plant /home/dltest/swap.out
}

# dlother swaps <root>/dltest for a link to a planted checkpoint between two runs: the next run is
# refused, nothing read or written there
@test "a swapped <root>/dltest refuses the next run" {
  cd /home/dltest
  rm -rf "$ckpt_root/dltest" /home/dlother/plant
  job=$(as_dltest sbatch --parsable -w n1 --requeue --dl-gpus=1 -o /home/dltest/runs.out \
    --open-mode=append --wrap 'echo "run ${SLURM_RESTART_COUNT:-0}"; ls "$DL_CKPT_DIR"; touch "$DL_CKPT_DIR/ran-${SLURM_RESTART_COUNT:-0}"')
  wait_state "$job" COMPLETED 60
  [ -e "$ckpt_root/dltest/$job/ran-0" ]
  scontrol requeuehold "$job"
  wait_state "$job" PENDING 60
  # The site's clean-up (or another node's root) leaves <root>/dltest free; dlother takes
  # the name, with a checkpoint of its own for the job's directory.
  rm -rf "$ckpt_root/dltest"
  runuser -u dlother -- mkdir -p -m 0755 "/home/dlother/plant/$job/step-000000100"
  runuser -u dlother -- sh -c "echo planted >/home/dlother/plant/$job/step-000000100/manifest.json"
  runuser -u dlother -- ln -s /home/dlother/plant "$ckpt_root/dltest"
  before=$(find /home/dlother/plant -printf '%p %s %T@\n' | sort)
  scontrol release "$job"
  wait_state "$job" FAILED 60
  grep -qF "error: dl: slurm_spank_task_init: $ckpt_root/dltest is a symbolic link (owner dlother (uid $(id -u dlother))); refusing to follow it" /home/dltest/runs.out
  [ "$(grep -c '^run ' /home/dltest/runs.out)" -eq 1 ]
  ! grep -q 'step-000000100' /home/dltest/runs.out || false
  [ "$(find /home/dlother/plant -printf '%p %s %T@\n' | sort)" = "$before" ]
  node_up 1
  rm -rf "$ckpt_root/dltest" /home/dlother/plant /home/dltest/runs.out
}

# a step whose dlrun was killed with SIGKILL leaves no channel file; links, FIFOs, dlother's files
# and other steps' files with its names are left alone
@test "a killed dlrun leaves no channel file" {
  cd /home/dltest
  # A plain job, then an array task (dlrun names it <array job id>_<task id>).
  for task in "" 5; do
    rm -f shm.out channel
    job=$(as_dltest sbatch --parsable --hold ${task:+--array=$task} -w n1 -o /home/dltest/shm.out \
      --wrap "srun -n1 --mpi=pmix $DL_BUILD_DIR/launcher/dlrun sh -c \
        'echo \$DL_CLIENT_FILE >channel; kill -KILL \$PPID; sleep 5'; echo step ended")
    key=$job${task:+_$task}
    # dltest plants a link, a FIFO and a file of step 1 at names of the step, dlother a
    # file: the step's end must neither follow, block on nor remove any of them.
    p=/dev/shm/dlrun-$key
    as_dltest sh -c "echo target >$p-target && ln -s $p-target $p.0-7-1 && mkfifo $p.0-7-2 &&
      echo step1 >$p.1-0-3"
    runuser -u dlother -- sh -c "echo other >$p.0-7-4"
    scontrol release "$job"
    wait_state "$key" COMPLETED 60
    # Named by the rank's dlrun, which then died without removing it.
    grep -qx 'step ended' shm.out
    [[ $(cat channel) == $p.0-0-* ]]
    wait_until 30 "[ ! -e '$(cat channel)' ]"
    [ "$(readlink "$p.0-7-1")" = "$p-target" ] && [ "$(cat "$p-target")" = target ]
    [ -p "$p.0-7-2" ]
    [ "$(stat -c %U "$p.0-7-4")" = dlother ] && [ "$(cat "$p.0-7-4")" = other ]
    [ "$(cat "$p.1-0-3")" = step1 ]
    node_up 1
    rm -f "$p"* shm.out channel
  done
}

# dlother planting every pid's channel file name cannot stop dltest's step
@test "planted channel file names stop nothing" {
  cd /home/dltest
  rm -f shm.out
  job=$(as_dltest sbatch --parsable --hold -w n1 -o /home/dltest/shm.out \
    --wrap "srun -n1 --mpi=pmix $DL_BUILD_DIR/launcher/dlrun sh -c \
      'test -f \"\$DL_CLIENT_FILE\" && echo client file \$DL_CLIENT_FILE'")
  # Rank 0 of step 0 under every pid the kernel can hand out: a name made of the job,
  # step, rank and pid alone is taken whatever dlrun's pid.
  p=/dev/shm/dlrun-$job
  runuser -u dlother -- sh -c "seq -f '$p.0-0-%.0f' 1 $(cat /proc/sys/kernel/pid_max) | xargs touch"
  scontrol release "$job"
  wait_state "$job" 'COMPLETED|FAILED' 60
  cat shm.out
  [ "$(job_state "$job")" = COMPLETED ]
  grep -q "client file $p\.0-0-[0-9a-f]\{16\}$" shm.out
  # dlother's files are dlother's, untouched by the step's end.
  [ "$(stat -c %U "$p.0-0-1")" = dlother ]
  rm -f shm.out
}

# sbatch, srun and salloc --help list every option with its help
@test "--help lists every option" {
  for cmd in sbatch srun salloc; do
    run $cmd --help
    for opt in dl-gpus=N 'dl-placement=pack|spread|switch|even' dl-ckpt-dir=PATH \
      dl-ckpt-every=DURATION dl-ckpt-keep=N dl-preemptible dl-grace=DURATION \
      dl-max-restarts=N dl-elastic=MIN:MAX dl-experiment=NAME dl-trial=ID dl-watchdog=DURATION; do
      echo "$output" | grep -qF -- "--$opt" || { echo "$cmd --help lacks --$opt"; false; }
    done
  done
}

# a bad plugstack argument is a load error naming it, which dlrun --check-config finds first
@test "a bad plugstack argument is a load error" {
  sed "s|^PlugStackConfig=.*|PlugStackConfig=$PWD/plugstack.conf|" "$SLURM_CONF" >slurm.conf
  plugin=$(awk '{print $2}' "$mcdir/plugstack.conf")
  # The cluster's own line passes the check.
  run "$DL_BUILD_DIR/launcher/dlrun" --check-config "$mcdir/plugstack.conf"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == "$mcdir/plugstack.conf:1: required $plugin default_ckpt_root=$ckpt_root"* ]]
  [ "${lines[-1]}" = OK ]
  # A typo: the check names the line and says what the plugin will say; Slurm then
  # fails every command with it.
  unknown="plugstack argument 'max_gpu=8': unknown key 'max_gpu' (expected default_ckpt_root, allowed_ckpt_roots, max_gpus, default_grace, shared_ckpt_root, drain_after, drain_state_dir, down_failed_batch_host, gpu_metrics or slurm_bindir)"
  printf '# site\nrequired %s max_gpu=8\n' "$plugin" >plugstack.conf
  run "$DL_BUILD_DIR/launcher/dlrun" --check-config "$PWD/plugstack.conf"
  [ "$status" -eq 2 ]
  [ "$output" = "dlrun: $PWD/plugstack.conf:2: spank_dl.so would refuse to load: $unknown" ]
  SLURM_CONF=$PWD/slurm.conf run sbatch --wrap true
  [ "$status" -ne 0 ]
  echo "$output" | head -n 1 | grep -qxF "sbatch: error: dl: slurm_spank_init: $unknown"
  echo "required $plugin max_gpus=none" >plugstack.conf
  SLURM_CONF=$PWD/slurm.conf run sbatch --wrap true
  [ "$status" -ne 0 ]
  echo "$output" | head -n 1 | grep -qxF "sbatch: error: dl: slurm_spank_init: max_gpus=none: expected a whole number from 1 to 1048576"
  queue_empty
  # Site limits apply to users.
  echo "required $plugin max_gpus=8 default_ckpt_root=$ckpt_root" >plugstack.conf
  SLURM_CONF=$PWD/slurm.conf run sbatch --dl-gpus=9 --wrap true
  [ "$output" = "sbatch: error: dl: --dl-gpus=9: expected a whole number from 1 to 8" ]
  queue_empty
}
