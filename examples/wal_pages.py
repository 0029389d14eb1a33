"""Which tables and indexes the gateway's SQLite commits write: each WAL frame's page, named by the
table or index it belongs to, per command. Standard library and the `sqlite3` shell only; used by
hand for the profiles in docs/BENCHMARKS.md (never by a test).

SQLite writes each WAL frame as two `pwrite` calls, its 24-byte header (the page's number in its
first four bytes) and its page; strace shows the first bytes of each buffer:

    strace -f -y -xx -s 4 -e trace=pwrite64,fsync,fdatasync -p <gateway pid> -o run.trace
    (send the commands, stop strace)
    python3 examples/wal_pages.py run.trace --data <the folder of chatgate.db> --commands 100

The pages are named from the database as it is afterwards (`dbstat`): run it before anything
vacuums the files. Frames of pages that no longer exist read `?`.
"""

import argparse
import collections
import pathlib
import re
import subprocess

CALL = re.compile(r'^\d+ (pwrite64|fsync|fdatasync)\(\d+<([^>]*)>(?:, "([^"]*)"(?:\.\.\.)?, (\d+), \d+)?')


def unescaped(text):
    """The bytes strace's `-xx` wrote as `\\xNN`."""
    return bytes(int(pair, 16) for pair in re.findall(r"\\x([0-9a-f]{2})", text))


def read(trace):
    """Per file: its frames' page numbers, its writes by size and its fsyncs."""
    frames, writes, syncs = collections.defaultdict(list), collections.Counter(), collections.Counter()
    for line in trace:
        found = CALL.match(line)
        if not found:
            continue
        call, path, buffer, size = found.groups()
        name = unescaped(path).decode(errors="replace").rsplit("/", 1)[-1]
        if call != "pwrite64":
            syncs[name] += 1
            continue
        writes[(name, int(size))] += 1
        if name.endswith("-wal") and int(size) == 24:
            frames[name].append(int.from_bytes(unescaped(buffer)[:4], "big"))
    return frames, writes, syncs


def owners(database):
    """Each page of `database`: (the table or index it is in, the table that one belongs to)."""
    query = (
        "SELECT d.pageno, d.name, COALESCE(m.tbl_name, d.name) FROM dbstat d "
        "LEFT JOIN sqlite_master m ON m.name = d.name"
    )
    out = subprocess.run(["sqlite3", str(database), query], capture_output=True, text=True, check=True).stdout
    pages = {}
    for row in out.splitlines():
        page, name, table = row.split("|")
        pages[int(page)] = (name, table)
    return pages


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--data", required=True, help="the folder of the database files")
    parser.add_argument("--commands", type=int, required=True, help="commands made while strace ran")
    args = parser.parse_args()
    with open(args.trace, encoding="utf-8", errors="replace") as trace:
        frames, writes, syncs = read(trace)
    per = float(args.commands)
    print("writes per command (file, bytes): " + ", ".join(f"{f} {s}: {n / per:.2f}" for (f, s), n in sorted(writes.items())))
    print("fsyncs per command: " + ", ".join(f"{f}: {n / per:.2f}" for f, n in sorted(syncs.items())))
    for wal, pages in sorted(frames.items()):
        named = owners(pathlib.Path(args.data) / wal.removesuffix("-wal"))
        # Each frame counted by (its table or index, the table that one belongs to).
        by_tree = collections.Counter(named.get(page, ("?", "?")) for page in pages)
        by_table = collections.Counter()
        for (_, table), count in by_tree.items():
            by_table[table] += count
        print(f"\n{wal}: {len(pages) / per:.1f} frames per command")
        for table, count in by_table.most_common():
            trees = [(tree, c) for (tree, owner), c in by_tree.most_common() if owner == table]
            detail = ", ".join(f"{tree} {c / per:.2f}" for tree, c in trees)
            print(f"  {count / per:6.2f}  {table}  ({detail})")


if __name__ == "__main__":
    main()
