"""The controller side of fencecheck: history I/O, cluster backends, the node agent, the runner,
the store, the CLI and the report."""
