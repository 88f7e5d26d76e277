#!/usr/bin/env python3
"""Per-operation figures from a `MQ_BENCH_PERF=DIR cargo bench --bench table` run.

    python3 benches/results/profiles/summarize.py DIR [ROLE]

One Markdown row per cell and process: user and system CPU µs per operation
(from /proc, so they include perf's own overhead on the watched process:
compare runs made the same way), context switches, syscalls and libc
allocation calls (malloc + calloc + realloc, counted by uprobes) per
operation, and the syscalls that dominate.
"""
import glob, os, sys

def read_stat(path):
    counts = {}
    for line in open(path):
        parts = line.strip().split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        value, event = parts[0], parts[2]
        try:
            counts[event] = float(value)
        except ValueError:
            counts[event] = 0.0
    return counts

def read_cpu(path):
    out = {}
    for line in open(path):
        k, v = line.split()
        out[k] = int(v)
    return out

def main():
    d = sys.argv[1]
    role = sys.argv[2] if len(sys.argv) > 2 else None
    print("| cell | process | user µs/op | sys µs/op | ctx switches/op | syscalls/op | allocs/op | top syscalls per op |")
    print("|---|---|--:|--:|--:|--:|--:|---|")
    for stat in sorted(glob.glob(os.path.join(d, "*.stat"))):
        base = stat[:-5]
        cell, proc = base.rsplit("__", 1)
        if role and proc != role:
            continue
        if not os.path.exists(base + ".cpu"):
            continue
        cpu = read_cpu(base + ".cpu")
        ops = max(cpu["ops"], 1)
        tick_us = 1e6 / cpu["ticks_per_sec"]
        c = read_stat(stat)
        allocs = sum(v for k, v in c.items() if k.startswith("probe_libc:"))
        sys_named = sorted(((v, k.split("sys_enter_")[1]) for k, v in c.items()
                            if k.startswith("syscalls:sys_enter_") and v > 0), reverse=True)
        top = ", ".join(f"{k} {v/ops:.1f}" for v, k in sys_named[:5])
        print(f"| {os.path.basename(cell)} | {proc} | {cpu['utime_ticks']*tick_us/ops:.1f} | "
              f"{cpu['stime_ticks']*tick_us/ops:.1f} | {c.get('context-switches',0)/ops:.2f} | "
              f"{c.get('raw_syscalls:sys_enter',0)/ops:.1f} | {allocs/ops:.1f} | {top} |")

main()
