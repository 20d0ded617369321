"""ttfr: time to first result.

Kept free of imports: the worker imports this package before its first timing mark. The Python API
(`ttfr.run`, `ttfr.load`, `ttfr.compare`) is loaded on first use.
"""

__version__ = "0.1.3"


_API = ("run", "load", "compare", "Result", "Case")


def __getattr__(name):
    """`ttfr.run`, `ttfr.load`, `ttfr.compare`: loaded on first use (ttfr/api.py), never by `import ttfr`."""
    if name in _API:
        import importlib  # by name: the package itself never imports a stage (the layers hold below it)

        return getattr(importlib.import_module("ttfr.api"), name)
    raise AttributeError(f"module 'ttfr' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
