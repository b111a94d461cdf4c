#!/usr/bin/env bats
# dl-gpu-metrics, for administrators: the GPUs of every job on a node, DL or not, as
# spank_dl.so's job prolog recorded them (gpu_metrics=DIR), written for node_exporter's
# textfile collector and scraped by a real Prometheus. The GPUs are the fake NVML's
# (fake_nvml.c), loaded through the same dlopen("libnvidia-ml.so.1") as the real one.

load helpers

setup() {
  cd "$BATS_TEST_TMPDIR"
  EXPORTER=$DL_BUILD_DIR/launcher/dl-gpu-metrics
  FAKE_NVML=$DL_BUILD_DIR/tests/integration/fake-nvml
  OWNERS=$(dirname "$SLURM_CONF")/gpu-owners-$$
  mkdir -p text
}
teardown() {
  local f
  for f in "$BATS_TEST_TMPDIR"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  scancel --quiet -u dltest 2>/dev/null || true
  cancel_all
  plugstack_restore
  rm -rf "$OWNERS"
}

exporter() {
  LD_LIBRARY_PATH=$FAKE_NVML DL_FAKE_NVML=$BATS_TEST_TMPDIR/gpus.txt "$EXPORTER" \
    --owners "$OWNERS" --node n1 --output "$BATS_TEST_TMPDIR/text/slurm_dl_gpu.prom" "$@"
}
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# A background process, killed by teardown: $1 names it.
start() {
  local name=$1
  shift
  "$@" >"$name.log" 2>&1 3>&- &
  echo $! >"$name.pid"
}
promql() {
  curl -sfG "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"
}

# a plain job's GPU is labelled with its job and user, until its epilog
@test "a plain job's GPU is labelled until its epilog" {
  # GPU 0 busy, GPU 1 nearly idle, on every node.
  printf '%s\n' '* 0 80 30000 80000 250' '* 1 5 2000 80000 60' >gpus.txt
  plugstack_with "gpu_metrics=$OWNERS"
  job=$(as_dltest sbatch --parsable -w n1 --gres=gpu:1 -o /dev/null --wrap 'sleep 120')
  wait_state "$job" RUNNING 30
  [ "$(scontrol show job -d "$job" | grep -o 'IDX:[0-9]*')" = IDX:0 ]
  # The node runs the prolog when the batch step arrives, just after RUNNING.
  wait_until 30 "[ -e '$OWNERS/n1.$job' ]"
  # The record is root's, in a directory no one else can write.
  [ "$(stat -c %U:%a "$OWNERS")" = root:755 ]
  [ "$(stat -c %U "$OWNERS/n1.$job")" = root ]
  # The job's account as Slurm has it (none without accounting).
  account=$(job_field "$job" Account)
  [ "$account" != "(null)" ] || account=""
  grep -qx "node=n1 job=$job uid=$(id -u dltest) user=dltest gpus=0 account=$account" "$OWNERS/n1.$job"

  exporter --once
  out=$(cat text/slurm_dl_gpu.prom)
  echo "$out"
  [ "$(grep -c '^slurm_dl_gpu' <<<"$out")" -eq 4 ]
  grep -qx "slurm_dl_gpu_utilization{jobid=\"$job\",user=\"dltest\",account=\"$account\",node=\"n1\",gpu=\"0\"} 80" <<<"$out"
  grep -qx "slurm_dl_gpu_memory_used_bytes{jobid=\"$job\",user=\"dltest\",account=\"$account\",node=\"n1\",gpu=\"0\"} 31457280000" <<<"$out"
  grep -qx "slurm_dl_gpu_power_watts{jobid=\"$job\",user=\"dltest\",account=\"$account\",node=\"n1\",gpu=\"0\"} 250" <<<"$out"
  grep -qx '# TYPE slurm_dl_gpu_utilization gauge' <<<"$out"
  ! grep -q 'gpu="1"' <<<"$out" || false

  # The epilog removes the record; the next file has no series.
  scancel "$job"
  wait_until 30 "[ ! -e '$OWNERS/n1.$job' ]"
  exporter --once
  ! grep -q '^slurm_dl_gpu' text/slurm_dl_gpu.prom || false
}

@test "off by default, and a bad gpu_metrics value is refused" {
  printf '%s\n' '* 0 80 30000 80000 250' >gpus.txt
  job=$(submit -w n1 --gres=gpu:1 -o /dev/null --wrap 'sleep 60')
  wait_state "$job" RUNNING 30
  # RUNNING is the controller's word; the batch step starts on n1 after it. One that
  # starts after the bad argument below fails, as every step does, and drains the node.
  wait_until 30 "[ -n \"\$(job_pids $job sleep)\" ]"
  [ ! -e "$OWNERS" ]
  plugstack_with "gpu_metrics=relative/dir"
  run sbatch --wrap true
  [ "$status" -ne 0 ]
  [[ $output =~ "gpu_metrics=relative/dir: expected off or an absolute path" ]]
  # The epilog reads the bad argument too: it says so in slurmd's log, and the node is
  # not drained for it.
  scancel "$job"
  wait_until 30 '[ -z "$(squeue -h -j "$job" 2>/dev/null)" ]'
  grep -q "dl: slurm_spank_job_epilog: gpu_metrics=relative/dir: expected off or an absolute path" \
    "$(dirname "$SLURM_CONF")/log/slurmd-n1.log"
  plugstack_restore
  [[ ! "$(sinfo -h -n n1 -o %t)" =~ ^dr ]]
}

# dl-gpu-metrics refuses records in a directory others can write
@test "dl-gpu-metrics refuses a writable directory" {
  printf '%s\n' '* 0 80 30000 80000 250' >gpus.txt
  mkdir -m 0777 "$OWNERS"
  chmod 0777 "$OWNERS"
  run exporter --once
  [ "$status" -eq 1 ]
  [ "$output" = "dl-gpu-metrics: $OWNERS must belong to root and be writable by no one else (it has uid 0, mode 777)" ]
  run exporter --interval=0s
  [ "$status" -eq 2 ]
  [ "$output" = "dl-gpu-metrics: --interval=0s: expected a duration such as 90s, 30m or 2h, from 1s to 1h" ]
}

# Prometheus scrapes a plain job's GPU through node_exporter; dl-gpu-usage reports its GPU-hours
@test "Prometheus scrapes a GPU; dl-gpu-usage sums it" {
  if ! command -v prometheus >/dev/null || ! command -v prometheus-node-exporter >/dev/null; then
    [ -z "${CI:-}" ] || { echo "prometheus and prometheus-node-exporter are missing" >&2; return 1; }
    skip "install prometheus and prometheus-node-exporter (scripts/bootstrap does)"
  fi
  printf '%s\n' '* 0 80 30000 80000 250' '* 1 5 2000 80000 60' >gpus.txt
  plugstack_with "gpu_metrics=$OWNERS"
  job=$(as_dltest sbatch --parsable -w n1 --gres=gpu:1 -o /dev/null --wrap 'sleep 120')
  wait_state "$job" RUNNING 30
  wait_until 30 "[ -e '$OWNERS/n1.$job' ]"
  start exporter exporter --interval=1s

  NODE_PORT=$(free_port)
  start node-exporter prometheus-node-exporter --web.listen-address="127.0.0.1:$NODE_PORT" \
    --collector.disable-defaults --collector.textfile \
    --collector.textfile.directory="$BATS_TEST_TMPDIR/text"
  PROM_PORT=$(free_port)
  cat >prometheus.yml <<EOF2
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: node
    static_configs: [{targets: ['127.0.0.1:$NODE_PORT']}]
EOF2
  start prometheus prometheus --config.file=prometheus.yml --storage.tsdb.path=tsdb \
    --web.listen-address="127.0.0.1:$PROM_PORT"

  query="slurm_dl_gpu_utilization{jobid=\"$job\"}"
  wait_until 60 "promql '$query' | grep -q '\"value\"'" || {
    tail -n 20 exporter.log node-exporter.log prometheus.log >&2
    return 1
  }
  promql "$query" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
assert len(r) == 1, r
m = r[0]["metric"]
assert (m["jobid"], m["user"], m["node"], m["gpu"]) == (sys.argv[1], "dltest", "n1", "0"), m
assert r[0]["value"][1] == "80", r' "$job"
  # Only the job's GPU: nothing of GPU 1.
  [ "$(promql 'count(slurm_dl_gpu_utilization)' | grep -o '"value":\[[0-9.]*,"[0-9]*"' | cut -d'"' -f4)" = 1 ]

  # The usage report: dltest's one job, its GPU-hours allocated and 80% of them used.
  sleep 3
  usage="$DL_BUILD_DIR/launcher/dl-gpu-usage --prometheus http://127.0.0.1:$PROM_PORT --since 10m --resolution 1s"
  $usage
  $usage --json | /usr/bin/python3 -c '
import json, sys
rows = {r["user"]: r for r in json.load(sys.stdin)["rows"]}
assert list(rows) == ["dltest"], rows
r = rows["dltest"]
assert r["jobs"] == 1 and r["gpu_hours_allocated"] > 0, r
assert abs(r["gpu_hours_used"] - 0.8 * r["gpu_hours_allocated"]) < 1e-9, r'
  run $usage --by partition
  [ "$status" -eq 2 ]
  [ "$output" = "dl-gpu-usage: --by=partition: expected user or account" ]
}
