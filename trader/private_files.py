"""Files that only the daemon's user can read, whatever the umask and whoever started it.

Folders the daemon creates are 0700 and its files 0600 (the umask can only take bits away, so
each is set explicitly as well). A path another user of the host could have planted is refused,
never followed: a symbolic link, a hard link, a FIFO or device, a file or folder of another
user's, a folder others may write to. Stdlib only: the ledger, the locks and the evidence
folders all stand on it.

Every other file the program writes (reports, plots, checkpoints, weights, evidence, caches)
goes through `replacing` / `write_file`: a new file beside the target, flushed to the disk,
then renamed over it, so a reader, a crash or a full disk sees the old file or the new one,
never half of one, and nothing is ever written through a link planted at the target. What is
private: all of it (0600 files in 0700 folders). Ledgers and checkpoints hold the account and
the model being trained, and a backtest's or evaluation's report holds a strategy's figures;
only market data downloaded from a public venue is written readable by others.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

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


def check_private_by_name(path: Path) -> None:
    """`path`, where something is there, checked as `open_private` checks it but by its name
    (lstat), never opened: for a file another connection of this process holds locks on, which
    closing any descriptor of it would drop (SQLite's POSIX locks). Its mode is made 0600."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{path} is a symbolic link: refused, never followed")
    refusal = _refusal(info)
    if refusal is not None:
        raise UnsafePath(f"{path} {refusal}: refused; remove it if it is not yours")
    if stat.S_IMODE(info.st_mode) != FILE_MODE:
        os.chmod(path, FILE_MODE)


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
    write_file(path, text)


class NotWritable(Exception):
    """An output folder that cannot take the files: a file is there, or it cannot be written."""


def usable_folder(path: Path, what: str) -> None:
    """Before any work: refuse an output folder the files could not go into, creating nothing.
    UnsafePath for a link or a folder of another user's or that others may write to (as
    `owned_folder`); NotWritable for a file in its place or one this user cannot write."""
    if not os.path.lexists(path):
        level = path.parent
        while not os.path.lexists(level) and level != level.parent:
            level = level.parent
        if not level.is_dir():
            raise NotWritable(f"{what} {path}: {level} is not a folder; choose another {what}")
        if not os.access(level, os.W_OK | os.X_OK):
            raise NotWritable(f"{what} {path} cannot be created: {level} is not writable")
        return
    info = os.lstat(path)
    if not stat.S_ISLNK(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        raise NotWritable(f"{what} {path} is a file, not a folder; choose another {what}")
    owned_folder(path, what)
    if not os.access(path, os.W_OK | os.X_OK):
        mode = stat.S_IMODE(info.st_mode)
        raise NotWritable(f"{what} {path} is not writable (mode {mode:04o}); `chmod 700 {path}`")


def _writable_folder(folder: Path, what: str) -> None:
    """`folder` (created 0700 where missing) as one a file may be renamed into: this user's
    own that nobody else writes to, or a shared one with the sticky bit (/tmp), where nobody
    can rename over or remove another user's file."""
    private_folder(folder)
    info = os.stat(folder)  # levels above it may be links: the one named is checked below
    if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX:
        if os.path.islink(folder):
            raise UnsafePath(f"{what} {folder} is a symbolic link: refused, never followed")
        return
    owned_folder(folder, what)


def _target_refusal(path: Path) -> str | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link: refused, neither followed nor replaced"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a FIFO, a device or a folder)"
    if info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid})"
    return None


def _create(path: Path, mode: int) -> IO[bytes]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(path, flags, mode)
    try:
        os.fchmod(descriptor, mode)  # exact, whatever the umask
        return os.fdopen(descriptor, "wb")
    except BaseException:
        os.close(descriptor)
        raise


def create_private(path: Path) -> IO[bytes]:
    """A new file at `path` (none may be there, not even a link), 0600, open for writing."""
    return _create(path, FILE_MODE)


@contextmanager
def replacing(
    path: Path,
    *,
    what: str = "the folder",
    mode: int = FILE_MODE,
    opener: Callable[[Path], IO[bytes]] | None = None,
) -> Iterator[IO[bytes]]:
    """A handle on a new file that becomes `path` whole when the block ends without an error
    (flushed to the disk, renamed over `path`, the rename itself synced); on an error the new
    file is removed and `path` is as it was. UnsafePath for a link, a FIFO, a folder or another
    user's file at `path`, or a link or a folder others may write to in place of its folder
    (named `what` in the message); OSError where the disk refuses. The new file is `mode`
    (0600 unless the content is public: downloaded market data); `opener` creates it instead
    (a test swaps in a disk that fills up)."""
    _writable_folder(path.parent, what)
    refusal = _target_refusal(path)
    if refusal is not None:
        raise UnsafePath(f"{path} {refusal}; remove it if it is not yours")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with (opener or (lambda new: _create(new, mode)))(temporary) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)  # replaces a name, never writes through one
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)  # the rename survives a power cut
    finally:
        os.close(folder)


def write_file(
    path: Path, content: str | bytes, *, what: str = "the folder", mode: int = FILE_MODE
) -> Path:
    """`content` (text as UTF-8) as the whole of `path`, atomically, through `replacing`;
    `mode` 0600 unless the content is public (downloaded market data)."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    with replacing(path, what=what, mode=mode) as handle:
        handle.write(data)
    return path


def append_private(path: Path, text: str) -> None:
    """`text` added at the end of `path` (created 0600 where missing, its folder as for
    `replacing`): a log that grows as a run goes, never written through a link."""
    _writable_folder(path.parent, "the folder")
    descriptor = open_private(path)
    with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
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
