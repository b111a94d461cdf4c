#!/usr/bin/env bats
# slurm_dl.torch on the mini-cluster: examples/train_resnet.py (torchvision's ResNet-18 on
# FakeData with random crops and flips, DistributedSampler(shuffle=True), a DataLoader with
# 2 workers, SGD with momentum, a cosine learning rate, dropout, BatchNorm; DDP over gloo on
# 2 ranks) is preempted in the middle of an epoch, requeued and resumed, and ends with the
# parameters of an uninterrupted run bit for bit; resumed on another number of ranks, it
# finishes. A program whose checkpoint fails when it is stopped has failed: the restart is
# counted and dlrun says so.

load helpers

setup_file() {
  export DLRUN=$DL_BUILD_DIR/launcher/dlrun
  export TRAIN=$DL_ROOT/examples/train_resnet.py
  export PYENV="PYTHONPATH=$DL_ROOT/python,DL_CKPT_LIB=$DL_BUILD_DIR/ckpt/.libs/libdlckpt.so.0"
  # 160 images, 4 per rank and step on 2 ranks: 20 steps an epoch, 60 in all.
  export ARGS="--epochs 3 --images 160 --batch 4 --workers 2"
  export REF=$BATS_FILE_TMPDIR/ref.bin
}

setup() { cd "$BATS_TEST_TMPDIR"; }

teardown() {
  cancel_all
  for n in $(sinfo -h -N -o '%N %T' | awk '$2 ~ /drain/ {print $1}' | sort -u); do
    scontrol update NodeName="$n" State=RESUME
  done
  wait_until 60 '[ -z "$(sinfo -h -N -o "%T" | grep -vx idle)" ]'
}

unique_name() { echo "torch-$1-$$-$RANDOM"; }

# The uninterrupted run on 2 ranks, once per file.
reference() {
  if [ ! -f "$REF" ]; then
    # shellcheck disable=SC2086
    run_srun -N2 --ntasks-per-node=1 --mpi=pmix --export="ALL,$PYENV" \
      "$DLRUN" /usr/bin/python3 "$TRAIN" $ARGS --out "$REF" >"$BATS_FILE_TMPDIR/ref.txt" 2>&1 ||
      { cat "$BATS_FILE_TMPDIR/ref.txt"; return 1; }
  fi
  [ -s "$REF" ]
}

# Submits the trainer as a preemptible job; sbatch options first. Every run appends to out.txt.
submit_train() {
  submit -o out.txt --open-mode=append --export="ALL,$PYENV,PATH=$DL_BUILD_DIR/launcher:$PATH" "$@" \
    --wrap "srun --mpi=pmix --ntasks-per-node=1 $DLRUN /usr/bin/python3 $TRAIN $ARGS --step-ms 100 --out $PWD/out.bin"
}

last_step() { grep -o '\] step [0-9]* loss' out.txt | tail -n 1 | awk '{print $3}'; }
resumes() { grep -c ' resumed from ' out.txt || true; }

preempt() {
  local high
  high=$(submit -p high -N4 --exclusive -o high.txt --wrap 'sleep 2')
  wait_state "$high" COMPLETED 120
}

# torch 1: ResNet-18 preempted twice in the middle of an epoch ends with the parameters of an
# uninterrupted run
# bats test_tags=stacks
@test "torch 1: preempted twice mid-epoch, bit for bit" {
  reference
  job=$(submit_train -J "$(unique_name preempt)" -p low -N2 --dl-gpus=2 --dl-preemptible --dl-grace=60s)
  wait_until 180 '[ "$(last_step)" ] && [ "$(last_step)" -ge 25 ]'
  preempt
  wait_until 180 '[ "$(resumes)" -ge 1 ] && [ "$(last_step)" -ge 45 ]'
  preempt
  wait_state "$job" COMPLETED 300
  [ "$(job_field "$job" Restarts)" = 2 ]
  cmp out.bin "$REF"
  # Each resume starts right after the newest checkpoint, at least one in mid-epoch.
  awk '
    / checkpoint step [0-9]+ at epoch / { for (i = 1; i < NF; i++) if ($i == "step") last = $(i + 1) }
    / resumed from .*\(step [0-9]+, written by 2 ranks\) at epoch [0-9]+, batch [0-9]+/ {
      match($0, /\(step [0-9]+/); from = substr($0, RSTART + 6, RLENGTH - 6)
      if (from != last) { print "resumed from step " from ", the newest checkpoint is " last; bad = 1 }
      batch = $NF; if (batch > 0 && batch < 20) mid++
      expect = from + 1; n++
    }
    /\] step [0-9]+ loss / {
      for (i = 1; i < NF; i++) if ($i == "step") k = $(i + 1)
      if (expect != "" && k != expect) { print "first step after resuming from " expect - 1 " is " k; bad = 1 }
      expect = ""
    }
    END {
      if (n != 2) { print n " resumes, expected 2"; bad = 1 }
      if (mid < 1) { print "no resume in the middle of an epoch"; bad = 1 }
      exit bad
    }' out.txt
  grep -q '\] final step 59$' out.txt
}

# torch 2: resumed on one rank from a checkpoint of two, it finishes
@test "torch 2: resumed on 1 rank from 2 ranks' save" {
  # --dl-elastic=2:4 GPUs on nodes of 2: one or two nodes, one rank on each.
  job=$(submit_train -J "$(unique_name elastic)" --dl-elastic=2:4 --dl-preemptible)
  wait_until 180 '[ "$(last_step)" ] && [ "$(last_step)" -ge 25 ]'
  [ "$(job_field "$job" NumNodes)" = 2 ]
  # Every node but one is drained; stopped, the job comes back on that one.
  keep=$(job_field "$job" NodeList | sed 's/n\[\([0-9]\).*/n\1/; s/,.*//')
  for n in $(sinfo -h -N -o '%N' | sort -u); do
    [ "$n" = "$keep" ] || scontrol update NodeName="$n" State=DRAIN Reason=torch-elastic
  done
  scancel --signal=TERM "$job"
  wait_state "$job" COMPLETED 300
  [ "$(job_field "$job" NumNodes)" = 1 ]
  grep -q 'resumed from .*(step [0-9]*, written by 2 ranks) at epoch' out.txt
  # One rank: 40 steps an epoch, 120 in all.
  grep -q '\] final step 119$' out.txt
  [ -s out.bin ]
}

# The pid of rank 0's training process (a python3 child of dlrun with RANK=0).
rank0_pid() {
  local p parent
  for p in $(pgrep -f "$TRAIN .*--out $PWD/out.bin"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = python3 ] || continue
    parent=$(ps -o ppid= -p "$p" | tr -d ' ')
    [ "$(cat "/proc/$parent/comm" 2>/dev/null)" = dlrun ] || continue
    if tr '\0' '\n' <"/proc/$p/environ" | grep -qx RANK=0; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# torch 3: killed with kill -9 while it saves, it resumes from the previous checkpoint and ends
# equal
@test "torch 3: killed while saving, resumes equal" {
  reference
  name=$(unique_name kill)
  job=$(submit_train -J "$name" -p low -N2 --dl-gpus=2 --dl-ckpt-every=2s --dl-max-restarts=3)
  # The job's own checkpoint directory: <root>/<user>/<job id>.
  dir=$(dirname "$SLURM_CONF")/ckpt/$(id -un)/$job
  wait_until 180 '[ "$(grep -c "checkpoint step .* at epoch" out.txt)" -ge 2 ]'
  pid=$(rank0_pid)
  # Rank 0 writes the shard of the next periodic checkpoint (and would then commit it).
  wait_until 60 'partial=$(find "$dir" -name "shard-00000-*.partial.*" | head -n 1); [ -n "$partial" ]'
  kill -KILL "$pid"
  killed=$(echo "$partial" | grep -o 'step-[0-9]*' | head -n 1 | sed 's/step-0*//')
  wait_state "$job" COMPLETED 300
  grep -q 'killed by signal 9' out.txt
  [ "$(job_field "$job" Restarts)" = 1 ]
  from=$(sed -n 's/.* resumed from .*(step \([0-9]*\),.*/\1/p' out.txt)
  [ -n "$from" ] && [ "$from" -lt "$killed" ]
  cmp out.bin "$REF"
}

# torch 4: a checkpoint that fails when the job is stopped is a failure, counted and said so
@test "torch 4: a failed checkpoint is a failure" {
  prog=$DL_ROOT/tests/integration/torch_failed_save.py
  job=$(submit -J "$(unique_name failsave)" -N1 --requeue --dl-max-restarts=3 -o out.txt \
    --open-mode=append --export="ALL,$PYENV" \
    --wrap "srun --mpi=pmix $DLRUN /usr/bin/python3 $prog --steps 300 --step-ms 50")
  # The first run's save raises: rank 0 fails, and nothing is left to resume.
  wait_until 120 'grep -q "\] step 10$" out.txt'
  scancel --signal=TERM "$job"
  wait_until 180 'grep -q "start restart=1 step=" out.txt'
  grep -q 'rank 0 failed before its checkpoint was written (exited with 1): stopping all ranks' out.txt
  grep -q "requeued job $job: restart 1 of 3 after a failure" out.txt
  [ "$(grep -c 'to resume from its checkpoint' out.txt)" = 0 ]
  grep -q 'start restart=1 step=0$' out.txt
  # The second run saves AdamW and a OneCycleLR stepped per batch when stopped, and the
  # third resumes from there.
  wait_until 120 '[ "$(grep -c "\] step 10$" out.txt)" -ge 2 ]'
  scancel --signal=TERM "$job"
  wait_state "$job" COMPLETED 240
  grep -q "requeued job $job: requeued to resume from its checkpoint" out.txt
  grep -Eq 'start restart=2 step=[1-9][0-9]*$' out.txt
  grep -q '\] step 299$' out.txt
  [ "$(job_field "$job" Restarts)" = 2 ]
}
