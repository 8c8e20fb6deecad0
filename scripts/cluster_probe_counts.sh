#!/usr/bin/env bash
# Instructions per round of the cluster probe cases (benches/cluster.rs,
# JIDO_CLUSTER_PROBE), counted with valgrind's callgrind on both nodes: node A
# (the bench binary) and node B (its child process, run under callgrind too).
# Each case runs with two round counts; the difference of the totals over the
# difference in rounds is the count per round (cast cases: per round of 100
# casts and one call). Independent of the machine's load.
#
#   cargo build --release --all-features --bench cluster
#   scripts/cluster_probe_counts.sh [CASE...]   # default: every case
#
# KEEP=DIR keeps the callgrind files (for callgrind_annotate).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BENCH:-$(ls -t target/release/deps/cluster-* | grep -v '\.d$' | head -1)}
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then cases=(raw_call remote_call remote_call_reply local_call raw_cast raw_cast_batched remote_cast remote_cast_default); fi
tmp=${KEEP:-$(mktemp -d)}
mkdir -p "$tmp"
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$tmp"' EXIT; fi
for case in "${cases[@]}"; do
  case $case in
    *cast|*cast_*) lo=${LO:-10} hi=${HI:-60} ;;
    *) lo=${LO:-200} hi=${HI:-1200} ;;
  esac
  a=() b=() failed=
  for n in $lo $hi; do
    # A failed run is reported and the next case goes on (under `set -e`
    # a failing command here used to end the whole script silently).
    if ! JIDO_CLUSTER_PROBE="$case:$n" JIDO_CLUSTER_PROBE_B="$tmp/$case.$n.b" \
      valgrind --tool=callgrind --callgrind-out-file="$tmp/$case.$n.a" "$bin" >"$tmp/$case.$n.log" 2>&1; then
      echo "$case: the probe failed with $n rounds:" >&2
      tail -5 "$tmp/$case.$n.log" >&2
      failed=1
      break
    fi
    a+=("$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$tmp/$case.$n.a")")
    b+=("$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$tmp/$case.$n.b" 2>/dev/null || true)")
    if [ -z "${a[-1]}" ] || [ -z "${b[-1]}" ]; then
      echo "$case: no callgrind summary with $n rounds" >&2
      failed=1
      break
    fi
  done
  [ -n "$failed" ] && continue
  python3 -c "
d=$hi-$lo
a=(${a[1]}-${a[0]})/d; b=(${b[1]}-${b[0]})/d
print(f'{\"$case\":12} node A {a:10.0f}   node B {b:10.0f}   both {a+b:10.0f} instr/round')"
done
