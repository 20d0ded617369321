"""The cache policies (imports nothing: reports name them without loading a runtime)."""

COLD_CACHE = "cold-process/cold-cache"
WARM_CACHE = "cold-process/warm-cache"
WARM_PROCESS = "warm-process"
POLICIES = (COLD_CACHE, WARM_CACHE, WARM_PROCESS)  # the standard ones: every backend's, the default suite's
COLD_POLICIES = (COLD_CACHE, WARM_CACHE)  # the standard cold-start policies (a fresh process per run)
POLICY_ALIASES = {"cold-cache": COLD_CACHE, "warm-cache": WARM_CACHE, "cold": COLD_CACHE, "warm": WARM_PROCESS}

# Precompiled artifacts (issue 39): `precompiled/<mechanism>/<setting>`, a cold start that loads compiled code a
# priming process shipped, on an empty cache directory (a new machine or container) or on the case's warm
# template (a second job on the same machine). Opt-in: named on the command line, never in the default suite.
PRECOMPILED = "precompiled"
PRECOMPILED_SETTINGS = ("cold-cache", "warm-cache")
_SETTING_STATE = {"cold-cache": COLD_CACHE, "warm-cache": WARM_CACHE}
# Every name a policy may have in an artifact (a mechanism's name: lower case, digits, underscores).
POLICY_NAME_PATTERN = (
    "^(cold-process/cold-cache|cold-process/warm-cache|warm-process|precompiled/[a-z][a-z0-9_]*/(cold-cache|warm-cache))$"
)

# Many cold starts at once (--concurrency N, issue 29): N fresh processes released together by a barrier,
# sharing one cache directory that starts empty (cold-shared) or holds the case's template (warm-shared),
# or each with an empty one of its own (cold-private: the same load, no sharing).
COLD_SHARED = "cold-shared"
WARM_SHARED = "warm-shared"
COLD_PRIVATE = "cold-private"
CONCURRENCY_MODES = (COLD_SHARED, WARM_SHARED, COLD_PRIVATE)


def precompiled_policy(mechanism: str, setting: str) -> str:
    """The policy's name: `precompiled/jax_export/warm-cache`."""
    return f"{PRECOMPILED}/{mechanism}/{setting}"


def precompiled_parts(name: str | None) -> tuple[str, str] | None:
    """(mechanism, setting) of a precompiled policy's name; None for any other name."""
    parts = (name or "").split("/")
    if len(parts) == 3 and parts[0] == PRECOMPILED and parts[1] and parts[2] in PRECOMPILED_SETTINGS:
        return parts[1], parts[2]
    return None


def is_cold(name: str | None) -> bool:
    """A cold-start policy: a fresh process per run (the standard two and every precompiled one)."""
    return name in COLD_POLICIES or precompiled_parts(name) is not None


def cache_state(name: str | None) -> str | None:
    """The standard policy whose cache directory the policy's runs start from: a precompiled policy's setting
    (cold-cache: emptied; warm-cache: the template restored), else the policy itself."""
    parts = precompiled_parts(name)
    return _SETTING_STATE[parts[1]] if parts else name


def policy_order(name: str) -> tuple:
    """Where a policy sorts among others: the order of a process's life (cold cache, warm cache), the
    precompiled ones after the cold policies they start like, the warm process last."""
    parts = precompiled_parts(name)
    if parts:
        return (2, parts[0], PRECOMPILED_SETTINGS.index(parts[1]))
    return ({COLD_CACHE: 0, WARM_CACHE: 1, WARM_PROCESS: 3}.get(name, 4), name, 0)


def policy_label(name: str) -> str:
    """A policy's short name where the column says it is one: `cold-cache`, `warm-process`,
    `jax_export/warm-cache`."""
    parts = precompiled_parts(name)
    return "/".join(parts) if parts else name.split("/")[-1]


def policy_words(name: str) -> str:
    """A policy as a figure's title says it: `cold cache`, `warm process`, `jax_export artifact, warm cache` (any
    other name, a concurrency point's mode, as it is)."""
    parts = precompiled_parts(name)
    if parts:
        return f"{parts[0]} artifact, {parts[1].replace('-', ' ')}"
    return {COLD_CACHE: "cold cache", WARM_CACHE: "warm cache", WARM_PROCESS: "warm process"}.get(name, name)
