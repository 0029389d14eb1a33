"""Where a profile's samples went, by frame: the share of the samples whose stack holds each frame
named on the command line (a frame counts once per sample, however deep it recurs), for the
threads whose name starts with a prefix. Standard library only; used by hand for the profiles in
docs/BENCHMARKS.md (never by a test).

    perf record -F 1000 --call-graph dwarf,32768 -o run.data -p <gateway pid> -- sleep 1.2
    perf script -i run.data -F comm,ip,sym > run.txt
    python3 examples/perf_frames.py run.txt --threads tokio-rt payload::parse inbox::write malloc

Without frames it prints the threads' shares of all the samples.
"""

import argparse
import collections
import re
import sys

OFFSET = re.compile(r"\+0x[0-9a-f]+$")


def samples(lines):
    """(thread name, frames from the leaf outwards) for each sample of `perf script` output."""
    thread, frames = None, []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if thread is not None:
                yield thread, frames
            thread, frames = None, []
        elif not line[0].isspace():
            thread, frames = line.split()[0], []
        else:
            parts = line.strip().split(None, 1)
            frames.append(OFFSET.sub("", parts[1]) if len(parts) > 1 else "?")
    if thread is not None:
        yield thread, frames


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", help="the output of `perf script -F comm,ip,sym`")
    parser.add_argument("frames", nargs="*", help="parts of frame names to count")
    parser.add_argument("--threads", default="", help="only the threads whose name starts with this")
    args = parser.parse_intermixed_args()
    total, by_frame, by_thread = 0, collections.Counter(), collections.Counter()
    with open(args.script, errors="replace") as script:
        for thread, frames in samples(script):
            if not thread.startswith(args.threads):
                continue
            total += 1
            by_thread[thread] += 1
            for wanted in args.frames:
                if any(wanted in frame for frame in frames):
                    by_frame[wanted] += 1
    if total == 0:
        sys.exit("no samples of those threads")
    print(f"{total} samples")
    shares = [(wanted, by_frame[wanted]) for wanted in args.frames] or by_thread.most_common()
    for name, count in shares:
        print(f"{100 * count / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
