# Sourced by scripts/test and scripts/demo. The mini-cluster's daemons (munged runs as
# `munge`) and the jobs of the unprivileged test users read the cluster's state and run
# the built programs from the tree; a clone in a private directory (root's home is 0700
# on Debian) is out of their reach. Then the scripts work from a copy that they can
# reach, made again at every run (the build there is kept and stays incremental).
#
#   work_from_reachable_copy ROOT SCRIPT ARGS...   (returns when ROOT is reachable)
work_from_reachable_copy() {
  local root=$1 script=$2
  shift 2
  if runuser -u nobody -- test -x "$root/scripts" 2>/dev/null; then return 0; fi
  # One copy per stack (scripts/lib/stack.sh): each is made again at every run, and the
  # two stacks' runs may overlap (CI prepares the second while the first runs).
  local copy stack suffix=""
  stack=$(stack_requested "$@")
  if [ -n "$stack" ] && [ "$stack" != "$(stack_of_host)" ]; then suffix=-$stack; fi
  copy=/var/tmp/slurm-dl-$(printf '%s' "$root" | sha1sum | cut -c1-12)$suffix
  echo "$script: $root is private (Slurm's daemons and the test users cannot reach it);" \
    "working from a copy in $copy" >&2
  install -d -m 0755 "$copy"
  rm -rf "$copy/src.new"
  install -d -m 0755 "$copy/src.new"
  tar -C "$root" --exclude=./build --exclude='./build-*' --exclude=./.cache -cf - . | tar -C "$copy/src.new" -xf -
  chmod -R a+rX "$copy/src.new"
  rm -rf "$copy/src"
  mv "$copy/src.new" "$copy/src"
  export DL_BUILD_DIR=${DL_BUILD_DIR:-$copy/build$suffix} DL_CACHE_DIR=${DL_CACHE_DIR:-$copy/cache}
  exec "$copy/src/scripts/$script" "$@"
}
