# Shared by e2e.bats and recovery.bats: dp_trainer's uninterrupted reference run, the
# check of an interrupted run in out.txt against it, and the nodes put back after a test.

# A node of job $1 that is not its batch host.
other_node() { scontrol show hostnames "$(job_field "$1" NodeList)" | grep -vx "$(job_field "$1" BatchHost)" | head -n 1; }

# setup_file's part: the programs and the reference directory of the file.
reference_setup_file() {
  export DLRUN=$DL_BUILD_DIR/launcher/dlrun
  export DP=$DL_BUILD_DIR/examples/dp_trainer
  export EXAMPLES=$DL_ROOT/examples
  export REF_DIR=$BATS_FILE_TMPDIR/reference
  mkdir -p "$REF_DIR"
}

# Leaves every node up for the next test: a killed node's slurmd started again, drained
# or down nodes resumed, all of them idle and responding.
restore_nodes() {
  local n pid run
  run=$(dirname "$SLURM_CONF")/run
  for n in $(sinfo -h -N -o '%N' | sort -u); do
    pid=$(cat "$run/slurmd-$n.pid" 2>/dev/null) || pid=""
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      "$DL_ROOT/scripts/minicluster" start-node "$n" >/dev/null
    fi
  done
  for n in $(sinfo -h -N -o '%N %T' | awk '$2 ~ /drain|down/ {print $1}' | sort -u); do
    scontrol update NodeName="$n" State=RESUME 2>/dev/null || true
  done
  wait_until 90 '[ -z "$(sinfo -h -N -o "%T" | grep -vx idle)" ]'
}

# The final parameters of an uninterrupted run of `dp_trainer --steps $1` (one srun step,
# four ranks, never stopped), computed once per file. dp_trainer's result does not depend
# on the number of ranks, so one reference serves every shape.
reference() {
  local out=$REF_DIR/steps-$1.bin
  if [ ! -f "$out" ]; then
    run_srun -N2 --ntasks-per-node=2 --mpi=pmix "$DLRUN" "$DP" --steps "$1" --step-ms 0 \
      --out "$out" >"$REF_DIR/steps-$1.txt" 2>&1
  fi
  [ -s "$out" ] || {
    cat "$REF_DIR/steps-$1.txt" >&2
    return 1
  }
  echo "$out"
}

# The step rank 0 reported last.
last_step() { grep -o '\] step [0-9]* loss' out.txt | tail -n 1 | awk '{print $3}'; }

# The run in out.txt against the reference $1: bit-for-bit parameters, $2 resumes (at
# least), each from the newest checkpoint written before it, at the step right after it.
# With "older-ok" as $3 a resume may come from an older checkpoint (the newest was
# corrupted); it must still be one that was written. With "output-lost" (the batch host,
# which forwards the job's output, was killed) the lines of its last moments may be lost:
# a resume may come from a checkpoint newer than the newest the output shows, never older.
check_against_reference() {
  local ref=$1 resumes=$2 older=${3:-}
  cmp out.bin "$ref"
  awk -v resumes="$resumes" -v older="$older" '
    / checkpoint step [0-9]+ written in / {
      for (i = 1; i < NF; i++) if ($i == "step") { last = $(i + 1); written[last] = 1 }
    }
    / resumed from .*\(step [0-9]+/ {
      match($0, /\(step [0-9]+/)
      from = substr($0, RSTART + 6, RLENGTH - 6)
      lost = older == "output-lost" && from + 0 > last + 0
      if (!(from in written) && !lost) { print "resumed from step " from ", never written"; bad = 1 }
      if ((older == "" && from != last) || (older == "output-lost" && from + 0 < last + 0)) {
        print "resumed from step " from " but the newest checkpoint was " last; bad = 1
      }
      expect = from + 1; n++
    }
    /\] step [0-9]+ loss / {
      for (i = 1; i < NF; i++) if ($i == "step") k = $(i + 1)
      if (expect != "" && k != expect) {
        print "first step after resuming from " expect - 1 " is " k; bad = 1
      }
      expect = ""
    }
    END {
      if (n < resumes) { print n " resumes, expected " resumes; bad = 1 }
      exit bad
    }' out.txt
  grep -q '\] final step ' out.txt
}
