#!/usr/bin/env python3
"""Puts model files into the page cache as a device that has just started finds them.

    bench/page_cache.py FILE...

Each file is written back (fdatasync), dropped from the page cache (POSIX_FADV_DONTNEED)
and read back through a mapping, so every engine measured afterwards maps the same
page-cache folios, whoever wrote the file and however (bench/EXPERIMENTS.md, "Huge pages"). A file
written in small or unaligned pieces stays in 4 KiB folios until it is dropped; read back,
it is held in large ones (up to 2 MiB on recent kernels: ext4 on Linux 6.18 here), which a
mapping maps with 2 MiB pages, and one core then reads it 1.2-1.4x faster. Prints, per file, how much of
the reading mapping had 2 MiB pages (smaps' FilePmdMapped).
"""
import mmap
import os
import sys


def huge_mapped_bytes(path):
    """Bytes of this process's mapping of `path` (it has one at a time) mapped with 2 MiB
    pages: smaps' FilePmdMapped, or ShmemPmdMapped for a file on tmpfs."""
    ours, huge = False, 0
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split(None, 5)  # the 6th field, a mapping's path, may hold spaces
            if fields and "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's first line
                ours = len(fields) == 6 and fields[5].rstrip("\n").removesuffix(" (deleted)") == path
            elif ours and fields and fields[0] in ("FilePmdMapped:", "ShmemPmdMapped:"):
                huge += int(fields[1]) * 1024
    return huge


def recache(path):
    path = os.path.realpath(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        size = os.fstat(fd).st_size
        if size == 0:
            print(f"{path}: empty")
            return
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as m:
            if hasattr(mmap, "MADV_HUGEPAGE"):
                m.madvise(mmap.MADV_HUGEPAGE)
            for at in range(0, size, 4096):
                m[at]
            huge = huge_mapped_bytes(path)
    finally:
        os.close(fd)
    print(f"{path}: {size / 2**20:.1f} MiB, {huge / 2**20:.0f} MiB of it mapped with 2 MiB pages")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip())
        sys.exit(2)
    for path in sys.argv[1:]:
        recache(path)
