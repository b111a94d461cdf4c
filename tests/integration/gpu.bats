#!/usr/bin/env bats
# What a job's GPUs do: dlrun samples the step's GPUs through NVML and shows them in the
# status line; dl-jobs reads them back. The mini-cluster has no GPU: a fake NVML
# (fake_nvml.c) serves scripted values per node and device, loaded through the same
# dlopen("libnvidia-ml.so.1") as the real one.

load helpers

setup() {
  cd "$BATS_TEST_TMPDIR"
  DLRUN=$DL_BUILD_DIR/launcher/dlrun
  FAKE_NVML=$DL_BUILD_DIR/tests/integration/fake-nvml
  TRAINER=$DL_BUILD_DIR/tests/integration/dlrun_trainer
}
teardown() { cancel_all; }

dljobs() { "$DL_BUILD_DIR/launcher/dl-jobs" "$@"; }
gpu_field() {
  /usr/bin/python3 -c '
import json, sys
jobs = {j["id"]: j for j in json.load(sys.stdin)["jobs"]}
gpu = (jobs[sys.argv[1]]["status"] or {}).get("gpu") or {}
v = gpu.get(sys.argv[2])
print("" if v is None else v)' "$@"
}

# dl-jobs shows the utilization and memory of exactly the job's GPUs, and flags idle ones
# bats test_tags=stacks
@test "dl-jobs shows the job's GPUs, flags idle ones" {
  # Every node has GPUs 0 and 1: 0 busy, 1 nearly idle.
  printf '%s\n' '* 0 90 30000 80000 250' '* 1 10 2000 80000 60' >gpus.txt
  env="ALL,LD_LIBRARY_PATH=$FAKE_NVML,DL_FAKE_NVML=$PWD/gpus.txt"
  # Two jobs on the same two nodes, one GPU each: the first gets GPU 0, the second GPU 1.
  busy=$(submit -N2 -w n1,n2 --gres=gpu:1 --export="$env" -o busy.out \
    --wrap "srun --mpi=pmix $DLRUN --status-interval=1s --gpu-interval=1s --gpu-idle=5%:10s sleep 90")
  wait_state "$busy" RUNNING 30
  idle=$(submit -N2 -w n1,n2 --gres=gpu:1 --export="$env" -o idle.out \
    --wrap "srun --mpi=pmix $DLRUN --status-interval=1s --gpu-interval=1s --gpu-idle=5%:10s sleep 90")
  # Once both nodes of each job have reported (each node's first rank samples its own).
  wait_until 30 '[ "$(dljobs --json | gpu_field "$busy" mem_total_gib)" = 156.2 ] && [ "$(dljobs --json | gpu_field "$idle" mem_total_gib)" = 156.2 ]'
  out=$(dljobs --json)
  [ "$(gpu_field "$busy" util <<<"$out")" = 90 ]
  [ "$(gpu_field "$idle" util <<<"$out")" = 10 ]
  # Both nodes' GPUs count: 2 x 30000 MiB used of 2 x 80000 (GiB, as the status line has it).
  [ "$(gpu_field "$busy" mem_used_gib <<<"$out")" = 58.6 ]
  [ "$(gpu_field "$idle" mem_used_gib <<<"$out")" = 3.9 ]
  table=$(dljobs)
  echo "$table"
  echo "$table" | grep -E "^$busy .* 90% \(avg 90%\) 58\.6/156\.2 GiB"
  echo "$table" | grep -E "^$idle .* 10% \(avg 10%\) 3\.9/156\.2 GiB"
  # The figures now follow the GPU; the average keeps the past. Ten seconds with every
  # GPU below 5% (--gpu-idle=5%:10s) flag the job idle; the job at 10% is never flagged.
  printf '%s\n' '* 0 0 30000 80000 250' '* 1 10 2000 80000 60' >gpus.txt
  wait_until 30 '[ "$(dljobs --json | gpu_field "$busy" util)" = 0 ]'
  avg=$(dljobs --json | gpu_field "$busy" util_avg)
  [ "$avg" -gt 0 ] && [ "$avg" -lt 90 ]
  wait_until 40 '[ -n "$(dljobs --json | gpu_field "$busy" idle_s)" ]'
  [ "$(dljobs --json | gpu_field "$busy" idle_s)" -ge 10 ]
  dljobs | grep -E "^$busy .* 0% \(avg [0-9]+%\) 58\.6/156\.2 GiB idle [0-9]+[smh]"
  grep -q "every GPU of the job has been below 5% for [0-9]*[smh]: they sit idle" busy.out
  [ -z "$(dljobs --json | gpu_field "$idle" idle_s)" ]
  ! grep -q "sit idle" idle.out || false
}

# --gpu-idle-action=requeue: a preemptible job whose GPUs sit idle is checkpointed, requeued and
# resumed (dl-stats and dl-exp show both runs); another keeps its GPUs
@test "--gpu-idle-action=requeue requeues an idle job" {
  printf '%s\n' '* 0 0 30000 80000 250' '* 1 0 2000 80000 60' >idle.txt
  printf '%s\n' '* 0 80 30000 80000 250' '* 1 80 2000 80000 60' >busy.txt
  cp idle.txt gpus.txt
  dlrun_args="--gpu-interval=1s --gpu-idle=5%:10s --gpu-idle-action=requeue"
  job=$(submit -N1 --dl-gpus=1 --dl-preemptible --dl-experiment=idle \
    --export="ALL,LD_LIBRARY_PATH=$FAKE_NVML,DL_FAKE_NVML=$PWD/gpus.txt,DL_STATS_DIR=$PWD/stats,DL_EXP_ROOT=$PWD/exp" \
    -o out.txt --open-mode=append --wrap "srun --mpi=pmix $DLRUN $dlrun_args --status-interval=2s $TRAINER --steps 300 --step-ms 100")
  kept=$(submit -N1 --dl-gpus=1 --export="ALL,LD_LIBRARY_PATH=$FAKE_NVML,DL_FAKE_NVML=$PWD/idle.txt" \
    -o kept.txt --wrap "srun --mpi=pmix $DLRUN $dlrun_args $TRAINER --steps 300 --step-ms 100")
  wait_until 60 'grep -q "every GPU below 5% for 10s (--gpu-idle-action=requeue): checkpoint round" out.txt'
  cp busy.txt gpus.txt # the next run's GPUs are busy
  wait_state "$job" COMPLETED 180
  [ "$(job_field "$job" Restarts)" = 1 ]
  grep -Eq "start rank=0 world=1 restart=1 resume=/.*/step-0*[1-9][0-9]* first_step=[1-9]" out.txt
  grep -q "done rank=0 step=300" out.txt
  # dl-stats: the idle run, the requeue, the busy run; the GPU's average between the two.
  run "$DL_BUILD_DIR/launcher/dl-stats" --dir "$PWD/stats" "$job"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == "job $job: 2 runs (1 requeue, 0 restarts inside the allocation), 1 GPU, step 299, completed"* ]]
  [[ $output == *"GPU-hours: "*" allocated, "*" used ("*"%)"* ]]
  "$DL_BUILD_DIR/launcher/dl-stats" --dir "$PWD/stats" --json "$job" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
s = r["seconds"]
assert (r["runs"], r["requeues"], r["gpus"]) == (2, 1, 1), r
assert s["requeue_waits"] > 0 and s["queued"] >= 0 and s["training"] > 20, s
assert abs(sum(v for k, v in s.items() if k != "total") - s["total"]) < 1e-6, s
# The same GPU for both runs (its average between), or one per run when the requeued job
# started on another node.
g = r["per_gpu"]
if len(g) == 1:
    assert 0 < g[0]["util_avg"] < 80, r
else:
    assert sorted(x["util_avg"] for x in g) == [0, 80], r
assert 0 < r["gpu_hours_used"] < r["gpu_hours_allocated"], r
# The fake NVML gives GPU 0 of a node 30000 MiB, GPU 1 2000 MiB.
assert all(x["mem_peak_bytes"] == (30000 if x["gpu"].endswith("/0") else 2000) << 20 for x in g), r'
  # The trial's GPU series, recorded by dlrun beside the program's metrics: 0% while idle,
  # 80% once resumed, each step once.
  DL_EXP_ROOT=$PWD/exp "$DL_BUILD_DIR/exp/dl-exp" metrics idle --json | /usr/bin/python3 -c '
import json, sys
m = [x for x in json.load(sys.stdin)["metrics"] if x["name"] == "gpu_util"]
values = [x["value"] for x in sorted(m, key=lambda x: x["step"])]
assert values and values[0] == 0 and values[-1] == 80 and set(values) <= {0, 80}, values
steps = [x["step"] for x in m]
assert len(steps) == len(set(steps)), steps'
  # Not --dl-preemptible: flagged, told so, never stopped.
  wait_state "$kept" COMPLETED 60
  grep -q "every GPU of the job has been below 5% for [0-9]*[smh]: they sit idle" kept.txt
  grep -q -- "--gpu-idle-action=requeue: the job is not --dl-preemptible, so it keeps its GPUs" kept.txt
  [ "$(job_field "$kept" Restarts)" = 0 ]
}

# dlrun without NVML runs as before, and a bad --gpu-interval is refused at once
@test "dlrun without NVML; a bad --gpu-interval" {
  run run_srun -N1 --gres=gpu:1 --mpi=pmix "$DLRUN" -v --gpu-interval=1s sh -c 'sleep 2; echo done'
  [ "$status" -eq 0 ]
  [[ $output =~ "no GPU figures: libnvidia-ml.so.1: cannot open shared object file" ]]
  [[ ! $output =~ ", gpu " ]]
  run "$DLRUN" --gpu-interval=0s true
  [ "$status" -eq 2 ]
  [ "$output" = "dlrun: --gpu-interval=0s: expected off or a duration from 1s to 1h, e.g. 10s" ]
  run "$DLRUN" --gpu-idle-action=kill true
  [ "$status" -eq 2 ]
  [ "$output" = "dlrun: --gpu-idle-action=kill: expected warn or requeue" ]
}
