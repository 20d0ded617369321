"""Runtime adapters used inside the worker process (one module per runtime).

Every module here imports only the standard library at module level: the runtime itself
is imported inside `Runtime.import_stack`, which the worker times as `import_s`.
"""


class Unavailable(Exception):
    """The backend cannot run here (missing dependency, no GPU): a `warn`, not a failure."""
