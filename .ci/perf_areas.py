#!/usr/bin/env python3
"""Where the server's CPU goes, on the real CPU (`BENCH_PERF=1 npm run bench`).

Reads `perf script -F comm,period,ip,sym` of the server sampled on `cpu-clock`, with call
stacks, over a span where it served COUNT of something (the granted storm and its
saving: granted grabs; the pages at 64 connections: pages), and prints µs of server CPU
per one for each area below, each sample weighing its period (the CPU time it stands
for, whatever rate the kernel let perf sample at). Each sample goes to the first area
whose rule its stack meets, and within the HTTP connections' share to the part named by
its innermost frame that some rule meets. Unlike callgrind it counts the kernel, and
SHA-256 runs on the CPU's own instructions. The release build has no debug info: code
the compiler inlined counts where it was inlined.

With PERF_TOP=N in the environment it also lists the N functions that ran most
themselves (the innermost frame of each sample, user space and kernel apart): where a
cost that grows with the serving threads (a lock waited on, a line of memory two cores
share) shows, whatever area it falls in.

usage: perf_areas.py PERF_SCRIPT_OUTPUT COUNT WHAT   (WHAT: "granted grab", "cached shop page")
"""

import collections
import os
import sys

# (area, rule): a rule is a thread-name prefix ("comm:") or a frame substring.
AREAS = [
    ("SQLite's threads (saving the orders)", "comm:sqlx-sqlite"),
    ("the worker (reading the stream, saving, settling)", "seckill::worker::"),
    ("HTTP connections (below)", "Connections::serve"),
    ("Redis connections (commands written, replies parsed)", "redis::aio::"),
    ("Redis connections (commands written, replies parsed)", "redis::cluster_async::"),
    ("gate calls gathered (sale::batches)", "seckill::sale::batches"),
    ("the runtimes waiting and waking (epoll, futex, scheduler)", "::park"),
    ("the runtimes waiting and waking (epoll, futex, scheduler)", "epoll_wait"),
    ("the runtimes waiting and waking (epoll, futex, scheduler)", "futex_wait"),
    ("the runtimes waiting and waking (epoll, futex, scheduler)", "futex_wake"),
]

# Parts of the HTTP connections' share, by the innermost frame that names one.
PARTS = [
    ("the answer written (writev: the kernel's TCP, loopback delivery included)", "writev"),
    ("the request read (the kernel's recv)", "tcp_recvmsg"),
    ("the request read (the kernel's recv)", "ksys_read"),
    ("the session cookie checked (auth::session)", "seckill::auth::session"),
    ("the front door (server::api_guard, access, rate limits, metrics)", "seckill::server::api_guard"),
    ("the front door (server::api_guard, access, rate limits, metrics)", "seckill::server::access"),
    ("the front door (server::api_guard, access, rate limits, metrics)", "seckill::server::rate_limit"),
    ("the front door (server::api_guard, access, rate limits, metrics)", "seckill::server::monitoring"),
    ("the grab (sale::grab, sale::hot_path, receipts)", "seckill::sale::"),
    ("the shop page's shared render served (server::page_cache)", "seckill::server::page_cache"),
    ("hyper, axum and tower (HTTP/1 parsed and written, routed)", "hyper::"),
    ("hyper, axum and tower (HTTP/1 parsed and written, routed)", "httparse"),
    ("serde_json", "serde_json"),
    ("the allocator", "mi_"),
]


def samples(path):
    """(thread name, ns of CPU, frames innermost first, whether it ran in the kernel)
    per sample."""
    comm, ns, frames, kernel = None, 0, [], False
    with open(path, errors="replace") as lines:
        for line in lines:
            if not line.strip():
                if comm is not None:
                    yield comm, ns, frames, kernel
                comm, frames = None, []
            elif not line[0].isspace():
                comm, period = line.strip().rsplit(None, 1)
                ns, frames, kernel = int(period), [], False
            else:
                parts = line.split(None, 1)
                if not frames:
                    kernel = parts[0].startswith("ffffffff")
                frames.append(parts[1].strip() if len(parts) > 1 else "?")
    if comm is not None:
        yield comm, ns, frames, kernel


def meets(rule, comm, frames):
    if rule.startswith("comm:"):
        return comm.startswith(rule[5:])
    return any(rule in f for f in frames)


def main():
    path, count, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    areas, parts, own, n = collections.Counter(), collections.Counter(), collections.Counter(), 0
    for comm, ns, frames, kernel in samples(path):
        n += 1
        own[((frames[0] if frames else "?")[:110], kernel)] += ns
        area = next((a for a, rule in AREAS if meets(rule, comm, frames)), "other")
        areas[(area, kernel)] += ns
        if area.startswith("HTTP"):
            part = next((p for f in frames for p, rule in PARTS if rule in f), "tokio and the rest")
            parts[(part, kernel)] += ns

    def lines(counts):
        """(µs, µs in the kernel, name), largest first."""
        names = {name for name, _ in counts}
        rows = [(counts[(n, False)] + counts[(n, True)], counts[(n, True)], n) for n in names]
        return sorted(rows, reverse=True)

    us = lambda ns: ns / 1e3 / count  # noqa: E731
    total, in_kernel = sum(areas.values()), sum(ns for (_, k), ns in areas.items() if k)
    print(f"server CPU per {what} by area (perf, {n} samples, {total / 1e9:.2f} s of CPU, {count} of them):")
    print(f"  {us(total):5.1f} µs in all ({us(in_kernel):.1f} in the kernel)")
    for n, k, area in lines(areas):
        print(f"  {us(n):5.1f} µs ({us(k):4.1f} kernel)  {area}")
        if area.startswith("HTTP"):
            for m, j, part in lines(parts):
                print(f"          {us(m):5.1f} µs ({us(j):4.1f} kernel)  {part}")
    top = int(os.environ.get("PERF_TOP") or 0)
    if top > 0:
        print(f"  the {top} functions that ran most themselves (µs per {what}; k: in the kernel):")
        for (name, kernel), ns in own.most_common(top):
            print(f"  {us(ns):5.2f} µs {'k' if kernel else ' '} {name}")


if __name__ == "__main__":
    main()
