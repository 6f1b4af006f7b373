"""Running a grid's trials: in this process (one job), in worker processes (`--jobs N`, all
cores by default), or as tasks on a Ray cluster (`--ray ADDRESS`); one progress bar for them
all (runs done of the grid's, and the time left at the pace so far).

Every trial is `trials.run_trial`, wherever it runs. Where this process holds what every run
reads (`trials.share`: a plain grid on one or two files), the workers are forked from it and
start with all of it in memory: nothing to import, read or prepare. Otherwise (more files, a
walk-forward's folds, forking unsafe here) they are spawned: each reads the data files and
the forecast cache from the paths in its jobs (the grid fills the cache before any starts, so
each reads the forecasts and computes none) and keeps them for its next runs.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from threadpoolctl import threadpool_limits
from tqdm import tqdm

from trader.backtest.grid import TrialJob
from trader.backtest.side_by_side import ChildFailed, fork_refusal, forking
from trader.backtest.trials import TrialResult, is_shared, run_trial

RAY_HINT = "pip install 'trader[ray]' (or pip install 'ray>=2.40') on every machine of the cluster"


class RayUnavailable(Exception):
    """--ray was asked for and Ray cannot be used; the message says why and how to get it."""


def run_jobs(
    jobs: Sequence[TrialJob],
    *,
    workers: int,
    ray_address: str | None = None,
    progress: bool | None = None,
) -> list[TrialResult]:
    """Every job's result, in the jobs' order."""
    bar = tqdm(
        total=len(jobs), unit="run", desc="grid", disable=None if progress is None else not progress
    )
    with bar:
        if ray_address is not None:
            return _on_ray(jobs, ray_address, bar.update)
        if workers <= 1 or len(jobs) <= 1:
            results = []
            for job in jobs:
                results.append(run_trial(job))
                bar.update(1)
            return results
        return _in_processes(jobs, workers, bar.update)


def _in_processes(
    jobs: Sequence[TrialJob], workers: int, done: Callable[[int], object]
) -> list[TrialResult]:
    # Forked workers start with what this process holds for the runs (`trials.share`);
    # spawned ones, where it holds less or forking is unsafe (`fork_refusal`), start afresh.
    forked = fork_refusal() is None and all(is_shared(job) for job in jobs)
    context = multiprocessing.get_context("fork" if forked else "spawn")
    results: list[TrialResult | None] = [None] * len(jobs)
    with ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)), mp_context=context, initializer=_one_blas_thread
    ) as pool:
        try:
            with forking():  # a forking pool starts its workers on the first submit
                futures = {pool.submit(run_trial, job): i for i, job in enumerate(jobs)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                done(1)
        except BrokenProcessPool:  # a worker was killed (out of memory?): the pool is lost
            # The pool ends its other workers itself, but not one it was starting meanwhile
            # (a worker died while the others started), and would then wait for that one
            # forever on leaving the `with`.
            for worker in multiprocessing.active_children():
                worker.kill()
            raise ChildFailed(
                "a worker process ended abruptly (killed, or out of memory?), "
                f"{sum(r is None for r in results)} of the grid's {len(jobs)} runs unfinished"
            ) from None
    return [r for r in results if r is not None]


def _one_blas_thread() -> None:
    """A worker's BLAS (numpy's OpenBLAS) on one thread: the workers keep every core busy
    already, and a BLAS thread waiting for work spins, taking a core from another worker."""
    threadpool_limits(limits=1, user_api="blas")


def ray_module() -> Any:
    """Ray, or RayUnavailable saying how to get it."""
    try:
        import ray  # noqa: PLC0415 - an optional extra
    except ImportError:
        raise RayUnavailable(f"--ray needs Ray, which is not installed here: {RAY_HINT}") from None
    return ray


def _on_ray(
    jobs: Sequence[TrialJob], address: str, done: Callable[[int], object]
) -> list[TrialResult]:
    ray = ray_module()
    try:
        ray.init(address=address, logging_level=logging.WARNING, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise RayUnavailable(f"--ray {address}: cannot join the cluster: {error}") from None
    try:
        task = ray.remote(num_cpus=1)(run_trial)
        pending = {task.remote(job): i for i, job in enumerate(jobs)}
        results: list[TrialResult | None] = [None] * len(jobs)
        waiting = list(pending)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for ref in ready:
                results[pending[ref]] = ray.get(ref)
                done(1)
        return [r for r in results if r is not None]
    finally:
        ray.shutdown()  # leaves the cluster; a cluster this call did not start keeps running
