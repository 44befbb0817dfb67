"""Reading input files for the CLI, within a size limit (``--max-file-bytes``).

``queuetree session`` and ``queuetree review`` parse YAML in pure Python, which takes about fifty
times a file's size in memory: a huge file (or a stream that never ends on stdin) must be
refused by its size, with a message naming it and the flag, before it is read.
"""

from __future__ import annotations

import argparse
import os
from typing import BinaryIO, Final

from queuetree.cli import flags

MAX_FILE_BYTES: Final = 32 * 1024 * 1024
"""Default of ``--max-file-bytes``: room for tens of thousands of pods in one file."""


class TooLarge(Exception):
    """A file above the limit; the message names it, its size and the flag."""


def add_max_file_bytes_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-file-bytes",
        type=flags.positive_int,
        default=MAX_FILE_BYTES,
        metavar="BYTES",
        help=f"largest input file read; larger ones are refused unread (default {MAX_FILE_BYTES})",
    )


def read_bytes(path: str, *, limit: int, stdin: BinaryIO) -> bytes:
    """The bytes of ``path`` (``-``: ``stdin``), or :class:`TooLarge` when it has more than
    ``limit``; OSError when it cannot be read. A regular file's size is checked before reading;
    a pipe is read no further than one byte past the limit."""
    if path == "-":
        data = stdin.read(limit + 1)
        if len(data) > limit:
            raise TooLarge(_too_large("standard input", f"more than {limit}", limit))
        return data
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise TooLarge(_too_large(path, str(size), limit))
        data = file.read(limit + 1)
    if len(data) > limit:  # not a regular file, or one that grew while being read
        raise TooLarge(_too_large(path, f"more than {limit}", limit))
    return data


def _too_large(name: str, size: str, limit: int) -> str:
    return (
        f"{name}: {size} bytes, more than the limit of {limit} (--max-file-bytes): "
        "split the file or raise the limit"
    )
