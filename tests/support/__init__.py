"""Code the tests (and the benches) share: models and helpers that do not ship with fencecheck."""
