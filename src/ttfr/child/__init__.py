"""The child process side: worker phases, sampling, the Job, runtime adapters and workloads.

Standard library only at import time: the worker imports this package before it starts timing.
"""
