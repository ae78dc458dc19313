#!/usr/bin/env python3
"""Converts one image folder with each write method in turn (convert --write-method), side
by side, into each destination directory given: the A/B behind docs/DESIGN.md's "writes
through a mapping" figures and the file systems `auto` maps on.

For every directory, round and thread count, `write` and `map` run one after the other, the
order turning each round. A line per conversion: images/s on the pipeline's own seconds
(`--json`), the write stage's thread-ms an image, and the process's CPU an image (user +
system from the child's rusage; system apart). With --idle S each conversion waits S
seconds first, so that a host that takes free memory back (free page reporting) has taken
the last conversion's pages. With --folios the shards of every conversion are read by
`cold_read hints` after it, which prints how much of them a reader maps in 2 MiB entries
(FilePmdMapped): how big the folios are that the method left in the page cache.

Runs with any Python 3 (standard library only). Usage:
  python3 bench/write_methods.py SRC DIR [DIR ...] [--threads 1,2] [--rounds 3]
      [--idle 0] [--size 256x256] [--folios] [--shardpack build/tools/shardpack]
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time


def child_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def convert(args, src, dst, threads, method):
    shutil.rmtree(dst, ignore_errors=True)
    if args.idle > 0:
        time.sleep(args.idle)
    user0, sys0 = child_cpu()
    run = subprocess.run(
        [args.shardpack, "convert", src, dst, "--size", args.size, "--fit", "crop",
         "--threads", str(threads), "--write-method", method, "--json", "--quiet"],
        stdout=subprocess.PIPE, check=True)
    user1, sys1 = child_cpu()
    summary = json.loads(run.stdout)
    if summary["write_method"] != method:
        sys.exit(f"write_methods: asked for {method}, the converter used "
                 f"{summary['write_method']}")
    images = summary["written"]
    stages = summary["stages"]
    line = (f"{images / stages['pipeline']:6.0f} img/s  "
            f"write {1000 * stages['write'] / images:.3f} ms/img  "
            f"process CPU {1000 * (user1 - user0 + sys1 - sys0) / images:.3f} ms/img "
            f"(sys {1000 * (sys1 - sys0) / images:.3f})")
    if args.folios:
        line += "  " + folios(args, dst)
    return line


def folios(args, dst):
    """FilePmdMapped of a reader of dst's shards (cold_read hints, one epoch)."""
    out = subprocess.run([args.cold_read, "hints", dst, "2", "8", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         check=True).stdout
    found = re.search(r"FilePmdMapped[^\n]*", out)
    return found.group(0) if found else "FilePmdMapped: not printed"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=0.0)
    parser.add_argument("--size", default="256x256")
    parser.add_argument("--folios", action="store_true")
    parser.add_argument("--shardpack", default="build/tools/shardpack")
    parser.add_argument("--cold-read", dest="cold_read", default="build/bench/cold_read")
    args = parser.parse_args()
    methods = ["write", "map"]
    for directory in args.dirs:
        fs = subprocess.run(["df", "--output=fstype", directory], stdout=subprocess.PIPE,
                            text=True, check=True).stdout.split()[-1]
        print(f"### {directory} ({fs}): {args.src} to {args.size} crop, "
              f"{args.rounds} rounds, idle {args.idle:g} s", flush=True)
        dst = os.path.join(directory, "write-methods")
        for r in range(1, args.rounds + 1):
            for threads in [int(t) for t in args.threads.split(",")]:
                order = methods if r % 2 else methods[::-1]
                for method in order:
                    line = convert(args, args.src, dst, threads, method)
                    print(f"r{r} t={threads} {method:5s} {line}", flush=True)
        shutil.rmtree(dst, ignore_errors=True)


if __name__ == "__main__":
    main()
