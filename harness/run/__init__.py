"""Layer 3: a run from spec to stored history: spec, runner, recorder, holder operations, the
agent link, the store, matrices and progress display."""
