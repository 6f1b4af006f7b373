"""The compile counters against torch's own counters, on functions built to recompile, break
graphs and skip CUDA graphs; the guard that switches a model to eager and keeps it serving.

Dynamo (which decides recompiles and graph breaks) runs with the `eager` backend here: the
same guards and reports as inductor, without code generation's minutes on a CPU."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch._dynamo.utils import counters
from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

from trader.forecast.protocol import CompileStats
from trader.forecast.runtime import GRAPH_BREAK, RECOMPILE, ModelRuntime, RecompileCounter


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def eager_backend(fn: Callable[..., Any]) -> Callable[..., Any]:
    return torch.compile(fn, backend="eager", dynamic=False)


def runtime(max_recompiles: int = 100, compiler: Any = eager_backend) -> ModelRuntime:
    return ModelRuntime("test", compiled=True, compiler=compiler, max_recompiles=max_recompiles)


def scale(x: torch.Tensor, n: int) -> torch.Tensor:
    """Built to recompile: with dynamic=False every new `n` fails a guard."""
    return x * n + 1


def with_break(x: torch.Tensor, n: int) -> torch.Tensor:
    y = x * n
    torch._dynamo.graph_break()  # one graph break per compile of this function
    return y + 1


def call(rt: ModelRuntime, fn: Callable[..., Any], *args: Any) -> Any:
    with rt.call():
        return fn(*args)


def test_recompiles_are_counted_as_torch_counts_them():
    rt = runtime()
    scaled = rt.wrap(scale)
    graphs = counters["stats"]["unique_graphs"]
    call(rt, scaled, torch.ones(3), 1)  # warm-up: the first compile is not a recompile
    assert rt.warmed_up
    for n in (2, 3, 4, 2, 3):  # three new values recompile; seen ones reuse their graphs
        assert torch.equal(call(rt, scaled, torch.ones(3), n), torch.ones(3) * n + 1)
    compiled_graphs = counters["stats"]["unique_graphs"] - graphs
    assert compiled_graphs == 4
    assert rt.stats == CompileStats(recompiles=3)
    assert rt.warmup_stats == CompileStats()
    assert "n == 1" in rt.reasons(RECOMPILE)[0]  # torch's own words: the guard that failed


def test_a_function_with_stable_inputs_never_recompiles():
    rt = runtime()
    scaled = rt.wrap(scale)
    for _ in range(4):
        call(rt, scaled, torch.ones(3), 7)
    assert rt.stats == CompileStats()


def test_graph_breaks_are_counted_as_torch_counts_them():
    rt = runtime()
    broken = rt.wrap(with_break)
    before = counters["graph_break"].total()
    call(rt, broken, torch.ones(3), 1)
    call(rt, broken, torch.ones(3), 2)  # recompiles, and breaks again (a "duplicate" report)
    assert counters["graph_break"].total() - before == 2
    assert (rt.warmup_stats.graph_breaks, rt.stats.graph_breaks) == (1, 1)
    assert rt.stats.recompiles == 1
    assert "graph_break" in rt.reasons(GRAPH_BREAK)[0]


def test_cudagraph_skips_are_counted_from_torchs_own_report():
    rt = runtime()
    rt.end_warmup()
    before = counters["inductor"]["cudagraph_skips"]
    with rt.call():
        # What inductor calls when a graph mutates its inputs, on this thread during a call.
        log_cudagraph_skip_and_bump_counter(
            "skipping cudagraphs due to mutated inputs (1 instances)"
        )
    log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to another model's graph")
    assert counters["inductor"]["cudagraph_skips"] - before == 2
    assert rt.stats.cudagraph_skips == 1  # only the one reported during this model's call


def test_a_model_counts_only_what_torch_reports_on_the_thread_running_its_call():
    mine, other = runtime(), runtime()
    mine.end_warmup()
    other.end_warmup()
    scaled = mine.wrap(scale)
    call(mine, scaled, torch.ones(3), 1)

    def elsewhere() -> None:
        call(mine, scaled, torch.ones(3), 2)  # mine's call, on another thread: mine's count

    worker = threading.Thread(target=elsewhere)
    with other.call():  # other's call is open here while mine recompiles on the worker
        worker.start()
        worker.join()
    assert (mine.stats.recompiles, other.stats.recompiles) == (1, 0)


def test_past_the_limit_after_warm_up_the_model_switches_to_eager_and_keeps_serving():
    rt = runtime(max_recompiles=1)
    scaled = rt.wrap(scale)
    call(rt, scaled, torch.ones(3), 1)
    call(rt, scaled, torch.ones(3), 2)
    assert rt.mode == "compile"
    call(rt, scaled, torch.ones(3), 3)  # the second recompile after warm-up: too many
    assert rt.mode == "eager"
    reason = rt.stats.forced_eager
    assert reason is not None
    assert reason.startswith(
        "2 recompiles after warm-up, more than forecast.test.max_recompiles = 1"
    )
    assert "n == 1" in reason or "n == 2" in reason
    graphs = counters["stats"]["unique_graphs"]
    for n in (4, 5, 6):
        assert torch.equal(call(rt, scaled, torch.ones(3), n), torch.ones(3) * n + 1)
    assert counters["stats"]["unique_graphs"] == graphs  # torch is not asked to compile again
    assert rt.stats.recompiles == 2


def test_torch_hitting_its_recompile_limit_switches_the_model_to_eager():
    rt = runtime(max_recompiles=100)
    scaled = rt.wrap(scale)
    with torch._dynamo.config.patch(recompile_limit=2):
        for n in range(1, 6):
            assert torch.equal(call(rt, scaled, torch.ones(2), n), torch.ones(2) * n + 1)
    assert rt.mode == "eager"
    assert str(rt.stats.forced_eager).startswith("torch hit its recompile limit after warm-up")


def test_a_compiled_call_that_fails_where_eager_works_switches_to_eager():
    def failing_backend(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> Any:
        raise RuntimeError("the compiler crashed")

    rt = runtime(compiler=lambda fn: torch.compile(fn, backend=failing_backend))
    scaled = rt.wrap(scale)
    assert torch.equal(call(rt, scaled, torch.ones(2), 3), torch.full((2,), 4.0))
    assert rt.mode == "eager"
    assert "the compiled scale failed" in str(rt.stats.forced_eager)
    assert "the compiler crashed" in str(rt.stats.forced_eager)


def test_an_input_that_fails_eagerly_too_is_the_inputs_fault_not_the_compilers():
    rt = runtime()
    scaled = rt.wrap(scale)
    with pytest.raises(RuntimeError, match="size of tensor"):
        call(rt, scaled, torch.ones(2), torch.ones(3))
    assert rt.mode == "compile"
    assert rt.stats.forced_eager is None


def test_an_eager_runtime_runs_the_function_itself_and_reports_zeros():
    rt = ModelRuntime("test", compiled=False)
    assert rt.wrap(scale) is scale
    with rt.call():
        scale(torch.ones(2), 2)
    assert (rt.mode, rt.stats) == ("eager", CompileStats())


def test_the_process_wide_recompile_counter_keeps_every_reason():
    counter = RecompileCounter().install()
    try:
        scaled = eager_backend(scale)
        for n in range(1, 4):
            scaled(torch.ones(2), n)
    finally:
        counter.uninstall()
    assert counter.count == 2
    assert len(counter.reasons) == 2
