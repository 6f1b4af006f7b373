"""Files that only the daemon's user can read, whatever the umask and whoever started it.

Folders the daemon creates are 0700 and its files 0600 (the umask can only take bits away, so
each is set explicitly as well). A path another user of the host could have planted is refused,
never followed: a symbolic link, a hard link, a FIFO or device, a file or folder of another
user's, a folder others may write to. Stdlib only: the ledger, the locks and the evidence
folders all stand on it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


class UnsafePath(Exception):
    """A path that another user could have put there: its message says what and what to do."""


def private_folder(path: Path) -> Path:
    """`path` as a folder, each missing level created 0700 (existing ones are left alone)."""
    missing: list[Path] = []
    level = path
    while not os.path.lexists(level) and level != level.parent:
        missing.append(level)
        level = level.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, FOLDER_MODE)
        except FileExistsError:
            continue  # made by someone else meanwhile: checked by whoever needs it to be ours
        os.chmod(folder, FOLDER_MODE)  # exact, even under a umask that takes the owner's bits
    return path


def owned_folder(path: Path, what: str) -> Path:
    """`path` as a folder of this user's that nobody else can write to (created 0700 where
    missing); UnsafePath for a symbolic link, something else than a folder, another user's
    folder, or one that others may write to."""
    private_folder(path)
    info = os.lstat(path)
    fix = f"point {what} at a folder of your own"
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{what} {path} is a symbolic link: refused; {fix}")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(f"{what} {path} is not a folder; {fix}")
    if info.st_uid != os.geteuid():
        raise UnsafePath(
            f"{what} {path} belongs to another user (uid {info.st_uid}), who could plant files "
            f"in it: refused; {fix}"
        )
    if info.st_mode & 0o022:
        raise UnsafePath(
            f"{what} {path} can be written by other users (mode {stat.S_IMODE(info.st_mode):04o})"
            f": refused; `chmod 700 {path}`, or {fix}"
        )
    return path


def _refusal(info: os.stat_result) -> str | None:
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a FIFO, a device or a folder)"
    if info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid})"
    if info.st_nlink != 1:
        return f"has {info.st_nlink} hard links (another name could be watching it)"
    return None


def open_private(path: Path, *, create: bool = True) -> int:
    """A descriptor reading and writing `path`, a regular file of this user's with one link,
    created 0600 if missing (an existing one loses any group and other bits). Never follows a
    symbolic link; UnsafePath for one, a hard link, a FIFO or device, or another user's file.
    FileNotFoundError when `create` is False and there is nothing there."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags | (os.O_CREAT if create else 0), FILE_MODE)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafePath(f"{path} is a symbolic link: refused, never followed") from None
        raise
    try:
        info = os.fstat(descriptor)
        refusal = _refusal(info)
        if refusal is not None:
            raise UnsafePath(f"{path} {refusal}: refused; remove it if it is not yours")
        if stat.S_IMODE(info.st_mode) != FILE_MODE:
            os.fchmod(descriptor, FILE_MODE)
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def write_private(path: Path, text: str) -> None:
    """`text` as the whole of file `path`, 0600, in a folder created 0700 where missing."""
    private_folder(path.parent)
    descriptor = open_private(path)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.truncate()
        handle.write(text)


def restrict(path: Path) -> bool:
    """Take group and other bits off an existing file of this user's (one an older version or a
    looser umask left readable); True when it had any. Other users' files are left alone."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    if info.st_uid != os.geteuid() or not info.st_mode & 0o077:
        return False
    os.chmod(path, stat.S_IMODE(info.st_mode) & FOLDER_MODE)
    return True
