#!/usr/bin/env bats
# dlrun on the mini-cluster: the rank bootstrap, ports, checkpoint-requeue-resume on a
# signal, a preemption and a deadline, crashes, the restart guard, array tasks, MPI
# programs, the Python client, and misuse.

load helpers

setup() {
  cd "$BATS_TEST_TMPDIR"
  DLRUN=$DL_BUILD_DIR/launcher/dlrun
  TRAINER=$DL_BUILD_DIR/tests/integration/dlrun_trainer
}
teardown() { cancel_all; }

# A job name of its own: its default checkpoint directory (<root>/<user>/<job name>)
# starts empty.
unique_name() { echo "dlrun-$1-$$-$RANDOM"; }

field_values() { grep -o "$1=[^ ]*" "${2:-out.txt}" | cut -d= -f2 | sort -u; }

# 8 ranks on 4 nodes see ranks 0..7 once each and the same MASTER_ADDR, MASTER_PORT and NCCL id
# bats test_tags=stacks
@test "8 ranks on 4 nodes: one rendezvous, ranks 0..7" {
  run run_srun -N4 --ntasks-per-node=2 --mpi=pmix "$DLRUN" sh -c \
    'echo env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $SLURMD_NODENAME $MASTER_ADDR $MASTER_PORT $DL_NCCL_UNIQUE_ID $SLURM_STEP_RESV_PORTS'
  [ "$status" -eq 0 ]
  lines=$(echo "$output" | grep ' env ')
  [ "$(echo "$lines" | wc -l)" -eq 8 ]
  # Each line comes from the rank and node its prefix names.
  echo "$lines" | awk '{ if ($1 " " $2 != "[rank " $4 "@" $9 "]") exit 1 }'
  [ "$(echo "$lines" | awk '{print $4}' | sort -n | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 " ]
  [ "$(echo "$lines" | awk '{print $5, $7}' | sort -u)" = "8 2" ]
  # Two ranks per node with local ranks 0 and 1; GROUP_RANK is the node's index.
  [ "$(echo "$lines" | awk '{print $9, $8, $6}' | sort | tr '\n' ' ')" = \
    "n1 0 0 n1 0 1 n2 1 0 n2 1 1 n3 2 0 n3 2 1 n4 3 0 n4 3 1 " ]
  [ "$(echo "$lines" | awk '{print $10, $11, $12}' | sort -u | wc -l)" -eq 1 ]
  set -- $(echo "$lines" | head -n 1)
  [[ ${12} =~ ^[0-9a-f]{256}$ ]] # ncclUniqueId: 128 bytes
  # MASTER_PORT is one of the ports Slurm reserved for this step.
  [ "${11}" -ge "${13%-*}" ] && [ "${11}" -le "${13#*-}" ]
}

# two jobs on the same nodes at the same time get different MASTER_PORTs
@test "two jobs on one node get different MASTER_PORTs" {
  for j in a b; do
    submit -N4 --ntasks-per-node=1 -o $j.out --wrap "srun --mpi=pmix $DLRUN --no-prefix sh -c '
      echo port=\$MASTER_PORT; [ \$RANK = 0 ] && touch $PWD/$j.ready
      while [ ! -e $PWD/go ]; do sleep 0.2; done'" >$j.job
  done
  # Both run on all four nodes at once before either may finish.
  wait_until 60 '[ -e a.ready ] && [ -e b.ready ]'
  touch go
  wait_state "$(cat a.job)" COMPLETED 60
  wait_state "$(cat b.job)" COMPLETED 60
  [ "$(field_values port a.out | wc -l)" -eq 1 ]
  [ "$(field_values port b.out | wc -l)" -eq 1 ]
  [ "$(field_values port a.out)" != "$(field_values port b.out)" ]
}

# DL_STATUS_COMMENT=off keeps the status line out of the job comment, in the output only
@test "DL_STATUS_COMMENT=off: status line in output only" {
  job=$(submit -N1 --dl-grace=30s -o out.txt --export=ALL,DL_STATUS_COMMENT=off \
    --wrap "srun --mpi=pmix $DLRUN --status-interval=1s $TRAINER --steps 40 --step-ms 50")
  wait_state "$job" COMPLETED 120
  # Every user can read a job's comment (unless PrivateData=jobs): only job_submit/dl's
  # part is there.
  comment=$(job_comment "$job")
  [[ $comment == "dl: no GPUs"* && $comment != *"|"* ]]
  grep -q "COMPLETED step 39" out.txt
  run "$DLRUN" --status-comment=maybe true
  [ "$status" -eq 2 ]
  [[ $output == *"--status-comment=maybe: expected on or off"* ]]
}

# SIGTERM reaches the program as one checkpoint request; the job requeues and resumes from
# DL_RESUME_FROM
@test "SIGTERM: one checkpoint request, requeue, resume" {
  name=$(unique_name sigterm)
  job=$(submit -J "$name" -N2 --ntasks-per-node=1 --requeue --dl-grace=30s -o out.txt \
    --open-mode=append --wrap "srun --mpi=pmix $DLRUN --status-interval=1s $TRAINER --steps 150 --step-ms 50")
  wait_until 60 'grep -q "RUNNING step" out.txt'
  # The status line in the job comment, after job_submit/dl's part, which stays. dlrun
  # prints the line first, then sends it to slurmctld.
  running='^dl: no GPUs [|] RUNNING step [0-9]+'
  wait_until 10 '[[ $(job_comment "$job") =~ $running ]]'
  scancel --signal=TERM "$job"
  wait_state "$job" COMPLETED 120
  # Both ranks got one request and checkpointed at the same step.
  [ "$(grep -c '^\[rank [01]@n[0-9]\] request ' out.txt)" -eq 2 ]
  [ "$(grep -c '^\[rank [01]@n[0-9]\] checkpoint ' out.txt)" -eq 2 ]
  step=$(grep ' checkpoint rank=' out.txt | grep -o 'step=[0-9]*' | sort -u)
  [ "$(echo "$step" | wc -l)" -eq 1 ]
  step=${step#step=}
  [ "$(job_field "$job" Restarts)" -eq 1 ]
  dir=$(dirname "$SLURM_CONF")/ckpt/$(id -un)/$job
  resume=$(printf '%s/step-%09d' "$dir" "$step")
  [ "$(grep -c "start rank=[01] world=2 restart=1 resume=$resume first_step=$((step + 1))" out.txt)" -eq 2 ]
  [ "$(grep -c 'done rank=[01] step=150' out.txt)" -eq 2 ]
  [[ $(job_comment "$job") =~ ^dl:\ no\ GPUs\ \|\ COMPLETED\ step\ 149 ]]
}

# a checkpoint directory emptied before the requeue: dlrun names the directory and the lost step
@test "checkpoints gone before requeue: named, not hidden" {
  # As on a node whose checkpoint root is not the one the first run wrote to: the next
  # run finds neither the checkpoints nor the restart history beside them. The job
  # comment, which slurmctld keeps, still says which step the job had.
  name=$(unique_name lost)
  job=$(submit -J "$name" -N1 --requeue --dl-grace=30s -o out.txt --open-mode=append --wrap "
    if [ \"\${SLURM_RESTART_COUNT:-0}\" = 1 ]; then rm -rf \"\$DL_CKPT_DIR\"/step-* \"\$DL_CKPT_DIR\"/.dlrun-*; fi
    srun --mpi=pmix $DLRUN --status-interval=1s $TRAINER --steps 80 --step-ms 50")
  wait_until 60 'grep -q "RUNNING step" out.txt'
  scancel --signal=TERM "$job"
  wait_state "$job" COMPLETED 120
  step=$(grep ' checkpoint rank=0 ' out.txt | grep -o 'step=[0-9]*' | cut -d= -f2)
  [ -n "$step" ]
  dir=$(dirname "$SLURM_CONF")/ckpt/$(id -un)/$job
  grep -qF "[rank 0@n1] dlrun: error: job $job had checkpoint step $step in $dir (its restart history or job comment says so), but $dir has none: starting from step 0, as a new run" out.txt
  grep -q "start rank=0 world=1 restart=1 resume=none " out.txt
  grep -q 'done rank=0 step=80' out.txt
}

# a preempting job: the victim checkpoints in its grace time, requeues itself and resumes
@test "preempted: checkpoint in grace time, requeue, resume" {
  scontrol update PartitionName=low GraceTime=30
  name=$(unique_name preempt)
  low=$(submit -p low -J "$name" -N4 --gpus-per-node=2 --dl-preemptible --dl-grace=20s -o out.txt \
    --open-mode=append --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps 200 --step-ms 50")
  wait_until 60 'grep -q "start rank=0" out.txt'
  high=$(submit -p high -N1 --gpus-per-node=2 -o high.txt --wrap 'echo high ran')
  wait_state "$high" COMPLETED 90
  wait_state "$low" COMPLETED 120
  scontrol update PartitionName=low GraceTime=60
  [ "$(grep ' checkpoint rank=' out.txt | grep -o 'step=[0-9]*' | sort -u | wc -l)" -eq 1 ]
  [ "$(grep -c ' checkpoint rank=' out.txt)" -eq 4 ]
  [ "$(grep -c 'restart=1 resume=.*/step-' out.txt)" -eq 4 ]
  [ "$(grep -c 'done rank=[0-3] step=200' out.txt)" -eq 4 ]
}

# scancel: every rank checkpoints, and the cancelled job is not requeued
@test "scancel: every rank checkpoints, no requeue" {
  job=$(submit -J "$(unique_name cancel)" -N2 --ntasks-per-node=1 --requeue --dl-grace=20s \
    -o out.txt --wrap "srun --mpi=pmix $DLRUN $TRAINER --step-ms 50")
  wait_until 60 '[ "$(grep -c "start rank=" out.txt)" -eq 2 ]'
  scancel "$job"
  wait_state "$job" CANCELLED 30
  wait_until 30 'grep -q "not requeued: the job was cancelled" out.txt'
  [ "$(grep -c ' checkpoint rank=' out.txt)" -eq 2 ]
  [ "$(job_field "$job" Restarts)" = 0 ]
  sleep 12 # longer than the mini-cluster's requeue delay
  [ "$(job_state "$job")" = CANCELLED ]
  ! grep -q warning out.txt || false
}

# the deadline: dlrun checkpoints before the time limit without any signal, and the job resumes
@test "deadline: checkpoint before the time limit" {
  name=$(unique_name deadline)
  # end - 10 s (--dl-grace, no save measured yet) - 5 s margin: about 45 s after start.
  job=$(submit -J "$name" -N2 --ntasks-per-node=1 --requeue --time=1 --dl-grace=10s -o out.txt \
    --open-mode=append --wrap "srun --mpi=pmix $DLRUN --deadline-margin=5s $TRAINER --steps 1000 --step-ms 50")
  wait_state "$job" COMPLETED 150
  grep -q 'dlrun: deadline (the job ends in' out.txt
  [ "$(grep ' checkpoint rank=' out.txt | grep -o 'step=[0-9]*' | sort -u | wc -l)" -eq 1 ]
  [ "$(grep -c 'restart=1 resume=.*/step-' out.txt)" -eq 2 ]
  [ "$(grep -c 'done rank=[01] step=1000' out.txt)" -eq 2 ]
  ! grep -q 'TIMEOUT\|DUE TO TIME LIMIT' out.txt || false
}

# DL_RESUME_FROM is the newest checkpoint that verifies: a corrupted newer one is skipped with a
# warning
@test "DL_RESUME_FROM skips a corrupt newest checkpoint" {
  name=$(unique_name verify)
  job=$(submit -J "$name" -N2 --ntasks-per-node=1 --dl-ckpt-keep=3 -o first.txt \
    --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps 200 --step-ms 50")
  wait_until 60 'grep -q "start rank=0" first.txt'
  # Two checkpoints, on request (SIGUSR1: checkpoint and carry on).
  scancel --signal=USR1 "$job"
  wait_until 30 '[ "$(grep -c " checkpoint rank=" first.txt)" -eq 2 ]'
  scancel --signal=USR1 "$job"
  wait_until 30 '[ "$(grep -c " checkpoint rank=" first.txt)" -eq 4 ]'
  wait_state "$job" COMPLETED 90
  set -- $(grep ' checkpoint rank=0 ' first.txt | grep -o 'step=[0-9]*' | cut -d= -f2)
  old=$1 new=$2
  dir=$(dirname "$SLURM_CONF")/ckpt/$(id -un)/$job
  # Flip one byte of rank 1's row in the newer checkpoint: only its checksum tells.
  /usr/bin/python3 -c '
import struct, sys
path, step = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
at = data.find(struct.pack("<4f", *[float(step)] * 4))
assert at >= 0, "row not found"
data[at + 1] ^= 0xFF
open(path, "wb").write(data)
' "$(printf '%s/step-%09d/shard-00001-of-00002.h5' "$dir" "$new")" "$new"
  # Another job of the same name starts fresh in a directory of its own ...
  fresh=$(submit -J "$name" -N2 --ntasks-per-node=1 -o fresh.txt \
    --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps 3 --step-ms 0")
  wait_state "$fresh" COMPLETED 60
  [ "$(grep -c "start rank=[01] world=2 restart=0 resume=none " fresh.txt)" -eq 2 ]
  # ... unless it asks to continue the first one's run.
  job2=$(submit -J "$name" -N2 --ntasks-per-node=1 --dl-ckpt-keep=3 -o second.txt \
    --dl-resume-from="$job" \
    --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps $((new + 5)) --step-ms 50")
  wait_state "$job2" COMPLETED 60
  grep -q "rank 0@n[0-9]\] dlrun: warning: checkpoint .*/step-0*$new is unusable" second.txt
  grep -q "rank 0@n[0-9]\] dlrun: resuming step $old from .*, written by job $job (user $(id -un)" second.txt
  resume=$(printf '%s/step-%09d' "$dir" "$old")
  [ "$(grep -c "resume=$resume first_step=$((old + 1))" second.txt)" -eq 2 ]
}

# a FIFO as the newest checkpoint's manifest: the next run resumes from the older one at once
@test "a FIFO manifest: resume from the older checkpoint" {
  name=$(unique_name fifo)
  dir=$(dirname "$SLURM_CONF")/ckpt/$(id -un)/$name
  job=$(submit -J "$name" -N1 --dl-ckpt-dir="$dir" --dl-ckpt-keep=3 -o first.txt \
    --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps 200 --step-ms 50")
  wait_until 60 'grep -q "start rank=0" first.txt'
  scancel --signal=USR1 "$job"
  wait_until 30 '[ "$(grep -c " checkpoint rank=" first.txt)" -eq 1 ]'
  scancel --signal=USR1 "$job"
  wait_until 30 '[ "$(grep -c " checkpoint rank=" first.txt)" -eq 2 ]'
  wait_state "$job" COMPLETED 90
  set -- $(grep ' checkpoint rank=0 ' first.txt | grep -o 'step=[0-9]*' | cut -d= -f2)
  old=$1 new=$2
  manifest=$(printf '%s/step-%09d/manifest.json' "$dir" "$new")
  rm "$manifest"
  mkfifo "$manifest"
  # Opening a FIFO for reading waits for a writer: it used to hang the starting job.
  job2=$(submit -J "$name" -N1 --dl-ckpt-dir="$dir" --dl-ckpt-keep=3 -o second.txt \
    --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps $((new + 5)) --step-ms 50")
  wait_state "$job2" COMPLETED 60
  grep -q "dlrun: warning: checkpoint .*/step-0*$new is unusable.*not a regular file" second.txt
  resume=$(printf '%s/step-%09d' "$dir" "$old")
  grep -q "resume=$resume first_step=$((old + 1))" second.txt
}

# kill -9 of one rank ends all ranks within 10 s and the job requeues
@test "a rank killed: all ranks end, the job requeues" {
  job=$(submit -J "$(unique_name kill)" -N2 --ntasks-per-node=2 --requeue -o out.txt \
    --open-mode=append --wrap "srun --mpi=pmix $DLRUN $TRAINER --step-ms 100 --pid-dir $PWD")
  wait_until 60 '[ "$(ls pid.* 2>/dev/null | wc -l)" -eq 4 ]'
  pids=$(cat pid.*)
  kill -9 "$(cat pid.3)"
  alive() { for p in $pids; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
  wait_until 10 '! alive'
  wait_until 90 '[ "$(job_field "$job" Restarts)" = 1 ] && grep -q "restart=1" out.txt'
  grep -q 'rank 3 killed by signal 9 (Killed): stopping all ranks' out.txt
  [[ $(job_comment "$job") =~ RUNNING|REQUEUED ]]
}

# kill -9 of rank 0's dlrun itself: the other ranks stop and rank 1 requeues the job
@test "rank 0's dlrun killed: rank 1 requeues the job" {
  job=$(submit -J "$(unique_name kill0)" -N2 --ntasks-per-node=2 --requeue -o out.txt \
    --open-mode=append --wrap "srun --mpi=pmix $DLRUN $TRAINER --step-ms 100 --pid-dir $PWD")
  wait_until 60 '[ "$(ls pid.* 2>/dev/null | wc -l)" -eq 4 ]'
  pids=$(cat pid.*)
  dlrun0=$(ps -o ppid= -p "$(cat pid.0)" | tr -d ' ')
  [ "$(ps -o comm= -p "$dlrun0")" = dlrun ]
  kill -9 "$dlrun0"
  alive() { for p in $pids; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
  wait_until 10 '! alive'
  wait_until 90 '[ "$(job_field "$job" Restarts)" = 1 ] && grep -q "restart=1" out.txt'
  grep -q '\[rank 1@n[0-9]\] dlrun: requeued job' out.txt
}

# a job that never progresses ends held, with the reason in scontrol show job
@test "no progress: held, with the reason" {
  job=$(submit -J "$(unique_name stuck)" -N1 --requeue --dl-max-restarts=5 -o out.txt \
    --open-mode=append --wrap "srun --mpi=pmix $DLRUN --max-stalled-restarts=1 sh -c 'exit 1'")
  wait_until 90 '[ "$(job_field "$job" Restarts)" = 2 ] && [ "$(job_state "$job")" = PENDING ]'
  show=$(scontrol show job "$job")
  [[ $show =~ Reason=job_requeued_in_held_state ]]
  [[ $show =~ Comment=dl:\ no\ GPUs\ \|\ HELD(,\ restarts\ [0-9]+)?:\ rank\ 0\ exited\ with\ 1\;\ no\ newer\ checkpoint\ in\ 2\ runs\ in\ a\ row ]]
  # Held: it stays pending.
  sleep 15
  [ "$(job_state "$job")" = PENDING ]
  [ "$(job_field "$job" Restarts)" = 2 ]
}

# a failing array task is requeued alone, even the one whose id is the array's
@test "a failing array task is requeued alone" {
  # The array's last task carries the array's own job id: requeueing that id by name
  # ("scontrol requeue <id>") would requeue the whole array.
  array=$(submit --array=0-2 -N1 --requeue -o 'out.%a' --open-mode=append --wrap "srun --mpi=pmix $DLRUN sh -c '
    echo task=\$SLURM_ARRAY_TASK_ID job=\$SLURM_JOB_ID array=\$SLURM_ARRAY_JOB_ID restart=\$DL_RESTART_COUNT
    if [ \$SLURM_JOB_ID = \$SLURM_ARRAY_JOB_ID ] && [ \$DL_RESTART_COUNT = 0 ]; then sleep 1; exit 1; fi
    sleep 3'")
  wait_until 120 '[ -z "$(squeue -h -j "$array" -o %i)" ]'
  failing=$(grep -l "job=$array array=$array restart=0" out.* | sed 's/out\.//')
  [ -n "$failing" ]
  for t in 0 1 2; do
    [ "$(job_state "${array}_$t")" = COMPLETED ]
    if [ "$t" = "$failing" ]; then
      [ "$(job_field "${array}_$t" Restarts)" = 1 ]
      grep -q restart=1 "out.$t"
    else
      [ "$(job_field "${array}_$t" Restarts)" = 0 ]
    fi
  done
}

# two array tasks of one script, both requeued: each resumes its own checkpoint and dlrun names the
# writer
@test "two array tasks each resume their own checkpoint" {
  array=$(submit --array=0-1 -N1 --requeue --dl-grace=30s -o 'out.%a' --open-mode=append \
    --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps 100 --step-ms 50")
  wait_until 60 'grep -q "start rank=0" out.0 && grep -q "start rank=0" out.1'
  scancel --signal=TERM "${array}_0" "${array}_1"
  for t in 0 1; do wait_state "${array}_$t" COMPLETED 120; done
  root=$(dirname "$SLURM_CONF")/ckpt/$(id -un)
  for t in 0 1; do
    [ "$(job_field "${array}_$t" Restarts)" = 1 ]
    step=$(grep ' checkpoint rank=0 ' "out.$t" | grep -o 'step=[0-9]*' | cut -d= -f2)
    [ "$(echo "$step" | wc -l)" -eq 1 ]
    resume=$(printf '%s/%s_%s/step-%09d' "$root" "$array" "$t" "$step")
    grep -qF "dlrun: resuming step $step from $resume, written by array task ${array}_$t (user $(id -un)" "out.$t"
    grep -q "start rank=0 world=1 restart=1 resume=$resume first_step=$((step + 1))" "out.$t"
    ! grep -q "resume=$root/${array}_$((1 - t))/" "out.$t" || false
    grep -q 'done rank=0 step=100' "out.$t"
  done
}

# the Python client: all ranks checkpoint at the same step on SIGUSR1 and carry on
@test "Python client: SIGUSR1 checkpoints at one step" {
  job=$(submit -N2 --ntasks-per-node=2 -o out.txt --wrap "srun --mpi=pmix $DLRUN \
    /usr/bin/python3 $DL_ROOT/tests/integration/dlrun_trainer.py --steps 120 --step-ms 50")
  wait_until 60 '[ "$(grep -c "start rank=" out.txt)" -eq 4 ]'
  sleep 1
  scancel --signal=USR1 "$job"
  wait_state "$job" COMPLETED 60
  [ "$(grep -c ' checkpoint rank=' out.txt)" -eq 4 ]
  [ "$(grep ' checkpoint rank=' out.txt | grep -o 'step=[0-9]*' | sort -u | wc -l)" -eq 1 ]
  [ "$(grep -c 'done rank=[0-3] step=119' out.txt)" -eq 4 ]
  [ "$(job_field "$job" Restarts)" = 0 ]
}

# an Open MPI program (MPI_Init, MPI_Allreduce) runs correctly under dlrun on 4 nodes
# bats test_tags=stacks
@test "an Open MPI program under dlrun on 4 nodes" {
  run run_srun -N4 --ntasks-per-node=2 --mpi=pmix "$DLRUN" "$DL_BUILD_DIR/tests/integration/mpi_allreduce"
  echo "$output" # on a failure: what each rank and dlrun said
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | grep -c 'mpi rank=[0-7] size=8 sum=28$')" -eq 8 ]
  [ "$(echo "$output" | grep -o 'mpi rank=[0-7]' | sort -u | wc -l)" -eq 8 ]
}

# srun dlrun without --mpi: steps of DL jobs get PMIx (cli_filter/dl), other steps keep MpiDefault
# bats test_tags=stacks
@test "srun dlrun without --mpi gets PMIx in DL jobs" {
  # An srun with a --dl-* option, and an srun inside a DL job's allocation.
  run run_srun -N2 --dl-gpus=2 "$DLRUN" --no-prefix sh -c 'echo "rank=$RANK of $WORLD_SIZE"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | grep -c '^rank=[01] of 2$')" -eq 2 ]
  job=$(submit -N2 --dl-gpus=2 -o out.txt --wrap "srun $DLRUN --no-prefix sh -c 'echo rank=\$RANK'")
  wait_state "$job" COMPLETED 60
  [ "$(grep -c '^rank=[01]$' out.txt)" -eq 2 ]
  # Ordinary steps, and a DL step whose user chose another MPI type, are left alone.
  run run_srun -N1 sh -c 'echo "pmix=${PMIX_RANK:-none}"'
  [ "$output" = "pmix=none" ]
  run run_srun -N1 --dl-gpus=1 --mpi=none "$DLRUN" true
  [ "$status" -ne 0 ]
  [[ $output =~ "dlrun: this task has no PMIx server (srun ran without --mpi=pmix)" ]]
}

# outside any job, or in a step without PMIx, dlrun fails at once with the command line that works
@test "dlrun without a job or PMIx: fails, says what works" {
  run "$DLRUN" -v ./train.py --lr 0.1
  [ "$status" -eq 2 ]
  [[ $output =~ "dlrun: not in a Slurm job" ]]
  [[ $output =~ "srun --mpi=pmix dlrun -v ./train.py --lr 0.1" ]]
  run run_srun -N1 "$DLRUN" true
  [ "$status" -ne 0 ]
  [[ $output =~ "dlrun: this task has no PMIx server (srun ran without --mpi=pmix)" ]]
  [[ $output =~ "srun --mpi=pmix dlrun true" ]]
  run "$DLRUN" --ckpt-signal=USR1 true
  [ "$status" -eq 2 ]
  [ "$output" = "dlrun: --ckpt-signal=USR1: NCCL uses SIGUSR1; choose another, e.g. URG" ]
  run "$DLRUN" --ckpt-signal=INT true
  [ "$status" -eq 2 ]
  [[ $output =~ "Slurm sends it to every process of the step" ]]
}

# ask for N GPUs, get N ranks: dlrun in the batch script, in salloc, srun dlrun in salloc, srun
# dlrun creating the job
# bats test_tags=stacks
@test "N GPUs give N ranks in every launch form" {
  ranks='echo "ranks $WORLD_SIZE"'
  job=$(submit -N2 --dl-gpus=4 -o batch.txt --wrap "$DLRUN --no-prefix sh -c '$ranks'")
  run timeout 60 salloc -N1 --dl-gpus=2 "$DLRUN" --no-prefix sh -c "$ranks" </dev/null
  [ "$(echo "$output" | grep -c '^ranks 2$')" -eq 2 ] || { echo "$output"; false; }
  run timeout 60 salloc -N2 --dl-gpus=4 srun "$DLRUN" --no-prefix sh -c "$ranks" </dev/null
  [ "$(echo "$output" | grep -c '^ranks 4$')" -eq 4 ] || { echo "$output"; false; }
  run run_srun -N2 --dl-gpus=4 "$DLRUN" --no-prefix sh -c "$ranks"
  [ "$(echo "$output" | grep -c '^ranks 4$')" -eq 4 ] || { echo "$output"; false; }
  # The user's own layout wins, and dlrun's first line says what it means.
  run run_srun -N2 -n2 --dl-gpus=4 "$DLRUN" --no-prefix sh -c "$ranks"
  [ "$(echo "$output" | grep -c '^ranks 2$')" -eq 2 ] || { echo "$output"; false; }
  [[ $output =~ "dlrun: 2 ranks for 4 GPUs (--dl-gpus=4): for one rank per GPU give srun -n4, or run dlrun directly in the batch script" ]]
  wait_state "$job" COMPLETED 60
  [ "$(grep -c '^ranks 4$' batch.txt)" -eq 4 ] || { cat batch.txt; false; }
}

# dlrun started by the user's srun says at start that a failed rank is not restarted inside the
# allocation
@test "srun dlrun says it cannot restart in place" {
  job=$(submit -N1 --dl-gpus=1 -o srun.txt --wrap "srun $DLRUN true")
  own=$(submit -N1 --dl-gpus=1 -o own.txt --wrap "$DLRUN true")
  run run_srun -N1 --dl-gpus=1 "$DLRUN" true
  [ "$status" -eq 0 ]
  [[ $output =~ "[rank 0@n"[0-9]"] dlrun: started by srun outside a batch script: a rank that fails ends the run (only batch jobs can be requeued); dlrun run directly in a batch script or in salloc, without srun, restarts it inside the allocation" ]]
  wait_state "$job" COMPLETED 60
  wait_state "$own" COMPLETED 60
  grep -q '^\[rank 0@n[0-9]*\] dlrun: started by srun: a rank that fails sends the job back through the queue (requeue); dlrun run directly in the batch script, without srun, restarts it inside the allocation$' srun.txt ||
    { cat srun.txt; false; }
  ! grep -q 'started by srun' own.txt || { cat own.txt; false; }
}
