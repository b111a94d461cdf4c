#!/usr/bin/env bats
# End to end: the example trainers (examples/) submitted with their sbatch scripts (dlrun
# in the batch script) survive a preemption, a deadline, a killed rank, a node failure, a
# corrupted checkpoint, a restart of slurmctld and a smaller allocation; a program that
# always crashes ends held. Every
# interrupted run is compared with an uninterrupted reference run of the same program:
# the final parameters are equal bit for bit, and every resume starts right after the
# newest checkpoint written before it (no checkpointed step is computed again).

load helpers
load reference

setup_file() { reference_setup_file; }

setup() { cd "$BATS_TEST_TMPDIR"; }

teardown() {
  show_on_failure out.txt
  cancel_all
  restore_nodes
}

# A job name of its own: its default checkpoint directory (<root>/<user>/<name>) starts
# empty.
unique_name() { echo "e2e-$1-$$-$RANDOM"; }
ckpt_dir() { echo "$(dirname "$SLURM_CONF")/ckpt/$(id -un)/$1"; } # $1: the job id

# Submits examples/dp_trainer.sbatch; sbatch options, then the script and the trainer's.
# Output of every run of the job goes to out.txt (appended), parameters to out.bin.
submit_dp() {
  submit --export="ALL,DP_TRAINER=$DP,PATH=$DL_BUILD_DIR/launcher:$PATH" -o out.txt \
    --open-mode=append "$@"
}

# Submits dp_trainer for $2 steps with a checkpoint every 3 s (job name from $1) and
# prints the job id once two checkpoints are written.
start_with_periodic_checkpoints() {
  local job
  job=$(submit_dp -J "$(unique_name "$1")" --dl-ckpt-every=3s \
    "$EXAMPLES/dp_trainer.sbatch" --steps "$2" --step-ms 50 --out "$PWD/out.bin")
  wait_until 90 '[ "$(grep -c "checkpoint step .* written" out.txt)" -ge 2 ]' >&2 || return 1
  echo "$job"
}

# e2e 1: preempted by a higher-priority job, it checkpoints, requeues, resumes and ends equal to the
# reference
@test "e2e 1: preempted: checkpoint, requeue, resume, equal" {
  ref=$(reference 400)
  job=$(submit_dp -J "$(unique_name preempt)" -p low --dl-grace=30s \
    "$EXAMPLES/dp_trainer.sbatch" --steps 400 --step-ms 50 --out "$PWD/out.bin")
  wait_until 90 '[ "$(last_step)" -ge 40 ]'
  high=$(submit -p high -N4 --exclusive -o high.txt --wrap 'sleep 2')
  wait_state "$high" COMPLETED 120
  wait_state "$job" COMPLETED 180
  [ "$(job_field "$job" Restarts)" = 1 ]
  check_against_reference "$ref" 1
  [[ $(job_comment "$job") =~ ^dl:\ 4\ GPUs.*\|\ COMPLETED\ step\ 399 ]]
}

# e2e 1 (PyTorch): the DDP trainer, preempted and resumed, ends with the reference's parameters bit
# for bit
# bats test_tags=stacks
@test "e2e 1 (PyTorch): DDP preempted, resumed, bit for bit" {
  # The reference: the same two ranks, never interrupted.
  run_srun -N2 --ntasks-per-node=1 --mpi=pmix \
    --export="ALL,PYTHONPATH=$DL_ROOT/python,DL_CKPT_LIB=$DL_BUILD_DIR/ckpt/.libs/libdlckpt.so.0" \
    "$DLRUN" /usr/bin/python3 "$EXAMPLES/train_ddp.py" --steps 200 --out "$PWD/ref.bin" >ref.txt 2>&1 ||
    { cat ref.txt; false; }
  job=$(submit -J "$(unique_name torch)" -p low -o out.txt --open-mode=append \
    --export="ALL,TRAIN_DDP=$EXAMPLES/train_ddp.py,PYTHONPATH=$DL_ROOT/python,DL_CKPT_LIB=$DL_BUILD_DIR/ckpt/.libs/libdlckpt.so.0,PATH=$DL_BUILD_DIR/launcher:$PATH" \
    "$EXAMPLES/train_ddp.sbatch" --steps 200 --step-ms 50 --out "$PWD/out.bin")
  wait_until 120 '[ "$(last_step)" ] && [ "$(last_step)" -ge 30 ]'
  high=$(submit -p high -N4 --exclusive -o high.txt --wrap 'sleep 2')
  wait_state "$high" COMPLETED 120
  wait_state "$job" COMPLETED 240
  [ "$(job_field "$job" Restarts)" = 1 ]
  check_against_reference "$PWD/ref.bin" 1
  [ "$(sed -n 's/^\[rank 0@n[0-9]*\] final step 199 loss //p' ref.txt)" = \
    "$(sed -n 's/^\[rank 0@n[0-9]*\] final step 199 loss //p' out.txt)" ]
}

# e2e 2: at its time limit it checkpoints before the end, requeues, resumes and ends equal to the
# reference
@test "e2e 2: time limit: checkpoint before it, resume, equal" {
  ref=$(reference 900)
  # A 1-minute limit for a run of about 80 s. The checkpoint comes from job_submit/dl's
  # warning signal (SIGUSR2 at grace + margin before the end) or from dlrun's own
  # deadline, whichever is first.
  job=$(submit_dp -J "$(unique_name deadline)" --time=1 --dl-grace=10s \
    --export="ALL,DP_TRAINER=$DP,PATH=$DL_BUILD_DIR/launcher:$PATH,DL_DEADLINE_MARGIN=5s" \
    "$EXAMPLES/dp_trainer.sbatch" --steps 900 --step-ms 50 --out "$PWD/out.bin")
  wait_state "$job" COMPLETED 300
  grep -Eq 'dlrun: (deadline \(the job ends in|SIGUSR2: checkpoint round)' out.txt
  ! grep -q 'DUE TO TIME LIMIT' out.txt || false
  [ "$(job_field "$job" Restarts)" -ge 1 ]
  check_against_reference "$ref" 1
}

# e2e 3: kill -9 of one rank restarts the job inside the allocation from its last periodic
# checkpoint
@test "e2e 3: a rank killed: restart in the allocation" {
  ref=$(reference 600)
  job=$(start_with_periodic_checkpoints kill 600)
  wait_until 60 '[ -n "$(job_pids "$job" dp_trainer)" ]'
  kill -KILL "$(job_pids "$job" dp_trainer | tail -n 1)"
  wait_state "$job" COMPLETED 240
  grep -q 'killed by signal 9 (Killed): stopping all ranks' out.txt
  grep -q '\] dlrun: restart 1 inside the allocation (DL_RESTART_COUNT=1)' out.txt
  [ "$(job_field "$job" Restarts)" = 0 ]
  # The run after the kill redid only the steps after the last checkpoint.
  check_against_reference "$ref" 1
}

# e2e 4: a node fails (its slurmd and processes killed): the job is requeued onto the other nodes
# and resumes
@test "e2e 4: a node fails: requeued without it, resumes" {
  ref=$(reference 600)
  job=$(start_with_periodic_checkpoints node 600)
  victim=$(other_node "$job")
  "$DL_ROOT/scripts/minicluster" kill-node "$victim"
  wait_state "$job" COMPLETED 300
  # The second run used two nodes that did not include the failed one.
  grep -q "lost rank" out.txt
  [ "$(job_field "$job" Restarts)" -ge 1 ]
  ! scontrol show hostnames "$(job_field "$job" NodeList)" | grep -qx "$victim" || false
  # dlrun took the dead node out of the job before requeueing it, and kept the next run
  # off it (Slurm 22.05 would otherwise lose the job's GPUs; see dlrun(1)).
  grep -q "removed node $victim from job $job" out.txt
  [ "$(job_field "$job" ExcNodeList)" = "$victim" ]
  check_against_reference "$ref" 1
}

# e2e 5: the newest checkpoint corrupted while the job waits: resumed from the previous one, with a
# warning
@test "e2e 5: newest checkpoint corrupt: resumes from an older one" {
  ref=$(reference 500)
  name=$(unique_name corrupt)
  job=$(submit_dp -J "$name" --dl-ckpt-keep=3 \
    "$EXAMPLES/dp_trainer.sbatch" --steps 500 --step-ms 50 --out "$PWD/out.bin")
  wait_until 90 '[ "$(last_step)" -ge 30 ]'
  scancel --signal=USR1 "$job" # a checkpoint, and the run carries on
  wait_until 30 'grep -q "checkpoint step .* written" out.txt'
  sleep 1
  scancel --signal=TERM "$job" # checkpoint, requeue
  wait_until 60 '[ "$(job_state "$job")" = PENDING ]'
  scontrol hold "$job"
  set -- $(grep -o 'checkpoint step [0-9]* written' out.txt | awk '{print $3}')
  [ $# -eq 2 ]
  old=$1 new=$2
  shard=$(printf '%s/step-%09d/shard-00001-of-00004.h5' "$(ckpt_dir "$job")" "$new")
  /usr/bin/python3 -c '
import h5py, sys
path = sys.argv[1]
with h5py.File(path, "r") as f:
    at = f["tensors/model/w"].id.get_offset()
with open(path, "r+b") as f:
    f.seek(at + 3)
    b = f.read(1)
    f.seek(at + 3)
    f.write(bytes([b[0] ^ 0xFF]))
' "$shard"
  scontrol release "$job"
  wait_state "$job" COMPLETED 180
  grep -q "dlrun: warning: checkpoint .*/step-0*$new is unusable" out.txt
  grep -q "resumed from .*/step-0*$old (step $old," out.txt
  check_against_reference "$ref" 1 older-ok
}

# e2e 6: a program that always crashes stops after --dl-max-restarts, held with the reason
@test "e2e 6: always crashing: held after --dl-max-restarts" {
  # Three failed runs, then the job is requeued held: restarted inside the allocation, or
  # requeued when the same node had the first failed rank twice (it is then excluded).
  cat >crash.sh <<'EOF'
#!/bin/sh
echo "crashing"
kill -SEGV $$
EOF
  chmod +x crash.sh
  job=$(submit -J "$(unique_name crash)" -o out.txt --open-mode=append --dl-max-restarts=2 \
    --export="ALL,DP_TRAINER=$PWD/crash.sh,PATH=$DL_BUILD_DIR/launcher:$PATH" \
    "$EXAMPLES/dp_trainer.sbatch")
  wait_until 150 '[[ $(job_comment "$job") =~ \|\ HELD: ]] && [ "$(job_field "$job" Reason)" = job_requeued_in_held_state ]'
  [[ $(job_comment "$job") =~ \|\ HELD:\ .*no\ restarts\ left\ \(3\ failures,\ --dl-max-restarts=2\) ]]
  [ "$(grep -c '^\[rank 0@n[0-9]*\] crashing' out.txt)" -eq 3 ]
  [ "$(grep -Ec '^\[rank 0@n[0-9]*\] dlrun: FAILED(, restarts [0-9]+)?: rank [0-9]* killed by signal 11' out.txt)" -eq 3 ]
  restarts=$(job_field "$job" Restarts)
  [ "$restarts" -ge 1 ] && [ "$restarts" -le 2 ]
  # No loop: it stays held.
  sleep 15
  [ "$(job_state "$job")" = PENDING ]
  [ "$(job_field "$job" Restarts)" = "$restarts" ]
}

# e2e 7: slurmctld restarted while the job runs: the job, its status line and a later preemption
# carry on
@test "e2e 7: slurmctld restarted: the job carries on" {
  ref=$(reference 600)
  job=$(submit_dp -J "$(unique_name ctld)" \
    --export="ALL,DP_TRAINER=$DP,PATH=$DL_BUILD_DIR/launcher:$PATH,DL_STATUS_INTERVAL=1s" \
    "$EXAMPLES/dp_trainer.sbatch" --steps 600 --step-ms 50 --out "$PWD/out.bin")
  wait_until 90 '[ "$(last_step)" -ge 30 ]'
  "$DL_ROOT/scripts/minicluster" restart-ctld
  # The status line still moves: rank 0 reaches the new slurmctld.
  before=$(job_comment "$job" | grep -o 'RUNNING step [0-9]*' | awk '{print $3}')
  wait_until 30 '[ "$(job_comment "$job" | grep -o "RUNNING step [0-9]*" | awk "{print \$3}")" -gt "${before:-0}" ]'
  # job_submit/dl is loaded again: a bad request is still refused.
  run sbatch --dl-gpus=4 --gpus=2 --wrap true
  [ "$status" -ne 0 ]
  [[ $output =~ dl: ]]
  # A stop request still ends in a checkpoint, a requeue and a resume.
  scancel --signal=TERM "$job"
  wait_state "$job" COMPLETED 180
  [ "$(job_field "$job" Restarts)" = 1 ]
  check_against_reference "$ref" 1
}

# e2e 8: an elastic job resumes on fewer GPUs than it started with, its state resharded
@test "e2e 8: elastic job resumes on fewer GPUs, resharded" {
  ref=$(reference 500)
  # --dl-elastic=4:8 on nodes of 2 GPUs: 2 to 4 whole nodes. The tasks are set per node in
  # srun, not in sbatch: a fixed task count would cap the node count.
  job=$(submit -J "$(unique_name elastic)" --dl-elastic=4:8 --dl-preemptible -o out.txt \
    --open-mode=append --wrap "srun --mpi=pmix --ntasks-per-node=2 $DLRUN $DP --steps 500 \
    --step-ms 50 --out $PWD/out.bin")
  wait_until 90 '[ "$(last_step)" -ge 30 ]'
  [ "$(job_field "$job" NumNodes)" = 4 ]
  # Half the cluster goes away (drained), then the job is stopped: it comes back on the
  # two nodes left, with 4 ranks instead of 8.
  scontrol update NodeName=n3,n4 State=DRAIN Reason=e2e-elastic
  scancel --signal=TERM "$job"
  wait_state "$job" COMPLETED 180
  [ "$(job_field "$job" NumNodes)" = 2 ]
  grep -q 'resumed from .* written by 8 ranks)' out.txt
  check_against_reference "$ref" 1
}
