"""Eager or compiled model execution, torch's own account of what compiling cost, and the
guard that turns a misbehaving compiled model back to eager.

The counts come from torch's logs, not from timings or shapes: "Recompiling function ..."
(the `recompiles` artifact), "Graph break ..." (the `graph_breaks` artifact: one report per
break per compile, duplicates included, so the count equals `counters["graph_break"]`) and
"skipping cudagraphs due to ..." (torch's `log_cudagraph_skip_and_bump_counter`, at warning
level on CUDA devices; CPU graphs have no CUDA graphs to skip). Reports are attributed by
thread: a model counts only what torch reports on the thread running one of its calls, so two
models in one process never count each other's compiles.

The guard acts per model (the compiled callables are swapped for the eager ones), unlike
`torch.compiler.set_stance("force_eager")`, which would switch every model in the process.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self, TypeVar, cast

from trader.domain import Forecast
from trader.forecast.protocol import CompileStats, ForecastRequest
from trader.logging import adopt_library_loggers, get_logger

RECOMPILE = "recompile"
GRAPH_BREAK = "graph_break"
CUDAGRAPH_SKIP = "cudagraph_skip"
LIMIT_HIT = "recompile_limit"  # torch gave up compiling a function and runs it eagerly

# The loggers torch writes each kind of report to (torch 2.7 to 2.13), and how a report starts.
_SOURCES: dict[str, tuple[tuple[str, ...], str]] = {
    RECOMPILE: (("torch._dynamo.guards.__recompiles",), "Recompiling function"),
    GRAPH_BREAK: (
        (
            "torch._dynamo.symbolic_convert.__graph_breaks",
            "torch._dynamo.convert_frame.__graph_breaks",
        ),
        "Graph break",
    ),
    CUDAGRAPH_SKIP: (("torch._inductor.cudagraph_utils.__cudagraphs",), "skipping cudagraphs"),
    LIMIT_HIT: (("torch._dynamo.convert_frame",), "torch._dynamo hit config."),
}
_KEPT_REASONS = 20

F = TypeVar("F", bound=Callable[..., Any])


def _reason(kind: str, lines: list[str]) -> str:
    """The line of a report that says why."""
    if kind == RECOMPILE and len(lines) > 2:
        return lines[2].strip(" -")  # the first guard that failed
    if kind == GRAPH_BREAK:
        # "Graph break in user code at FILE:LINE", then the reason, whose detail may follow
        # on the next non-empty line.
        where = lines[0].rpartition(" at ")[2]
        for i, line in enumerate(lines):
            if line.startswith("Graph Break Reason:"):
                why = line.removeprefix("Graph Break Reason:").strip()
                detail = next((x.strip() for x in lines[i + 1 :] if x.strip()), "")
                return (
                    f"{why} {detail} (at {where})" if why.endswith(":") else f"{why} (at {where})"
                )
    if kind == LIMIT_HIT:
        return " ".join(line.strip() for line in lines[:3])
    return lines[0] if lines else ""


def classify(record: logging.LogRecord) -> tuple[str, str] | None:
    """(kind, reason) for a report of torch's that counts, else None."""
    for kind, (loggers, start) in _SOURCES.items():
        if record.name in loggers:
            lines = record.getMessage().splitlines()
            if lines and lines[0].startswith(start):
                return kind, _reason(kind, lines)
    return None


class CompileEventCounter(logging.Handler):
    """Counts torch's compile reports: from every thread, or with `watched_only` only from
    threads inside `watching()` (a model's calls)."""

    def __init__(self, *, watched_only: bool = False, keep: int | None = _KEPT_REASONS) -> None:
        super().__init__(logging.DEBUG)
        self._watched_only = watched_only
        self._keep = keep
        self._watched: Counter[int] = Counter()
        self._lock_counts = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.latest: dict[str, deque[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if self._watched_only and not self._watched[record.thread or 0]:
            return
        found = classify(record)
        if found is None:
            return
        kind, reason = found
        with self._lock_counts:
            self.counts[kind] += 1
            self.latest.setdefault(kind, deque(maxlen=self._keep)).append(reason)

    def reasons_for(self, kind: str) -> list[str]:
        """torch's latest reasons for one kind of report, oldest first."""
        with self._lock_counts:
            return list(self.latest.get(kind, ()))

    def snapshot(self) -> Counter[str]:
        with self._lock_counts:
            return Counter(self.counts)

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Reports torch makes on this thread until the block ends count (nests)."""
        thread = threading.get_ident()
        with self._lock_counts:
            self._watched[thread] += 1
        try:
            yield
        finally:
            with self._lock_counts:
                self._watched[thread] -= 1
                if not self._watched[thread]:
                    del self._watched[thread]

    def install(self) -> Self:
        # torch's log settings are process-wide (set_logs replaces them all, TORCH_LOGS
        # included); this turns on the two artifacts counted here and keeps their lines in
        # our pipeline. CUDA-graph skips are warnings, on without an artifact.
        from torch._logging._internal import set_logs  # noqa: PLC0415 - torch only when compiling

        set_logs(recompiles=True, graph_breaks=True)
        adopt_library_loggers("torch")
        for loggers, _ in _SOURCES.values():
            for name in loggers:
                logging.getLogger(name).addHandler(self)
        return self

    def uninstall(self) -> None:
        for loggers, _ in _SOURCES.values():
            for name in loggers:
                logging.getLogger(name).removeHandler(self)


class RecompileCounter(CompileEventCounter):
    """Recompiles from every thread, as torch reports them, every reason kept."""

    def __init__(self) -> None:
        super().__init__(keep=None)

    @property
    def count(self) -> int:
        return self.snapshot()[RECOMPILE]

    @property
    def reasons(self) -> list[str]:
        return self.reasons_for(RECOMPILE)


Compiler = Callable[[Callable[..., Any]], Callable[..., Any]]


class ModelRuntime:
    """One model's execution: eager, or compiled with its compile reports counted and a guard.

    A forecast call runs inside `call()`; the model's entry points are `wrap`ped. The first
    `warmup_calls` calls are the warm-up (first compiles; sizes going symbolic); after it,
    more than `max_recompiles` recompiles, torch hitting its own recompile limit, or a
    compiled call that fails where the eager one succeeds switches the model to eager for
    good: logged with the reason, reported in `stats.forced_eager`, and it keeps serving.
    """

    def __init__(
        self,
        model: str,
        *,
        compiled: bool,
        compiler: Compiler | None = None,
        max_recompiles: int = 2,
        warmup_calls: int = 1,
    ) -> None:
        if compiled and compiler is None:
            raise ValueError("a compiled runtime needs a compiler")
        self.model = model
        self.compiled = compiled
        self.max_recompiles = max_recompiles
        self.warmup_calls = warmup_calls
        self._compiler = compiler
        self._log = get_logger("trader.forecast.runtime", model=model)
        self._events = CompileEventCounter(watched_only=True).install() if compiled else None
        self._calls = 0
        self._at_warm: Counter[str] | None = None
        self._forced: str | None = None

    @property
    def mode(self) -> str:
        """What runs now: "compile", or "eager" (configured, or forced by the guard)."""
        return "compile" if self.compiling else "eager"

    @property
    def compiling(self) -> bool:
        return self.compiled and self._forced is None

    @property
    def warmed_up(self) -> bool:
        return self._at_warm is not None

    @property
    def stats(self) -> CompileStats:
        """Counted after warm-up (zeros during it, and for eager models)."""
        if self._events is None or self._at_warm is None:
            return CompileStats(forced_eager=self._forced)
        return self._stats(self._events.snapshot() - self._at_warm)

    @property
    def warmup_stats(self) -> CompileStats:
        """What the warm-up itself cost (first compiles are not recompiles)."""
        if self._events is None:
            return CompileStats()
        counts = self._at_warm if self._at_warm is not None else self._events.snapshot()
        return self._stats(counts)

    def _stats(self, counts: Counter[str]) -> CompileStats:
        return CompileStats(
            counts[RECOMPILE], counts[GRAPH_BREAK], counts[CUDAGRAPH_SKIP], self._forced
        )

    def reasons(self, kind: str) -> list[str]:
        """torch's latest reasons for one kind of report (RECOMPILE, GRAPH_BREAK, ...)."""
        return [] if self._events is None else self._events.reasons_for(kind)

    def wrap(self, eager: F) -> F:
        """`eager` itself for an eager model; else a callable that runs the compiled version
        until the guard switches the model to eager."""
        if not self.compiled:
            return eager
        assert self._compiler is not None
        compiled = self._compiler(eager)
        name = getattr(eager, "__name__", "call")

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._forced is not None:
                return eager(*args, **kwargs)
            try:
                result = compiled(*args, **kwargs)
            except Exception as error:
                # Eager decides whose fault it is: the same failure there is the input's
                # (raised as eager raises it); success there means the compiled path broke.
                result = eager(*args, **kwargs)
                lines = [x.strip() for x in str(error).splitlines() if x.strip()]
                what = " ".join(lines[:2])  # torch's wrappers say what raised, then the error
                self.force_eager(f"the compiled {name} failed: {type(error).__name__}: {what}")
                return result
            self._guard()
            return result

        return cast(F, call)

    @contextmanager
    def call(self) -> Iterator[None]:
        """One forecast call: what torch reports on this thread meanwhile is this model's."""
        if self._events is None:
            yield
            return
        try:
            with self._events.watching():
                yield
        finally:
            self._calls += 1
            if self._at_warm is None and self._calls >= self.warmup_calls:
                self.end_warmup()
            self._guard()

    def end_warmup(self) -> None:
        """Counting after warm-up starts now (also reached after `warmup_calls` calls)."""
        if self._events is not None and self._at_warm is None:
            self._at_warm = self._events.snapshot()
            warm = self.warmup_stats
            self._log.info(
                "compiled model warmed up",
                recompiles=warm.recompiles,
                graph_breaks=warm.graph_breaks,
                cudagraph_skips=warm.cudagraph_skips,
            )

    def _guard(self) -> None:
        if self._forced is not None or self._events is None or self._at_warm is None:
            return
        after = self._events.snapshot() - self._at_warm
        if after[LIMIT_HIT]:
            self.force_eager(
                f"torch hit its recompile limit after warm-up: {self.reasons(LIMIT_HIT)[-1]}"
            )
        elif after[RECOMPILE] > self.max_recompiles:
            latest = self.reasons(RECOMPILE)
            self.force_eager(
                f"{after[RECOMPILE]} recompiles after warm-up, more than "
                f"forecast.{self.model}.max_recompiles = {self.max_recompiles}; the last "
                f"because {latest[-1] if latest else 'torch gave no reason'}"
            )

    def force_eager(self, reason: str) -> None:
        """From now on the model runs eagerly; said once, loudly."""
        if self._forced is None:
            self._forced = reason
            self._log.warning("compiled model switched to eager", reason=reason)

    def close(self) -> None:
        """Stop counting (the model is being dropped)."""
        if self._events is not None:
            self._events.uninstall()


class RuntimeForecaster:
    """What a model forecaster takes from its runtime: `mode`, `compile_stats`, and each
    `forecast` call run inside `runtime.call()` (so torch's reports during it are its own)."""

    runtime: ModelRuntime

    @property
    def mode(self) -> str:
        return self.runtime.mode

    @property
    def compile_stats(self) -> CompileStats:
        return self.runtime.stats

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        with self.runtime.call():
            return self._forecast(requests)

    def _forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        raise NotImplementedError
