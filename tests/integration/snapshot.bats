#!/usr/bin/env bats
# Programs that keep their own snapshots and know nothing of slurm-dl's client API
# (ddp_snapshot.py, the PyTorch DDP tutorial's pattern), preempted under dlrun: dlrun
# requeues them as soon as they have stopped instead of waiting out the grace time, and
# --ckpt-signal=TERM hands Slurm's stop signal to a program with its own SIGTERM handler.

load helpers

setup_file() {
  export DLRUN=$DL_BUILD_DIR/launcher/dlrun
  export PROG=$DL_ROOT/tests/integration/ddp_snapshot.py
}

setup() { cd "$BATS_TEST_TMPDIR"; }

teardown() {
  show_on_failure out.txt
  cancel_all
  wait_until 60 '[ -z "$(sinfo -h -N -o "%T" | grep -vx idle)" ]'
}

# sbatch options, "--", the program's options; dlrun's options in $DLRUN_OPTS.
submit_snapshot() {
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  submit -o out.txt --open-mode=append -p low -N2 --dl-gpus=2 --dl-preemptible "${opts[@]}" \
    --wrap "srun --mpi=pmix --ntasks-per-node=1 $DLRUN ${DLRUN_OPTS:-} /usr/bin/python3 $PROG 20 5 --snapshot $PWD/snap.pt --batch-ms 250 $*"
}

epochs_done() { grep -c 'rank 0: epoch [0-9]* done' out.txt || true; }

# Preempts the running job with a `high` one that needs every node; prints the seconds
# until the preemptor ran (the victim gone).
preempt() {
  local high start=$SECONDS
  high=$(submit -p high -N4 --exclusive -o high.txt --wrap 'sleep 1')
  wait_state "$high" COMPLETED 150 >&2
  echo $((SECONDS - start))
}

# snapshot: a program without the client API is requeued as soon as it stops, not after the grace
# time, and resumes from its own snapshot
@test "snapshot: requeued at once, resumes its snapshot" {
  job=$(submit_snapshot -J "snap-$$-$RANDOM" --)
  wait_until 120 '[ "$(epochs_done)" -ge 7 ]'
  took=$(preempt)
  echo "preemptor ran ${took}s after its submission (partition grace time 60s, --dl-grace 120s)"
  # dlrun ended the run itself (Slurm's requeue at the end of the grace time logs no such line).
  grep -q "no rank's program uses the client API, so none can checkpoint now; ending the run without waiting for the grace time" out.txt
  # Requeued by dlrun, or, on a Slurm that requeues a job ending in its grace time
  # (24.05 on), left to Slurm.
  grep -Eq "dlrun: (requeued job $job|job $job is preempted: Slurm requeues it)" out.txt
  wait_state "$job" COMPLETED 240
  [ "$(job_field "$job" Restarts)" = 1 ]
  grep -Eq 'rank [01]: resuming from the snapshot at epoch (5|10|15)$' out.txt
  grep -q 'rank 0: trained 20 epochs' out.txt
}

# snapshot: --ckpt-signal=TERM, a program with its own SIGTERM handler saves where it was and
# resumes from there
@test "snapshot: --ckpt-signal=TERM, own handler" {
  job=$(DLRUN_OPTS=--ckpt-signal=TERM submit_snapshot -J "snapterm-$$-$RANDOM" -- --save-on-term)
  wait_until 120 '[ "$(epochs_done)" -ge 7 ]'
  preempt >/dev/null
  wait_state "$job" COMPLETED 240
  [ "$(job_field "$job" Restarts)" = 1 ]
  saved=$(sed -n 's/.*rank 0: snapshot saved at epoch \([0-9]*\) (SIGTERM)$/\1/p' out.txt)
  [ -n "$saved" ]
  grep -q "rank 0: resuming from the snapshot at epoch $saved\$" out.txt
  # Requeued by dlrun, or, on a Slurm that requeues a job ending in its grace time
  # (24.05 on), left to Slurm.
  grep -Eq "dlrun: (requeued job $job|job $job is preempted: Slurm requeues it)" out.txt
  # The program stopped on SIGTERM: not a failure, no SIGKILL.
  ! grep -q 'stopping all ranks' out.txt || false
  grep -q 'rank 0: trained 20 epochs' out.txt
}
