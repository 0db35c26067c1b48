# shellcheck shell=bash
# layerdiff bench helper (sourced by scripts/bench.sh and its test): puts a
# writer's memory into a known state before it is timed.
#
# On a VM the host backs guest memory lazily: the first write to a guest page
# the host has not backed yet (never used since boot, or handed back through
# the balloon's free page reporting) costs a host fault. On the Zen 5 VM of
# session 12 writing 1.4 GB into /dev/shm ran at 0.9-1.0 GB/s of CPU time on
# such pages against 4-5.5 GB/s on pages freed a moment before; which kind a
# writer gets depends on what the machine freed lately, not on the writer
# (docs/architecture.md, "Dump write rate on a VM"). make bench therefore
# writes and removes a scratch file of the writer's size in its folder just
# before each timed writer, so that both the dump and the plain loop write
# into recently used pages.

# warm_pages DIR BYTES: writes BYTES (rounded up to whole MiB) of zeros to a
# scratch file in DIR and removes it. Fails, leaving no file, when the write
# fails.
warm_pages() {
  local dir=$1 bytes=$2 f rc=0
  f=$(mktemp "$dir/warm-pages.XXXXXX") || return 1
  dd if=/dev/zero of="$f" bs=1M count=$(((bytes + 1048575) / 1048576)) status=none 2>/dev/null ||
    rc=1
  rm -f "$f"
  return $rc
}
