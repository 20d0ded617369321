"""The three cache policies (imports nothing: reports name them without loading a runtime)."""

COLD_CACHE = "cold-process/cold-cache"
WARM_CACHE = "cold-process/warm-cache"
WARM_PROCESS = "warm-process"
POLICIES = (COLD_CACHE, WARM_CACHE, WARM_PROCESS)
COLD_POLICIES = (COLD_CACHE, WARM_CACHE)  # the cold-start policies (a fresh process per run)
POLICY_ALIASES = {"cold-cache": COLD_CACHE, "warm-cache": WARM_CACHE, "cold": COLD_CACHE, "warm": WARM_PROCESS}
