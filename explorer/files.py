"""Reading a file the user named: a regular file of bounded size, or one clear sentence.

The kind and size are checked before opening: opening a named pipe waits for a writer, and a
device or a huge file would be read without end (issue 15). Callers turn ``UserFileError``
into their own error type (ConfigError, CalibrationError, RecipeError).
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path


class UserFileError(ValueError):
    """A file that cannot be read as asked; the message is one sentence for a person."""


def _kind_of_file(mode: int) -> str:
    """What a non-regular file is, in words."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def read_user_file(path: str | Path, what: str, max_bytes: int, *, hint: str = "") -> bytes:
    """The bytes of the regular file at ``path`` (at most ``max_bytes``); ``what`` names the
    expected content in the sentence (``"a config.json"``); ``hint`` follows a directory's."""
    path = Path(path)
    try:
        info = path.stat()
    except OSError as error:
        raise UserFileError(f"cannot read '{path}': {error.strerror or error}.") from None
    if not stat.S_ISREG(info.st_mode):
        extra = hint if stat.S_ISDIR(info.st_mode) else ""
        raise UserFileError(f"'{path}' is {_kind_of_file(info.st_mode)}, not {what}{extra}.")
    if info.st_size > max_bytes:
        raise UserFileError(
            f"'{path}' is {info.st_size:,} bytes; this tool reads {what} of at most "
            f"{max_bytes:,} bytes."
        )
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as error:
        raise UserFileError(f"cannot read '{path}': {error.strerror or error}.") from None
    if len(data) > max_bytes:  # the file grew since stat
        raise UserFileError(f"'{path}' is over {max_bytes:,} bytes, the most this tool reads.")
    return data


def read_user_text(path: str, what: str, max_bytes: int) -> str:
    """The UTF-8 text of the file at ``path``, or of standard input for ``-`` (same bound)."""
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)  # a text stream without one in tests
        data = stream.read(max_bytes + 1) if stream else sys.stdin.read(max_bytes + 1).encode()
        if len(data) > max_bytes:
            raise UserFileError(f"standard input is over {max_bytes:,} bytes, too long for {what}.")
    else:
        data = read_user_file(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserFileError(f"'{path}' is not UTF-8 text, so it cannot be {what}.") from None
