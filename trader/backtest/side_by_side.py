"""A backtest's strategies side by side: each strategy's run in a worker process of its own, at
most `workers` at a time, forked from the backtest's process so that it starts with everything
that process prepared (the recordings judged, the data step's plan, the forecasts read from the
cache) and copies none of it. Each run is the one the process would have made itself
(`session.simulate`, deterministic, its own ledger file); only its result comes back.

Forking is refused where it is unsafe or unavailable, and the runs then follow one another in
this process (`fork_refusal` says why): no fork on this platform, or a CUDA context in this
process (a forked child cannot use it; a forecast the cache lacks would then fail in the
child and change the figures). Locks another thread may hold at the fork (tqdm's, taken by
its monitor thread) are held by this thread across it, so the child never inherits one
locked.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, TypeVar, cast

from tqdm import tqdm

T = TypeVar("T")


class ChildFailed(RuntimeError):
    """A worker died, or its run raised what could not be sent back; the message says which."""


def fork_refusal() -> str | None:
    """Why this process must not fork its runs (None: it may)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return "this platform cannot fork"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "a CUDA context is open in this process"
    return None


@contextmanager
def forking() -> Iterator[None]:
    """Around a fork: tqdm's lock is held by this thread, so that the child never inherits
    it locked (see the module's note); the objects made so far are left out of the cyclic
    collector's passes (`gc.freeze`), so that a child's collections neither walk them nor
    copy the memory they are in."""
    gc.freeze()
    try:
        with tqdm.get_lock():
            yield
    finally:
        gc.unfreeze()


def default_workers(runs: int) -> int:
    """A worker for every run, up to twice the cores: the system shares the cores among them,
    so no long run waits behind short ones (their lengths are not known ahead, and run one
    after another in a fixed order, a long one last could double the wall time). Two at
    least where there are several cores, so that a single run goes to a worker too, while
    this process does its own work (`run_side_by_side`'s `while_waiting`)."""
    cores = os.cpu_count() or 1
    return max(min(2, cores), min(runs, 2 * cores))


class _Child(Generic[T]):
    """One run in a forked process, its result sent back through a pipe."""

    def __init__(self, index: int, task: Callable[[], T], niceness: int = 0) -> None:
        self.index = index
        context = multiprocessing.get_context("fork")
        self.receive, send = context.Pipe(duplex=False)
        self.process = context.Process(target=_serve, args=(task, send, niceness), daemon=True)
        with forking():
            self.process.start()
        send.close()  # the child's end: EOF here once the child has gone

    def stop(self) -> None:
        """End the worker, its run unfinished."""
        self.process.terminate()
        self.process.join()
        self.receive.close()

    def result(self) -> T:
        try:
            kind, payload = self.receive.recv()
        except EOFError:
            self.process.join()
            raise ChildFailed(
                f"a worker process ended with code {self.process.exitcode}, its run unfinished"
            ) from None
        finally:
            self.receive.close()
        self.process.join()
        if kind == "error":
            error, text = payload
            if error is None:
                raise ChildFailed(text)
            error.add_note(f"in the worker process:\n{text}")
            raise error
        result: T = payload
        return result


def _serve(task: Callable[[], Any], send: Connection, niceness: int) -> None:
    if niceness:
        os.nice(niceness)  # only ever lowered: any process may
    try:
        outcome: tuple[str, Any] = ("ok", task())
    except BaseException as error:  # handed to the parent, which raises it
        outcome = ("error", (error, traceback.format_exc()))
    try:
        send.send(outcome)
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        text = outcome[1][1] if outcome[0] == "error" else ""
        why = f"what the run ended with could not be sent back ({error})"
        send.send(("error", (None, f"{why}\n{text}")))
    send.close()


def run_side_by_side(
    tasks: Sequence[Callable[[], T]],
    workers: int,
    *,
    while_waiting: Callable[[], object] | None = None,
    on_done: Callable[[int], object] | None = None,
    niceness: Sequence[int] | None = None,
) -> list[T]:
    """Each task's result, in the tasks' order, each task run in a forked child, `workers` at
    a time. `while_waiting`: work for this process once the first children have started
    (it would otherwise sit idle); `on_done(i)`: told as task i's result arrives;
    `niceness[i]`: how much lower task i's child runs than this process (0: as this one).
    A task that fails raises what it raised (or `ChildFailed`) once the children running
    have ended."""
    results: dict[int, T] = {}
    failures: list[BaseException] = []
    lower = list(niceness) if niceness is not None else [0] * len(tasks)
    queue = [(i, task, lower[i]) for i, task in enumerate(tasks)]
    running: dict[Connection, _Child[T]] = {}  # by the pipe its result comes through

    def start() -> None:
        while queue and len(running) < max(1, workers):
            child = _Child(*queue.pop(0))
            running[child.receive] = child

    try:
        start()
        if while_waiting is not None:
            while_waiting()
        while running:
            for ready in wait(list(running)):
                child = running.pop(cast(Connection, ready))  # the pipes were all it waited on
                try:
                    results[child.index] = child.result()
                except BaseException as error:  # raised once the children running have ended
                    failures.append(error)
                    queue.clear()  # start nothing more
                else:
                    if on_done is not None:
                        on_done(child.index)
            start()
    finally:  # this process failed or was interrupted: no worker outlives it
        for child in running.values():
            child.stop()
    if failures:
        raise failures[0]
    return [results[i] for i in range(len(tasks))]
