"""`trader bench`: measurements an operator runs on their own machine. `trader bench compile`
compares a model's eager and compiled runtimes on the same inputs and says which to use.

`trader.cli.bench` (no torch) adds the verb; `trader.bench.compile` runs it."""
