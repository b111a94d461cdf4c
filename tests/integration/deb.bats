#!/usr/bin/env bats
# The Debian packages (docs/packages.md), as an administrator uses them: `make deb`, apt
# installs them on this machine, a cluster enabled with the documented lines runs a DL
# job from them, a reinstall and an upgrade, apt refusing a Slurm the plugins cannot load,
# and a purge that leaves nothing behind. They go into this machine's own / (or the
# stack's root): the tests skip when slurm-dl is already installed there.

load helpers

ours=(slurm-dl slurm-dl-cli-filter slurm-dl-controller python3-slurm-dl)

setup_file() {
  export top
  top=$(mktemp -d /var/tmp/dl-deb.XXXXXX)
  chmod 0755 "$top"
  # The packager's identity; a stack's root has no git to take it from.
  if ! git -C "$DL_ROOT" config user.email >/dev/null 2>&1; then
    export DEBFULLNAME=${DEBFULLNAME:-slurm-dl tests} DEBEMAIL=${DEBEMAIL:-tests@slurm-dl.example.org}
  fi
  export slurm_deb
  slurm_deb=$(dpkg-query -W -f '${Version}' slurmctld)
  # The file system before anything is installed; the purge must bring it back.
  snapshot >"$top/before"
}

teardown_file() {
  "$DL_ROOT/scripts/minicluster" down --dir "$top/cluster" >/dev/null 2>&1 || true
  "$DL_ROOT/scripts/minicluster" down --dir "$top/plain" >/dev/null 2>&1 || true
  if [ -f "$top/installed-by-us" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${ours[@]}" >/dev/null 2>&1 || true
  fi
  rm -rf "$top"
}

# Every path below the directories a package may write to, but apt's and dpkg's own state
# and the interpreter's byte code of Python's standard library (any python3 run as root
# may write it, py3compile included, where the system was installed without it).
snapshot() {
  find /usr /etc /opt /var/lib -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt \
    -o -path '/usr/lib/python3.*/__pycache__' -o -path '/usr/lib/python3.*/*/__pycache__' \) -prune \
    -o -print 2>/dev/null | LC_ALL=C sort
}

# Installed state of each of our packages, e.g. "ii slurm-dl 0.1.0-1~deb12".
states() {
  dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' "${ours[@]}" 2>/dev/null | tr -s ' ' || true
}

# Refuses to touch a machine where slurm-dl is installed already (by packages or by
# `make install`).
need_clean_machine() {
  if states | grep -qv '^[up]n ' || [ -e /usr/lib/x86_64-linux-gnu/slurm-dl ] || [ -e /usr/bin/dlrun ]; then
    skip "slurm-dl is installed on this machine already"
  fi
}
built() { compgen -G "$top/deb1/slurm-dl_*.deb" >/dev/null || skip "the packages were not built"; }

apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "$@"
}

# A package that only claims to be NAME at VERSION (Slurm's next release, for apt to plan).
fake_deb() {
  local d=$top/fake-$1-$2
  mkdir -p "$d/DEBIAN"
  printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test <test@example.org>\nDescription: fake %s\n' \
    "$1" "$2" "$(dpkg --print-architecture)" "$1" >"$d/DEBIAN/control"
  dpkg-deb --root-owner-group --build "$d" "$top/$1_$2.deb" >/dev/null
  echo "$top/$1_$2.deb"
}

@test "make deb builds the four packages" {
  need_clean_machine
  run make -s -C "$DL_BUILD_DIR" deb
  echo "$output"
  [ "$status" -eq 0 ]
  mkdir -p "$top/deb1" "$top/deb2"
  cp "$DL_BUILD_DIR"/deb/*.deb "$top/deb1/"
  # A rebuild with the next revision, for the upgrade.
  run make -s -C "$DL_BUILD_DIR" deb DEB_REVISION=2
  [ "$status" -eq 0 ]
  cp "$DL_BUILD_DIR"/deb/*.deb "$top/deb2/"
  chmod 0644 "$top"/deb?/*.deb
  ls "$top/deb1" "$top/deb2"
  [ "$(ls "$top/deb1" | wc -l)" = 4 ]
  [ "$(ls "$top/deb2" | wc -l)" = 4 ]
  release=$(. /etc/os-release && echo "${VERSION_ID%%.*}")
  for p in "${ours[@]}"; do
    f=$(ls "$top/deb1/${p}_"*.deb)
    v=$(dpkg-deb -f "$f" Version)
    [[ $v == *-1~deb$release ]]
    [[ $(dpkg-deb -f "$top/deb2/${p}_"*.deb Version) == *-2~deb$release ]]
    dpkg --compare-versions "$(dpkg-deb -f "$top/deb2/${p}_"*.deb Version)" gt "$v"
  done

  # What goes where: the plugins by name, the Python package, the rest in slurm-dl.
  list() { dpkg-deb -c "$top/deb1/$1"_*.deb | awk '{ print $6 }' | sed 's#^\./#/#'; }
  plugins=/usr/lib/x86_64-linux-gnu/slurm-dl
  list slurm-dl >"$top/slurm-dl.list"
  for f in $plugins/spank_dl.so /usr/bin/dlrun /usr/bin/dl-jobs /usr/bin/dl-stats /usr/bin/dl-ckpt /usr/bin/dl-exp \
    /usr/bin/dl-search /usr/bin/dl-sim /usr/share/man/man8/spank_dl.8.gz /usr/share/man/man1/dlrun.1.gz \
    /usr/share/doc/slurm-dl/examples/dl.conf /usr/share/doc/slurm-dl/examples/slurm.conf.dl \
    /usr/share/doc/slurm-dl/examples/train_ddp.py /usr/share/doc/slurm-dl/copyright \
    /usr/share/doc/slurm-dl/changelog.Debian.gz; do
    grep -qx "$f" "$top/slurm-dl.list"
  done
  grep -q '^/usr/lib/x86_64-linux-gnu/libdlckpt\.so\.0' "$top/slurm-dl.list"
  run grep -e '_dl\.so$' "$top/slurm-dl.list"
  [ "$output" = "$plugins/spank_dl.so" ]
  run grep -e '\.la$' -e __pycache__ -e '^/usr/local' "$top/slurm-dl.list"
  [ "$status" -eq 1 ]
  [ "$(list slurm-dl-controller | grep '\.so$' | sort | paste -sd' ')" = \
    "$plugins/job_submit_dl.so $plugins/preempt_dl.so $plugins/site_factor_dl.so" ]
  [ "$(list slurm-dl-cli-filter | grep '\.so$')" = "$plugins/cli_filter_dl.so" ]
  list python3-slurm-dl | grep -qx /usr/lib/python3/dist-packages/slurm_dl/__init__.py
}

@test "lintian finds no errors in the packages" {
  need_clean_machine
  command -v lintian >/dev/null || skip "lintian is not installed"
  built
  # Warnings and notes are listed, errors fail.
  run lintian --fail-on error --tag-display-limit 0 "$top"/deb1/*.deb
  echo "$output"
  [ "$status" -eq 0 ]
  run grep '^E:' <<<"$output"
  [ "$status" -eq 1 ]
}

@test "the plugin packages pin Slurm, and apt refuses another" {
  need_clean_machine
  built
  field() { dpkg-deb -f "$top/deb1/$1"_*.deb "$2"; }
  release=$(echo "$slurm_deb" | cut -d. -f1,2)
  next=$(echo "$release" | awk -F. '{ printf "%d.%02d", $1, $2 + 1 }')
  # SPANK: the release; slurmctld's and srun's plugins: exactly this Slurm.
  [[ ", $(field slurm-dl Depends), " == *", slurm-client (>= $release), slurm-client (<< $next), "* ]]
  [ "$(field slurm-dl Breaks)" = "slurmd (<< $release), slurmd (>= $next)" ]
  [[ ", $(field slurm-dl-controller Depends), " == *", slurmctld (= $slurm_deb), "* ]]
  [[ ", $(field slurm-dl-cli-filter Depends), " == *", slurm-client (= $slurm_deb), "* ]]
  [ "$(field python3-slurm-dl Architecture)" = all ]

  # The same controller package built against another Slurm: apt will not install it here.
  other=${slurm_deb}+other1
  rm -rf "$top/fake"
  dpkg-deb -R "$top/deb1/slurm-dl-controller_"*.deb "$top/fake"
  sed -i "s/slurmctld (= [^)]*)/slurmctld (= $other)/" "$top/fake/DEBIAN/control"
  dpkg-deb --root-owner-group --build "$top/fake" "$top/slurm-dl-controller_other.deb" >/dev/null
  run apt-get install --simulate "$top/deb1/slurm-dl_"*.deb "$top/slurm-dl-controller_other.deb"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *"slurm-dl-controller : Depends: slurmctld (= $other) but $slurm_deb is to be installed"* ]]
  # The real one would be installed.
  run apt-get install --simulate "$top/deb1/slurm-dl_"*.deb "$top/deb1/slurm-dl-controller_"*.deb
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"Inst slurm-dl-controller "* ]]
}

@test "apt installs the packages and a DL job runs from them" {
  need_clean_machine
  built
  touch "$top/installed-by-us"
  run apt_install "$top"/deb1/*.deb
  echo "$output"
  [ "$status" -eq 0 ]
  version=$(dpkg-deb -f "$top/deb1/slurm-dl_"*.deb Version)
  [ "$(states | sort)" = "$(for p in "${ours[@]}"; do echo "ii $p $version"; done | sort)" ]

  # The documented lines (the installed examples/dl.conf and slurm.conf.dl) enable them on
  # a cluster whose daemons, and so jobs, see the source and build trees empty.
  dir=$top/cluster
  port=$((${DL_MINICLUSTER_PORT_BASE:-16800} + 1100))
  # minicluster and the scripts it sources, outside the hidden trees.
  cp -r "$DL_ROOT/scripts" "$top/scripts"
  # In a stack's root (a chroot, already in a private mount namespace) / is no mount point
  # whose propagation could be changed.
  propagation=private
  mountpoint -q / || propagation=unchanged
  unshare --mount --propagation "$propagation" sh -c '
    mc=$1 dir=$2 port=$3
    shift 3
    cd /
    for d; do [ -d "$d" ] && mount -t tmpfs -o size=64k,mode=0755 hidden "$d"; done
    exec "$mc" up --installed / --dir "$dir" --port-base "$port" --nodes 2' \
    sh "$top/scripts/minicluster" "$dir" "$port" "$DL_ROOT" "$DL_BUILD_DIR"
  eval "$("$top/scripts/minicluster" env --dir "$dir")"
  ctld=$(head -n 1 "$dir/run/slurmctld.pid")
  hidden() { as_seen_by "$ctld" "$top" "$@"; }
  plugins=/usr/lib/x86_64-linux-gnu/slurm-dl
  for p in job_submit_dl site_factor_dl preempt_dl; do hidden grep -q " $plugins/$p.so$" "/proc/$ctld/maps"; done

  # A step's dlrun, slurm_dl, libdlckpt and spank_dl.so are the packaged ones, and
  # cli_filter/dl chose PMIx.
  run step_uses
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = /usr/bin/dlrun ]
  [ "${lines[1]}" = /usr/lib/python3/dist-packages/slurm_dl/__init__.py ]
  [ "${lines[2]}" = /usr/lib/x86_64-linux-gnu/libdlckpt.so.0.0.0 ]
  [ "${lines[3]}" = "$plugins/spank_dl.so" ]
  [ "${lines[4]}" = mpi=pmix ]
  for f in "${lines[@]:0:4}"; do dpkg -S "$f" >/dev/null; done

  # The packaged PyTorch example, checkpointing every second.
  examples=/usr/share/doc/slurm-dl/examples
  job=$(hidden env TRAIN_DDP="$examples/train_ddp.py" sbatch --parsable -o "$top/job.out" \
    --dl-ckpt-every=1s "$examples/train_ddp.sbatch" --steps 30 --step-ms 100 --out "$top/final.bin")
  wait_state "$job" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL' 120
  cat "$top/job.out"
  [ "$(job_state "$job")" = COMPLETED ]
  grep -q '\] final step 29 loss' "$top/job.out"
  [[ $(job_comment "$job") == "dl: 2 GPUs as 2x1"*"COMPLETED step 29, ckpt "* ]]
  run hidden dl-ckpt verify "$dir/ckpt/root/$job"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "apt refuses a Slurm upgrade the plugins cannot follow" {
  need_installed() { [ "$(states | grep -c '^ii')" = 4 ] || skip "the packages are not installed"; }
  need_installed
  # A point release: slurm-dl (the SPANK plugin) stays, the exact-version plugins would go.
  point=$(echo "$slurm_deb" | awk -F'[.-]' '{ printf "%s.%s.%d-1", $1, $2, $3 + 50 }')
  run apt-get install --simulate "$(fake_deb slurm-client "$point")"
  echo "$output"
  [[ $output == *"Remv slurm-dl-cli-filter "* ]]
  [[ $output != *"Remv slurm-dl "* ]]
  # The next release: the SPANK plugin too.
  next=$(echo "$slurm_deb" | awk -F. '{ printf "%d.%02d.1-1", $1, $2 + 1 }')
  run apt-get install --simulate "$(fake_deb slurm-client "$next")"
  echo "$output"
  [[ $output == *"Remv slurm-dl "* ]]
  run apt-get install --simulate "$(fake_deb slurmd "$next")"
  echo "$output"
  [[ $output == *"Remv slurm-dl "* ]]
  # slurmctld at another version: apt would have to remove the controller plugins, and
  # without leave to remove anything it refuses.
  fake=$(fake_deb slurmctld "$point")
  run apt-get install --simulate "$fake"
  echo "$output"
  [[ $output == *"Remv slurm-dl-controller "* ]]
  run apt-get install --simulate --no-remove "$fake"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *"Packages need to be removed but remove is disabled"* ]]
  # Nothing was changed.
  [ "$(dpkg-query -W -f '${Version}\n' slurmctld slurm-client | sort -u)" = "$slurm_deb" ]
}

# a reinstall and an upgrade leave the packaged files and nothing else
@test "reinstall and upgrade leave only packaged files" {
  [ "$(states | grep -c '^ii')" = 4 ] || skip "the packages are not installed"
  v1=$(dpkg-deb -f "$top/deb1/slurm-dl_"*.deb Version)
  v2=$(dpkg-deb -f "$top/deb2/slurm-dl_"*.deb Version)
  snapshot >"$top/installed"
  run apt_install --reinstall "$top"/deb1/*.deb
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(states | grep -c "^ii .* $v1\$")" = 4 ]
  diff "$top/installed" <(snapshot)

  run apt_install "$top"/deb2/*.deb
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(states | grep -c "^ii .* $v2\$")" = 4 ]
  diff "$top/installed" <(snapshot)
  for p in "${ours[@]}"; do
    dpkg-query -L "$p" | while read -r f; do [ -e "$f" ]; done
    dpkg --verify "$p"
  done

  # The running cluster takes the upgraded SPANK plugin and tools in its next step.
  eval "$("$DL_ROOT/scripts/minicluster" env --dir "$top/cluster")"
  run timeout 60 srun -N1 --dl-gpus=1 sh -c 'grep -o "/[^ ]*spank_dl.so" /proc/$PPID/maps | sort -u'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = /usr/lib/x86_64-linux-gnu/slurm-dl/spank_dl.so ]
}

@test "a purge leaves nothing, and Slurm runs without the lines" {
  [ -f "$top/installed-by-us" ] || skip "the packages were not installed by these tests"
  "$DL_ROOT/scripts/minicluster" down --dir "$top/cluster" >/dev/null
  # The documented line kept in plugstack.conf would stop srun once the plugin is gone.
  cp /usr/share/doc/slurm-dl/examples/dl.conf "$top/dl.conf"
  run env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${ours[@]}"
  echo "$output"
  [ "$status" -eq 0 ]
  rm -f "$top/installed-by-us"
  [ -z "$(states | grep -v '^[up]n ')" ]
  for p in "${ours[@]}"; do
    run dpkg-query -L "$p"
    [ "$status" -ne 0 ]
  done
  run diff "$top/before" <(snapshot)
  echo "$output"
  [ "$status" -eq 0 ]

  # Plain Slurm: slurmctld starts, sbatch and srun run; with the documented SPANK line
  # still in plugstack.conf, both fail.
  port=$((${DL_MINICLUSTER_PORT_BASE:-16800} + 1100))
  "$DL_ROOT/scripts/minicluster" up --no-plugins --dir "$top/plain" --port-base "$port" --nodes 1 >/dev/null
  eval "$("$DL_ROOT/scripts/minicluster" env --dir "$top/plain")"
  run timeout 60 srun -N1 echo plain
  [ "$status" -eq 0 ]
  [ "$output" = plain ]
  job=$(sbatch --parsable -o /dev/null --wrap true)
  wait_state "$job" 'COMPLETED|FAILED|CANCELLED' 60
  [ "$(job_state "$job")" = COMPLETED ]
  grep -v '^#' "$top/dl.conf" >"$top/plain/plugstack.conf"
  run timeout 60 srun -N1 echo plain
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *spank_dl.so* ]]
  run sbatch --parsable -o /dev/null --wrap true
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *spank_dl.so* ]]
}
