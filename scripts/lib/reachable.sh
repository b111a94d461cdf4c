# Sourced by scripts/test, scripts/demo and scripts/minicluster. The mini-cluster's
# daemons (munged runs as `munge`) and the jobs of the unprivileged test users read the
# cluster's state and run the built programs from the tree; a clone in a private
# directory (root's home is 0700 on Debian) is out of their reach. Then the scripts work
# from a copy that they can reach, made again at every run (the build there is kept and
# stays incremental).
#
#   work_from_reachable_copy ROOT SCRIPT ARGS...   (returns when ROOT is reachable)
#   work_in_reachable_copy ROOT SCRIPT ARGS...     (the same, in the copy an earlier
#                                                   run made, without copying again)

# True when the test users and the daemons can reach ROOT.
root_is_reachable() { runuser -u nobody -- test -x "$1/scripts" 2>/dev/null; }

# The copy's directory for ROOT: one copy per stack (scripts/lib/stack.sh), since the
# two stacks' runs may overlap (CI prepares the second while the first runs).
reachable_copy_dir() {
  local root=$1 stack suffix=""
  shift
  stack=$(stack_requested "$@")
  if [ -n "$stack" ] && [ "$stack" != "$(stack_of_host)" ]; then suffix=-$stack; fi
  echo "/var/tmp/slurm-dl-$(printf '%s' "$root" | sha1sum | cut -c1-12)$suffix"
}

# Runs SCRIPT of ROOT's copy, with the copy's build and cache directories.
exec_in_copy() {
  local copy=$1 script=$2 suffix
  shift 2
  suffix=${copy##*/slurm-dl-????????????}
  export DL_BUILD_DIR=${DL_BUILD_DIR:-$copy/build$suffix} DL_CACHE_DIR=${DL_CACHE_DIR:-$copy/cache}
  exec "$copy/src/scripts/$script" "$@"
}

work_from_reachable_copy() {
  local root=$1 script=$2 copy
  shift 2
  if root_is_reachable "$root"; then return 0; fi
  copy=$(reachable_copy_dir "$root" "$@")
  echo "$script: $root is private (Slurm's daemons and the test users cannot reach it);" \
    "working from a copy in $copy" >&2
  install -d -m 0755 "$copy"
  rm -rf "$copy/src.new"
  install -d -m 0755 "$copy/src.new"
  tar -C "$root" --exclude=./build --exclude='./build-*' --exclude=./.cache -cf - . | tar -C "$copy/src.new" -xf -
  chmod -R a+rX "$copy/src.new"
  rm -rf "$copy/src"
  mv "$copy/src.new" "$copy/src"
  exec_in_copy "$copy" "$script" "$@"
}

# For commands that act on what an earlier run started (a cluster's down, status, env,
# shell): the copy is left as it is, so that a running cluster's files stay in place.
# Without a copy there is nothing of ROOT's to act on there, and ROOT's own is used.
work_in_reachable_copy() {
  local root=$1 script=$2 copy
  shift 2
  if root_is_reachable "$root"; then return 0; fi
  copy=$(reachable_copy_dir "$root" "$@")
  [ -x "$copy/src/scripts/$script" ] || return 0
  exec_in_copy "$copy" "$script" "$@"
}
