#!/usr/bin/env bash
# Instructions and allocations per round of the probe cases (examples/probe.rs),
# counted with valgrind's callgrind on all threads: each case runs with two round
# counts and the difference is divided by the difference in rounds (cast: per
# signal, 101 signals a round). Independent of the machine's load.
#
#   cargo build --release --example probe
#   scripts/probe_counts.sh [CASE...]   # default: every case
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PROBE:-target/release/examples/probe}
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(call raw_call cast raw_cast exec raw_exec spawn_ct raw_spawn_ct spawn_mt raw_spawn_mt)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for case in "${cases[@]}"; do
  case $case in
    cast|raw_cast) lo=20 hi=120 per=101 ;;
    *) lo=200 hi=1200 per=1 ;;
  esac
  ir=() al=()
  for n in $lo $hi; do
    out=$(valgrind --tool=callgrind --callgrind-out-file="$tmp/$case.$n" "$bin" "$case" "$n" 2>/dev/null)
    al+=("$(sed -n 's/.*allocs \([0-9]*\).*/\1/p' <<<"$out")")
    ir+=("$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$tmp/$case.$n")")
  done
  python3 -c "
d=($hi-$lo)*$per
print(f'{\"$case\":14} {(${ir[1]}-${ir[0]})/d:10.0f} instr   {(${al[1]}-${al[0]})/d:6.2f} allocs')"
done
