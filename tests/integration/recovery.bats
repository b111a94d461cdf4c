#!/usr/bin/env bats
# Recovery without the queue (issue 13): dlrun run in the batch script (or in salloc) is
# the job-level launcher; a failed step starts again inside the allocation, from the
# newest checkpoint, without a requeue. Every interrupted run is compared with an
# uninterrupted reference run as in e2e.bats: parameters equal bit for bit, every resume
# right after the newest checkpoint.

load helpers
load reference

setup_file() {
  reference_setup_file
  # For the PyTorch DDP example.
  export PYTHONPATH=$DL_ROOT/python DL_CKPT_LIB=$DL_BUILD_DIR/ckpt/.libs/libdlckpt.so.0
}

setup() { cd "$BATS_TEST_TMPDIR"; }

teardown() {
  show_on_failure out.txt
  [ ! -f watch.pid ] || stop_watch
  cancel_all
  as_dltest scancel --quiet -u dltest 2>/dev/null || true
  plugstack_restore
  restore_nodes
  rm -f /home/dltest/go /home/dltest/flood.out
}

unique_name() { echo "rec-$1-$$-$RANDOM"; }

# The PyTorch DDP example on two ranks, uninterrupted: the parameters in
# $REF_DIR/torch-$1.bin, its output in $REF_DIR/torch-$1.txt.
torch_reference() {
  local out=$REF_DIR/torch-$1.bin
  if [ ! -f "$out" ]; then
    run_srun -N2 --ntasks-per-node=1 --mpi=pmix "$DLRUN" /usr/bin/python3 "$EXAMPLES/train_ddp.py" \
      --steps "$1" --out "$out" >"$REF_DIR/torch-$1.txt" 2>&1
  fi
  [ -s "$out" ] || {
    cat "$REF_DIR/torch-$1.txt" >&2
    return 1
  }
  echo "$out"
}
final_loss() { sed -n "s/^\[rank 0@n[0-9]*\] final step $1 loss //p" "$2"; }

written() { grep -c "checkpoint step .* written" out.txt || true; }

# Job states seen while $1 runs, one a line, into states.txt (in the background).
watch_states() {
  (while :; do job_state "$1"; sleep 0.3; done >states.txt 2>/dev/null) &
  echo $! >watch.pid
}
stop_watch() { kill "$(cat watch.pid)" 2>/dev/null || true; }

# recovery 1: kill -9 of one rank three times: three restarts inside the allocation, never requeued,
# equal to the reference
@test "recovery 1: three rank kills: three restarts in place" {
  ref=$(reference 700)
  job=$(submit -J "$(unique_name kill3)" -N2 --ntasks-per-node=2 --dl-gpus=4 \
    --dl-ckpt-every=2s --dl-max-restarts=3 -o out.txt \
    --wrap "$DLRUN $DP --steps 700 --step-ms 100 --out $PWD/out.bin")
  wait_state "$job" RUNNING 60
  watch_states "$job"
  # Ranks 3, 1, 3 (ranks 0-1 on the first node, 2-3 on the second): no node causes two
  # failures in a row, which would exclude it (recovery 7).
  for i in 1 2 3; do
    # A checkpoint newer than the last resume, so that the restart guard sees progress.
    n=$(written)
    wait_until 60 "[ \$(written) -ge $((n + 1)) ]"
    rank=$((i == 2 ? 1 : 3))
    pid=""
    for p in $(job_pids "$job" dp_trainer); do
      tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "RANK=$rank" && pid=$p
    done
    [ -n "$pid" ]
    kill -KILL "$pid"
    wait_until 60 "[ \$(grep -c 'restart $i inside the allocation' out.txt) -ge 1 ]"
  done
  wait_state "$job" COMPLETED 120
  stop_watch
  # The job never left RUNNING (no requeue: Slurm's restart count stays 0).
  ! grep -qv -e RUNNING -e COMPLET -e '^$' states.txt || false
  [ "$(job_field "$job" Restarts)" = 0 ]
  [ "$(grep -c 'killed by signal 9 (Killed): stopping all ranks' out.txt)" = 3 ]
  # The program saw each restart.
  for i in 1 2 3; do grep -q "^\[rank 0@n[0-9]*\] restart count $i" out.txt; done
  grep -q 'RESTARTING: step failed (exit code 76); restart 3 of 3 after a failure' out.txt
  check_against_reference "$ref" 3
  [[ $(job_comment "$job") =~ \|\ COMPLETED\ step\ 699 ]]
}

# recovery 2: a node killed: the elastic job goes on on the node left inside its allocation, equal
# to the reference
@test "recovery 2: node killed: elastic job goes on in place" {
  ref=$(reference 500)
  # --dl-elastic=2:4 on nodes of 2 GPUs: one or two whole nodes, one rank per GPU.
  job=$(submit -J "$(unique_name node)" --dl-elastic=2:4 --dl-ckpt-every=2s -o out.txt \
    --wrap "$DLRUN $DP --steps 500 --step-ms 40 --out $PWD/out.bin")
  wait_until 90 '[ "$(written)" -ge 2 ]'
  [ "$(job_field "$job" NumNodes)" = 2 ]
  batch=$(job_field "$job" BatchHost)
  victim=$(other_node "$job")
  watch_states "$job"
  "$DL_ROOT/scripts/minicluster" kill-node "$victim"
  wait_until 60 "grep -q 'node $victim failed: restarting on the 1 node(s) left with 2 rank(s)' out.txt"
  grep -q "removed node $victim from job $job" out.txt
  wait_state "$job" COMPLETED 120
  stop_watch
  ! grep -qv -e RUNNING -e COMPLET -e '^$' states.txt || false
  [ "$(job_field "$job" Restarts)" = 0 ]
  [ "$(job_field "$job" NodeList)" = "$batch" ]
  grep -q 'resumed from .* written by 4 ranks)' out.txt
  check_against_reference "$ref" 1
}

# recovery 5: a node killed under a job that is not elastic: requeued at once, excluding it before
# the job may run again; equal to the reference
@test "recovery 5: node killed: requeued at once, excluding it" {
  ref=$(reference 500)
  job=$(submit -J "$(unique_name node-requeue)" -N2 --ntasks-per-node=2 --dl-gpus=4 \
    --dl-ckpt-every=2s --open-mode=append -o out.txt \
    --wrap "$DLRUN $DP --steps 500 --step-ms 40 --out $PWD/out.bin")
  wait_until 90 '[ "$(written)" -ge 2 ]'
  victim=$(other_node "$job")
  # The state, the exclusion and the reason, while the job goes round.
  (while :; do
    scontrol show job "$job" -o | tr ' ' '\n' |
      awk -F= '$1 == "JobState" {s = $2} $1 == "ExcNodeList" {e = $2} $1 == "Reason" {r = $2}
        END {print s, e, r}'
    sleep 0.2
  done >states.txt 2>/dev/null) &
  echo $! >watch.pid
  "$DL_ROOT/scripts/minicluster" kill-node "$victim"
  wait_state "$job" COMPLETED 180
  stop_watch
  grep -q "node $victim does not answer: ending the step" out.txt
  grep -q "job $job excludes node $victim and is released" out.txt
  [ "$(job_field "$job" ExcNodeList)" = "$victim" ]
  [ "$(job_field "$job" Restarts)" = 1 ]
  ! scontrol show hostnames "$(job_field "$job" NodeList)" | grep -qx "$victim" || false
  # Never pending without the exclusion unless held: no run could be placed on the node.
  [ -z "$(awk '$1 == "PENDING" && $2 == "(null)" && $3 !~ /[Hh]eld/' states.txt)" ] || {
    uniq -c states.txt
    false
  }
  grep -q '^PENDING (null) .*[Hh]eld' states.txt || grep -q '^PENDING '"$victim"' ' states.txt
  check_against_reference "$ref" 1
}

# recovery 3: the PyTorch DDP example through one restart inside the allocation, equal to the
# reference
# bats test_tags=stacks
@test "recovery 3: PyTorch DDP restarted in the allocation" {
  ref=$(torch_reference 150)
  job=$(submit -J "$(unique_name torch)" -N2 --ntasks-per-node=1 --dl-gpus=2 --dl-ckpt-every=3s \
    -o out.txt --wrap "$DLRUN /usr/bin/python3 $EXAMPLES/train_ddp.py --steps 150 --step-ms 50 --out $PWD/out.bin")
  wait_until 120 '[ "$(written)" -ge 1 ]'
  pid=$(job_pids "$job" python3 | tail -n 1)
  [ -n "$pid" ]
  kill -KILL "$pid"
  wait_state "$job" COMPLETED 180
  grep -q 'restart 1 inside the allocation' out.txt
  [ "$(job_field "$job" Restarts)" = 0 ]
  check_against_reference "$ref" 1
  [ "$(final_loss 149 "${ref%.bin}.txt")" = "$(final_loss 149 out.txt)" ]
}

# The PyTorch DDP example on two nodes under dlrun in the batch script; once it wrote a
# checkpoint mid-run, a node is killed: the batch host with $1 = batch, the other node
# otherwise. Sets job and victim.
torch_node_killed() {
  job=$(submit -J "$(unique_name torch-node)" -N2 --ntasks-per-node=1 --dl-gpus=2 \
    --dl-ckpt-every=3s --open-mode=append -o out.txt \
    --wrap "$DLRUN /usr/bin/python3 $EXAMPLES/train_ddp.py --steps 150 --step-ms 50 --out $PWD/out.bin")
  # The first checkpoint is of step 0: resume from one written mid-run.
  wait_until 120 '[ "$(written)" -ge 2 ]'
  if [ "$1" = batch ]; then victim=$(job_field "$job" BatchHost); else victim=$(other_node "$job"); fi
  "$DL_ROOT/scripts/minicluster" kill-node "$victim"
}

# recovery 6: a node killed under the PyTorch DDP example: requeued without it, resumed, equal to
# the reference
@test "recovery 6: node killed under PyTorch DDP: requeued" {
  ref=$(torch_reference 150)
  torch_node_killed other
  wait_state "$job" COMPLETED 180
  grep -q "node $victim does not answer: ending the step" out.txt
  grep -q "job $job excludes node $victim and is released" out.txt
  [ "$(job_field "$job" Restarts)" = 1 ]
  ! scontrol show hostnames "$(job_field "$job" NodeList)" | grep -qx "$victim" || false
  check_against_reference "$ref" 1
  [ "$(final_loss 149 "${ref%.bin}.txt")" = "$(final_loss 149 out.txt)" ]
}

# Ctrl-C in salloc: `dlrun ARGS...` in an allocation of two nodes (into out.txt; the job in
# job.id), SIGINT to it once CONDITION holds; salloc's exit status in rc.
ctrl_c_in_salloc() {
  local condition=$1 salloc_pid
  shift
  timeout 120 salloc -N2 --ntasks-per-node=1 --dl-gpus=2 sh -c \
    "echo \$\$ >launcher.pid; echo \$SLURM_JOB_ID >job.id; exec $DLRUN $*" >out.txt 2>&1 &
  salloc_pid=$!
  wait_until 60 "$condition"
  # A terminal sends SIGINT to the foreground group: the launcher.
  kill -INT "$(cat launcher.pid)"
  rc=0
  wait "$salloc_pid" || rc=$?
}

# recovery 4: dlrun in salloc starts the ranks itself; SIGINT (Ctrl-C) stops every rank cleanly
@test "recovery 4: dlrun in salloc; Ctrl-C stops every rank" {
  timeout 120 salloc -N2 --ntasks-per-node=1 --dl-gpus=2 "$DLRUN" -v "$DP" --steps 60 --step-ms 0 \
    --out "$PWD/small.bin" >small.txt 2>&1 || { cat small.txt; false; }
  grep -q "^\[rank 1@n[0-9]*\] dlrun: started '.*dp_trainer' (pid [0-9]*): RANK=1 WORLD_SIZE=2 " small.txt
  grep -q '\] final step 59 ' small.txt
  ctrl_c_in_salloc '[ "$(last_step)" ] && [ "$(last_step)" -ge 10 ]' \
    "$DP" --steps 100000 --step-ms 20 --out "$PWD/out.bin"
  [ "$rc" = 143 ] || { cat out.txt; false; }
  grep -q 'SIGINT: stopping every rank' out.txt
  grep -q 'not requeued: only batch jobs can be requeued' out.txt
  [ -z "$(job_pids "$(cat job.id)" dp_trainer)" ]
  ! grep -q 'inside the allocation' out.txt || false
}

# recovery 4: after Ctrl-C, rank 0 ends the run as stopped (143); a program that then aborts the
# step (an MPI program whose peer ended first: MPI_Abort) does not change that exit code
@test "recovery 4: Ctrl-C, then a program aborts the step: the stop's exit code" {
  ctrl_c_in_salloc '[ "$(grep -c "mpi rank=[01] size=2 sum=1$" out.txt)" -eq 2 ]' \
    "$DL_BUILD_DIR/tests/integration/mpi_allreduce" --abort-when-ended
  grep -q 'MPI_ABORT was invoked' out.txt
  grep -q 'the step ended with exit code 1 after rank 0 had ended the run with exit code 143: exit code 143$' out.txt
  [ "$rc" = 143 ]
}

# The node the batch script's second node was on its first run (kept in ./victim, so
# that the requeued run crashes nowhere): the trainer's ranks there crash on every run.
crash_on_second_node() {
  echo "[ -f victim ] || scontrol show hostnames \$SLURM_JOB_NODELIST | sed -n 2p >victim; \
    exec $DLRUN $TRAINER --steps 40 --step-ms 50 --crash-at-step 5 --fail-runs 1000 --crash-node \$(cat victim)"
}

# recovery 7: a node that caused the last two failures is excluded: the job is requeued without it
# and completes
@test "recovery 7: a twice-failing node is excluded on requeue" {
  TRAINER=$DL_BUILD_DIR/tests/integration/dlrun_trainer
  job=$(submit -J "$(unique_name culprit)" -N2 --ntasks-per-node=1 --dl-gpus=2 -o out.txt \
    --open-mode=append --wrap "$(crash_on_second_node)")
  wait_state "$job" COMPLETED 120
  victim=$(cat victim)
  grep -q 'restart 1 inside the allocation' out.txt
  grep -q "node $victim is excluded and the job is not elastic" out.txt
  grep -q "node $victim caused the last two failures (rank 1 on $victim failed; rank 1 on $victim failed); excluded" out.txt
  grep -q "job $job excludes node $victim and is released" out.txt
  [ "$(job_field "$job" ExcNodeList)" = "$victim" ]
  [ "$(job_field "$job" Restarts)" = 1 ]
  ! scontrol show hostnames "$(job_field "$job" NodeList)" | grep -qx "$victim" || false
  grep -q "done rank=1 step=40" out.txt
}

# recovery 8: the elastic job goes on inside its allocation without a node that caused its last two
# failures
@test "recovery 8: elastic job drops a twice-failing node" {
  TRAINER=$DL_BUILD_DIR/tests/integration/dlrun_trainer
  job=$(submit -J "$(unique_name culprit-elastic)" --dl-elastic=2:4 -o out.txt \
    --wrap "$(crash_on_second_node)")
  wait_state "$job" COMPLETED 120
  victim=$(cat victim)
  grep -q "node $victim caused the last two failures (rank [23] on $victim failed; rank [23] on $victim failed); excluded" out.txt
  grep -q "node $victim is excluded: restarting on the 1 node(s) left with 2 rank(s)" out.txt
  grep -q "removed node $victim from job $job" out.txt
  grep -q 'restart 2 inside the allocation (DL_RESTART_COUNT=2) on ' out.txt
  [ "$(job_field "$job" Restarts)" = 0 ]
  [ "$(job_field "$job" NodeList)" = "$(job_field "$job" BatchHost)" ]
  grep -q "start rank=1 world=2 restart=2" out.txt
  grep -q "done rank=1 step=40" out.txt
}

# recovery 9: in salloc (no requeue possible) a node that caused the last two failures is kept, and
# the job restarts on it
@test "recovery 9: salloc keeps a twice-failing node" {
  TRAINER=$DL_BUILD_DIR/tests/integration/dlrun_trainer
  timeout 120 salloc -N2 --ntasks-per-node=1 --dl-gpus=2 sh -c \
    "victim=\$(scontrol show hostnames \$SLURM_JOB_NODELIST | sed -n 2p); echo \$victim >victim; \
     exec $DLRUN $TRAINER --steps 20 --step-ms 50 --crash-at-step 5 --fail-runs 2 --crash-node \$victim" \
    >out.txt 2>&1 || { cat out.txt; false; }
  victim=$(cat victim)
  grep -q "node $victim caused the last two failures (rank 1 on $victim failed; rank 1 on $victim failed), but the job cannot be requeued without it (not a batch job): restarting on the same nodes" out.txt
  grep -q 'restart 2 inside the allocation (DL_RESTART_COUNT=2) on ' out.txt
  grep -q "done rank=1 step=20" out.txt
}

slurmd_log() { echo "$(dirname "$SLURM_CONF")/log/slurmd-$1.log"; }
# slurm-dl's DOWN reason of node $1, if any.
down_reason() { sinfo -h -N -n "$1" -o '%E' | sort -u | grep '^slurm-dl: ' || true; }

# recovery 10: the batch host killed: spank_dl.so (down_failed_batch_host=yes) marks it DOWN at
# once, Slurm requeues the job, it resumes on the other nodes; equal to the reference
@test "recovery 10: batch host killed: marked DOWN, requeued" {
  plugstack_with down_failed_batch_host=yes
  ref=$(reference 500)
  job=$(submit -J "$(unique_name batch-host)" -N2 --ntasks-per-node=2 --dl-gpus=4 \
    --dl-ckpt-every=2s --open-mode=append -o out.txt \
    --wrap "$DLRUN $DP --steps 500 --step-ms 40 --out $PWD/out.bin")
  wait_until 90 '[ "$(written)" -ge 2 ]'
  victim=$(job_field "$job" BatchHost)
  other=$(other_node "$job")
  "$DL_ROOT/scripts/minicluster" kill-node "$victim"
  # Marked by the plugin on the other node, not by slurmctld after SlurmdTimeout (whose
  # reason would be "Not responding", and then the plugin would leave the node alone).
  wait_until 60 "down_reason $victim | grep -q \"^slurm-dl: job $job: batch host lost the job's ranks and its slurmd (.*) refused $other 3 times\$\""
  sinfo -h -N -n "$victim" -o '%T' | grep -q '^down'
  # The plugin logs once slurmctld has answered: a moment after sinfo shows the node DOWN.
  wait_until 10 "grep -q \"marked node $victim DOWN (.*): slurm-dl: job $job: \" \"$(slurmd_log "$other")\""
  wait_state "$job" COMPLETED 180
  [ "$(job_field "$job" Restarts)" = 1 ]
  ! scontrol show hostnames "$(job_field "$job" NodeList)" | grep -qx "$victim" || false
  check_against_reference "$ref" 1
}

# recovery 11 (hostile, as dltest): tasks exiting 78 have no node marked DOWN whose slurmd answers,
# nor one that is not their job's batch host
@test "recovery 11 (hostile): exit 78 downs no live node" {
  plugstack_with down_failed_batch_host=yes
  cd /home/dltest
  mapfile -t nodes < <(sinfo -h -N -o '%N' | sort -u)
  [ "${#nodes[@]}" -ge 3 ]
  first=${nodes[0]} second=${nodes[1]} dead=${nodes[2]}
  # A node outside the job is dead (Slurm marks it after SlurmdTimeout; slurm-dl never
  # does), and the job's name spells it as a batch host.
  "$DL_ROOT/scripts/minicluster" kill-node "$dead"
  job=$(as_dltest sbatch --parsable -w "$first,$second" -N2 --ntasks-per-node=1 --dl-gpus=2 \
    -J "x BatchHost=$dead" -o /dev/null \
    --wrap "srun sh -c 'exit 78'; srun sh -c 'kill -KILL \$\$'")
  wait_state "$job" 'COMPLETED|FAILED' 60
  # (job_field would read the job's name.)
  batch=$(scontrol show job "$job" | sed -n 's/^ *BatchHost=//p')
  [ "$batch" = "$first" ]
  # The check ran on the other node for both steps (exit 78, SIGKILL), found the batch
  # host's slurmd answering, and left it.
  wait_until 20 "[ \$(grep -c \"job $job: a task lost rank 0 or was killed, but batch host $batch's slurmd answers: not marking it DOWN\" \"$(slurmd_log "$second")\") = 2 ]"
  [ -z "$(down_reason "$first")" ]
  [ -z "$(down_reason "$second")" ]
  [ -z "$(down_reason "$dead")" ]
  sinfo -h -N -n "$first" -o '%T' | grep -qv down
  # An ordinary job (no --dl-* option) exiting 78 is not looked at.
  plain=$(as_dltest sbatch --parsable -w "$first,$second" -N2 -o /dev/null \
    --wrap "srun sh -c 'exit 78'")
  wait_state "$plain" 'COMPLETED|FAILED' 60
  sleep 2
  ! grep -q "job $plain: " "$(slurmd_log "$second")" || false
  [ -z "$(down_reason "$first")" ]
}

# recovery 11b (hostile, as dlother): a batch host whose slurmd another user floods with idle
# connections is not marked DOWN
@test "recovery 11b (hostile): a flooded slurmd is not DOWN" {
  plugstack_with down_failed_batch_host=yes
  cd /home/dltest
  mapfile -t nodes < <(sinfo -h -N -o '%N' | sort -u)
  first=${nodes[0]} second=${nodes[1]}
  rm -f go
  job=$(as_dltest sbatch --parsable -w "$first,$second" -N2 --ntasks-per-node=1 --dl-gpus=2 \
    -o /dev/null --wrap "while [ ! -e go ]; do sleep 0.2; done; srun -N1 -n1 -w $second sh -c 'exit 78'")
  wait_state "$job" RUNNING 60
  IFS='|' read -r addr port _ < <(sinfo -h -N -n "$first" -O 'NodeAddr:|,Port:|' | head -n 1)
  # Fewer seconds than slurmctld's own SlurmdTimeout (20 s here): Slurm itself would
  # mark the node DOWN after that.
  runuser -u dlother -- python3 - "$addr" "$port" 6000 12 <"$BATS_TEST_DIRNAME/flood_slurmd.py" >flood.out &
  flood=$!
  wait_until 20 'grep -q flooding flood.out'
  sleep 2 # until the listen queue is full
  as_dltest touch go
  # The check ran on the other node: slurmd answered after all, or was left to Slurm.
  wait_until 40 "grep -Eq \"job $job: a task lost rank 0 or was killed, (but|and) batch host $first's slurmd\" \"$(slurmd_log "$second")\""
  wait "$flood"
  grep "job $job: " "$(slurmd_log "$second")" >&3 || true
  [ -z "$(down_reason "$first")" ]
  ! grep -q "marked node $first DOWN (.*): slurm-dl: job $job: " "$(slurmd_log "$second")" || false
  wait_state "$job" 'COMPLETED|FAILED' 60
}

# recovery 12: the batch host of the PyTorch DDP example killed (down_failed_batch_host=yes):
# requeued at once, resumed on the other nodes, equal to the reference
@test "recovery 12: PyTorch DDP batch host killed: requeued" {
  plugstack_with down_failed_batch_host=yes
  ref=$(torch_reference 150)
  torch_node_killed batch
  wait_until 60 "down_reason $victim | grep -q '^slurm-dl: job $job: batch host lost'"
  wait_state "$job" COMPLETED 180
  [ "$(job_field "$job" Restarts)" = 1 ]
  ! scontrol show hostnames "$(job_field "$job" NodeList)" | grep -qx "$victim" || false
  check_against_reference "$ref" 1
  [ "$(final_loss 149 "${ref%.bin}.txt")" = "$(final_loss 149 out.txt)" ]
}

# The program of rank $2 in job $1 (process name $3) stopped with SIGSTOP: a hang as a
# stuck rank makes one, its peers blocked in their collective.
stop_rank() {
  local p pid=""
  for p in $(job_pids "$1" "$3"); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "RANK=$2" && pid=$p
  done
  [ -n "$pid" ] && kill -STOP "$pid"
}
# Which rank stalled first is not asserted: in lockstep data-parallel training the stopped
# rank and its peers report the same last step (see watchdog.bats for a rank that hangs
# a step early).
check_hang_recovered() {
  grep -q "rank [0-9] hung (no step for 4s, --dl-watchdog); report: .*: stopping all ranks" out.txt
  report=$(sed -n 's/.*dlrun: error: hang report: //p' out.txt | head -n 1)
  [ -f "$report" ]
  grep -q "^=== rank [0-9] on .*: collected with gdb ===" "$report"
  grep -q 'restart 1 inside the allocation' out.txt
  [ "$(job_field "$job" Restarts)" = 0 ]
}

# recovery 13: a rank of the MPI trainer stopped (SIGSTOP) under --dl-watchdog: reported with
# stacks, restarted inside the allocation, equal to the reference
@test "recovery 13: MPI rank hung: stacks, restart in place" {
  ref=$(reference 500)
  job=$(submit -J "$(unique_name hang-mpi)" -N2 --ntasks-per-node=2 --dl-gpus=4 \
    --dl-ckpt-every=2s --dl-watchdog=4s -o out.txt \
    --wrap "$DLRUN $DP --steps 500 --step-ms 40 --out $PWD/out.bin")
  wait_until 90 '[ "$(written)" -ge 2 ]'
  stop_rank "$job" 3 dp_trainer
  wait_state "$job" COMPLETED 180
  check_hang_recovered
  check_against_reference "$ref" 1
}

# recovery 14: a rank of the PyTorch DDP example stopped (SIGSTOP) under --dl-watchdog: reported
# with its Python stacks, restarted inside the allocation, equal to the reference
@test "recovery 14: DDP rank hung: Python stacks, restart" {
  ref=$(torch_reference 150)
  job=$(submit -J "$(unique_name hang-torch)" -N2 --ntasks-per-node=1 --dl-gpus=2 \
    --dl-ckpt-every=3s --dl-watchdog=4s -o out.txt \
    --wrap "$DLRUN /usr/bin/python3 $EXAMPLES/train_ddp.py --steps 150 --step-ms 50 --out $PWD/out.bin")
  wait_until 120 '[ "$(written)" -ge 2 ]'
  stop_rank "$job" 1 python3
  wait_state "$job" COMPLETED 180
  check_hang_recovered
  grep -q 'train_ddp.py", line [0-9]*, in ' "$report"
  check_against_reference "$ref" 1
  [ "$(final_loss 149 "${ref%.bin}.txt")" = "$(final_loss 149 out.txt)" ]
}

# recovery 15: the batch host killed under srun dlrun (examples/dp_trainer.sbatch's options,
# down_failed_batch_host=yes): marked DOWN, requeued by Slurm at once, resumed; equal to the
# reference
@test "recovery 15: batch host killed under srun dlrun" {
  plugstack_with down_failed_batch_host=yes
  ref=$(reference 500)
  job=$(submit -N2 --dl-gpus=4 --dl-preemptible --dl-grace=60s --dl-max-restarts=3 \
    -J "$(unique_name batch-host-srun)" --dl-ckpt-every=2s -o out.txt --open-mode=append \
    --wrap "srun --mpi=pmix $DLRUN $DP --steps 500 --step-ms 40 --out $PWD/out.bin")
  wait_until 90 '[ "$(written)" -ge 2 ]'
  victim=$(job_field "$job" BatchHost)
  "$DL_ROOT/scripts/minicluster" kill-node "$victim"
  # Rank 1 (on the other node) stands in for rank 0 but leaves a lost batch host's job to
  # Slurm; the plugin there marks the node DOWN.
  wait_until 60 "down_reason $victim | grep -q '^slurm-dl: job $job: batch host lost'"
  wait_state "$job" COMPLETED 180
  [ "$(job_field "$job" Restarts)" = 1 ]
  ! scontrol show hostnames "$(job_field "$job" NodeList)" | grep -qx "$victim" || false
  check_against_reference "$ref" 1 output-lost
}
