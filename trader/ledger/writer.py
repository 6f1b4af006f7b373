"""A backtest ledger's writer: a small process of its own that writes the statements the run
hands it, chunk after chunk, while the run goes on (`buffered.BufferedDatabase`).

The run's process only serialises each chunk (its rows are plain strings and numbers: `marshal`,
several times faster than pickle at them, between two processes of one interpreter) and sends
it down a pipe; the SQLite work, most of writing a ledger, runs on another core. Each chunk is
one transaction, in the order sent. The writer answers once, when its input ends: "ok", or
the error that stopped it (the run then fails, as it would had it written the rows itself).

The writer runs this file as a script (`python -I writer.py LEDGER`: the standard library
only, so it starts in a few hundredths of a second); the run's side is `WriterProcess`.
"""

from __future__ import annotations

import contextlib
import marshal
import queue
import sqlite3
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import IO, Any

# Each frame: its length (8 bytes, big-endian), then a marshalled chunk; length 0 ends the input.
HEADER = struct.Struct(">Q")
Chunk = list[tuple[str, list[Any]]]  # (statement, its rows), in the order to run them


def frame(chunk: Chunk) -> bytes:
    body = marshal.dumps(chunk)
    return HEADER.pack(len(body)) + body


END = HEADER.pack(0)


def _frames(stream: IO[bytes]) -> Iterator[bytes]:
    while header := stream.read(HEADER.size):
        (size,) = HEADER.unpack(header)
        if size == 0:
            return
        yield stream.read(size)
    raise EOFError("the run ended without finishing its ledger")


def write(path: str, stream: IO[bytes]) -> None:
    """Every chunk read from `stream` into the ledger at `path`, one transaction each."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA synchronous=OFF")  # a backtest's ledger: a re-run rebuilds it
    connection.execute("PRAGMA foreign_keys=ON")
    connection.execute("PRAGMA busy_timeout=5000")
    try:
        for body in _frames(stream):
            chunk: Chunk = marshal.loads(body)  # noqa: S302 - sent by the run that started us
            connection.execute("BEGIN IMMEDIATE")
            try:
                for sql, rows in chunk:
                    connection.executemany(sql, rows)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
    finally:
        connection.close()


class WriterProcess:
    """The run's side: chunks sent from a thread of their own (serialised there, and its wait
    on a full pipe never holds up the run), and the writer's answer at `finish`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._process = subprocess.Popen(  # noqa: S603 - this file, with this interpreter
            [sys.executable, "-I", __file__, path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._chunks: queue.Queue[Chunk | None] = queue.Queue()
        self._unsent: Exception | None = None  # a chunk that could not be serialised
        self._sender = threading.Thread(target=self._send, name="ledger-writer", daemon=True)
        self._sender.start()

    def send(self, chunk: Chunk) -> None:
        self._chunks.put(chunk)

    def _send(self) -> None:
        pipe = self._process.stdin
        assert pipe is not None
        try:
            while (chunk := self._chunks.get()) is not None:
                pipe.write(frame(chunk))
            pipe.write(END)
        except ValueError as error:  # a value no ledger column takes (a bug): the run fails
            self._unsent = error
        except OSError:  # the writer is gone: `finish` says why
            pass
        finally:
            with contextlib.suppress(OSError):
                pipe.close()  # the writer's input ends (without END: it writes no more)

    def finish(self) -> None:
        """Wait for every chunk sent to be written; WriterFailed if the writer could not."""
        answer = self._end().strip()
        if self._unsent is not None:
            raise WriterFailed(f"a chunk of rows could not be sent: {self._unsent}")
        if self._process.returncode != 0 or answer != "ok":
            raise WriterFailed(
                f"the ledger's writer ended with code {self._process.returncode}: "
                f"{answer[-500:] or 'no answer'}"
            )

    def stop(self) -> None:
        """End the writer, whatever it has not written (the run failed)."""
        self._process.kill()
        self._end()

    def _end(self) -> str:
        """The writer's answer, once it has ended (its input ended: nothing more is sent)."""
        self._chunks.put(None)
        self._sender.join()
        assert self._process.stdout is not None
        with self._process.stdout as out:
            answer = out.read().decode(errors="replace")
        self._process.wait()
        return answer


class WriterFailed(Exception):
    """The ledger's writer could not write what it was sent; the message says why."""


def main(argv: Sequence[str]) -> int:
    (path,) = argv
    try:
        write(path, sys.stdin.buffer)
    except Exception as error:  # told to the run, which fails with it
        sys.stdout.write(f"{type(error).__name__}: {error}\n")
        return 1
    sys.stdout.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
