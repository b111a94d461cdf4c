# Sourced by scripts/bootstrap, minicluster, test and demo. A stack is the Debian release
# that slurm-dl is built, run and tested on, with its Slurm, PMIx, Open MPI, HDF5, Python
# and PyTorch:
#   debian12  Slurm 22.05, PMIx 4, Open MPI 4.1, HDF5 1.10, Python 3.11, PyTorch 1.13
#   debian13  Slurm 24.11, PMIx 5, Open MPI 5.0, HDF5 1.14, Python 3.13, PyTorch 2.6
# The stack this machine runs is used as it is; the other one runs in a Debian root made
# with debootstrap from this machine's Debian mirror, cached under
# ${DL_STACK_CACHE:-/var/cache/slurm-dl} and made again when its package list
# (scripts/lib/packages-STACK) changes. Commands run there in a private mount namespace
# (nothing is mounted on the host) with this machine's /home, /root, /tmp, /var/tmp,
# the project tree and the caller's working directory at the same paths.
#
#   stack_of_host                  the stack this machine runs (debian12, debian13 or "")
#   stack_check NAME               exits with a message unless NAME is a known stack
#   stack_packages NAME [torch]    the stack's package list (with torch: also PyTorch)
#   stack_ensure NAME              makes or refreshes the stack's root (not for the host's)
#   stack_exec NAME CMD...         runs CMD in the stack (exec; on the host's stack as is)
#   stack_builddir NAME            the default build directory for NAME

stack_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stack_project=$(cd "$stack_lib_dir/../.." && pwd)
stack_names=(debian12 debian13)

stack_of_host() {
  local codename
  codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
  case $codename in
    bookworm) echo debian12 ;;
    trixie) echo debian13 ;;
    *) echo "" ;;
  esac
}

stack_suite() {
  case $1 in
    debian12) echo bookworm ;;
    debian13) echo trixie ;;
  esac
}

stack_check() {
  local s
  for s in "${stack_names[@]}"; do [ "$s" = "$1" ] && return 0; done
  echo "--stack $1: unknown stack; expected one of: ${stack_names[*]}" >&2
  exit 2
}

# One package a line; "torch:" marks the PyTorch packages (bootstrap --with-torch).
stack_packages() {
  local file=$stack_lib_dir/packages-$1
  [ -f "$file" ] || {
    echo "stack: no package list $file" >&2
    return 1
  }
  if [ "${2:-}" = torch ]; then
    sed -e 's/#.*//' -e 's/^torch://' "$file"
  else
    sed -e 's/#.*//' -e '/^torch:/d' "$file"
  fi | tr -s ' \t' '\n' | sed '/^$/d'
}

stack_builddir() {
  if [ "$1" = "$(stack_of_host)" ]; then echo "$stack_project/build"; else echo "$stack_project/build-$1"; fi
}

stack_cache() { echo "${DL_STACK_CACHE:-/var/cache/slurm-dl}/$1"; }

# The root's key: its package list and the recipe below. A change to either makes it anew.
stack_key() {
  {
    stack_packages "$1" torch
    sed -n '/^stack_make_root()/,/^}/p' "$stack_lib_dir/stack.sh"
  } | sha256sum | cut -c1-16
}

# Runs CMD in ROOT (exec) in a private mount namespace, with /proc, /sys, /dev and the N
# directories DIR... at the same paths, and no environment but PATH, LANG and VAR=VALUE...:
#   stack_enter ROOT N DIR... [VAR=VALUE...] CMD...
stack_enter() {
  exec unshare --mount --propagation private -- /bin/bash -c '
    r=$1 n=$2; shift 2
    # The root a mount point of its own: "ip netns add" and "unshare --propagation" change
    # the propagation of /, which must be a mount point.
    mount --bind "$r" "$r" || exit 1
    mount --rbind /proc "$r/proc" && mount --rbind /sys "$r/sys" && mount --rbind /dev "$r/dev" || exit 1
    for ((i = 0; i < n; i++)); do
      d=$1; shift
      mkdir -p "$r$d" && mount --rbind "$d" "$r$d" || exit 1
    done
    exec chroot "$r" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 "$@"' sh "$@"
}

stack_make_root() {
  local name=$1 dir=$2 suite mirror
  suite=$(stack_suite "$name")
  mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
  mirror=${mirror:-http://deb.debian.org/debian}
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null ||
    return 1
  rm -rf "$dir/root.new"
  debootstrap --variant=minbase "$suite" "$dir/root.new" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
    {
      tail -n 20 "$dir/debootstrap.log" >&2
      return 1
    }
  echo "deb-src $mirror $suite main" >>"$dir/root.new/etc/apt/sources.list"
  # Daemons must not start while packages are installed (there is no init in the root).
  printf '#!/bin/sh\nexit 101\n' >"$dir/root.new/usr/sbin/policy-rc.d"
  chmod 0755 "$dir/root.new/usr/sbin/policy-rc.d"
  # shellcheck disable=SC2046
  (stack_enter "$dir/root.new" 0 HOME=/root DEBIAN_FRONTEND=noninteractive \
    sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" && apt-get clean' \
    sh $(stack_packages "$name" torch)) >"$dir/install.log" 2>&1 || {
    tail -n 30 "$dir/install.log" >&2
    return 1
  }
}

# The host's test users and munge key, at the same ids in the root: files under the shared
# /home and /tmp then belong to the same users on both sides.
stack_sync_users() {
  local root=$1 user line
  for user in dltest dlother; do
    line=$(getent passwd "$user") || continue
    grep -q "^$user:" "$root/etc/passwd" || echo "$line" >>"$root/etc/passwd"
    line=$(getent group "$user") || continue
    grep -q "^$user:" "$root/etc/group" || echo "$line" >>"$root/etc/group"
    grep -q "^$user:" "$root/etc/shadow" || echo "$user:!:19000:0:99999:7:::" >>"$root/etc/shadow"
  done
}

# The host's own name resolves in the root as it does on the host (slurmctld, slurmd and
# munged look it up).
stack_sync_hostname() {
  local root=$1 name line
  name=$(hostname)
  awk -v n="$name" '{ for (i = 2; i <= NF; i++) if ($i == n) found = 1 } END { exit !found }' \
    "$root/etc/hosts" && return 0
  line=$(getent hosts "$name") || return 0
  echo "$line" >>"$root/etc/hosts"
}

stack_ensure() {
  local name=$1 dir key
  [ "$name" != "$(stack_of_host)" ] || return 0
  dir=$(stack_cache "$name")
  key=$(stack_key "$name")
  mkdir -p "$dir"
  (
    # One maker at a time; the others wait and then find it made.
    flock 9
    if [ "$(cat "$dir/key" 2>/dev/null)" != "$key" ] || [ ! -x "$dir/root/usr/bin/sbatch" ]; then
      echo "stack: making the $name root in $dir (debootstrap and packages: a few minutes)" >&2
      stack_make_root "$name" "$dir" || {
        echo "stack: making the $name root failed (logs in $dir)" >&2
        exit 1
      }
      rm -rf "$dir/root.old"
      [ ! -d "$dir/root" ] || mv "$dir/root" "$dir/root.old"
      mv "$dir/root.new" "$dir/root"
      rm -rf "$dir/root.old"
      echo "$key" >"$dir/key"
    fi
    stack_sync_users "$dir/root"
    stack_sync_hostname "$dir/root"
  ) 9>"$dir.lock"
}

# Runs CMD in stack NAME, in the caller's working directory, with DL_* variables and
# SLURM_CONF passed through and DL_BUILD_DIR defaulting to the stack's own build tree.
stack_exec() {
  local name=$1 root binds=() d vars=()
  shift
  if [ "$name" = "$(stack_of_host)" ]; then exec "$@"; fi
  stack_ensure "$name" || exit 1
  root=$(stack_cache "$name")/root
  # /usr/local/cuda: a site's CUDA and NCCL live outside the distribution (dlrun loads
  # NCCL from there at run time).
  for d in /home /root /tmp /var/tmp /usr/local/cuda "$stack_project" "$PWD"; do
    [ -d "$d" ] && binds+=("$d")
  done
  while IFS= read -r d; do vars+=("$d"); done < <(env | grep -E '^(DL_[A-Z0-9_]*|SLURM_CONF|CI|TERM|BATS_[A-Z_]*)=' || true)
  vars+=("HOME=${HOME:-/root}" "DL_BUILD_DIR=${DL_BUILD_DIR:-$(stack_builddir "$name")}" "DL_STACK=$name")
  stack_enter "$root" "${#binds[@]}" "${binds[@]}" \
    "${vars[@]}" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$PWD" "$@"
}

# Called first by every script that takes --stack: `stack_dispatch "$0" "$@"`. Without
# --stack it returns; with it, it runs the script again without the option, in that
# stack (on this machine's own stack: here, as it is).
stack_dispatch() {
  local script=$1 name="" args=()
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --stack)
        [ $# -ge 2 ] || {
          echo "--stack: expected a stack name (${stack_names[*]})" >&2
          exit 2
        }
        name=$2
        shift
        ;;
      --stack=*) name=${1#--stack=} ;;
      --) args+=("$@"); break ;;
      *) args+=("$1") ;;
    esac
    shift
  done
  [ -n "$name" ] || return 0
  stack_check "$name"
  if [ "$name" = "$(stack_of_host)" ]; then exec "$script" "${args[@]}"; fi
  [ "$(id -u)" = 0 ] || {
    echo "--stack $name: must run as root (it makes a Debian root and enters it)" >&2
    exit 1
  }
  stack_exec "$name" "$script" "${args[@]}"
}

# The stack that ARGS ask for with --stack, or nothing.
stack_requested() {
  while [ $# -gt 0 ]; do
    case $1 in
      --stack) echo "${2:-}"; return ;;
      --stack=*) echo "${1#--stack=}"; return ;;
      --) return ;;
    esac
    shift
  done
}
