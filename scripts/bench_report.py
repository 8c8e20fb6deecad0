#!/usr/bin/env python3
"""Print each benchmark beside its baseline from the last `cargo bench` run.

Every criterion group in benches/ runs a raw baseline (tokio, ractor, serde_json, a HashMap,
bare Exec) next to our case. This script reads target/criterion/**/new/{benchmark,estimates}.json
and prints, per group and input, each case's mean time and its ratio to the baseline.

    cargo bench                      # or: cargo bench --bench exec -- --measurement-time 2
    python3 scripts/bench_report.py  # add --markdown for a table to paste into docs
"""
import json
import pathlib
import re
import sys

# Function ids that name a baseline, first match wins within a group.
BASELINE = re.compile(
    r"^(raw_|ractor|tokio_spawn_timeout$|hashmap|plain_serde|exec$|exec_execute$|closure_loop$)"
)


def load(root):
    rows = []
    for bench in root.glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        fid = meta.get("function_id") or ""
        value = meta.get("value_str")
        if value is None and "/" in fid:
            fid, value = fid.split("/", 1)[0], fid.split("/", 1)[1]
        rows.append((meta["group_id"], value or "", fid, est["mean"]["point_estimate"]))
    return rows


def human(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def main():
    root = pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"
    if not root.is_dir():
        print("no criterion results: run `cargo bench` first", file=sys.stderr)
        return 1
    markdown = "--markdown" in sys.argv
    groups = {}
    for group, value, fid, mean in load(root):
        groups.setdefault((group, value), {})[fid] = mean
    if markdown:
        print("| group | input | case | mean | baseline | ratio |")
        print("|---|---|---|---|---|---|")
    for (group, value), cases in sorted(groups.items()):
        base = next((f for f in sorted(cases) if BASELINE.search(f)), None)
        for fid, mean in sorted(cases.items()):
            if fid == base:
                continue
            ratio = f"{mean / cases[base]:.2f}x" if base else "-"
            if markdown:
                print(f"| {group} | {value} | {fid} | {human(mean)} | {base or '-'} {human(cases[base]) if base else ''} | {ratio} |")
            else:
                print(f"{group:32} {value:>8} {fid:28} {human(mean):>10}  vs {base or '-':22} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
