"""ttfr: time to first result.

Kept free of imports: the worker imports this package before its first timing mark.
"""

__version__ = "0.1.3"
