"""Helpers the tests share (fake executors, fixture suites, forgeries, the determinism view, the
pseudo-terminal driver, the GPU image-like environment): modules, not tests; tests import them as
`support.<module>` (pytest puts tests/ on sys.path: it has no __init__.py)."""
