"""The three cache policies (imports nothing: reports name them without loading a runtime)."""

COLD_CACHE = "cold-process/cold-cache"
WARM_CACHE = "cold-process/warm-cache"
WARM_PROCESS = "warm-process"
POLICIES = (COLD_CACHE, WARM_CACHE, WARM_PROCESS)
COLD_POLICIES = (COLD_CACHE, WARM_CACHE)  # the cold-start policies (a fresh process per run)
POLICY_ALIASES = {"cold-cache": COLD_CACHE, "warm-cache": WARM_CACHE, "cold": COLD_CACHE, "warm": WARM_PROCESS}

# Many cold starts at once (--concurrency N, issue 29): N fresh processes released together by a barrier,
# sharing one cache directory that starts empty (cold-shared) or holds the case's template (warm-shared),
# or each with an empty one of its own (cold-private: the same load, no sharing).
COLD_SHARED = "cold-shared"
WARM_SHARED = "warm-shared"
COLD_PRIVATE = "cold-private"
CONCURRENCY_MODES = (COLD_SHARED, WARM_SHARED, COLD_PRIVATE)
