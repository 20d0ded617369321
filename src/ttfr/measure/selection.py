"""Which cases a run measures: the selection options (`--cases`, `--backends`, `--workloads`,
`--sizes`, `--dtypes`, `--cache-policy`, `--shard`) checked against the catalogue, and the
catalogue filtered by them (`ttfr list`)."""

from __future__ import annotations

from dataclasses import dataclass

from ttfr.errors import UnknownChoice, UsageError, unknown_choice
from ttfr.measure import catalog, precompiled, user_cases, user_commands
from ttfr.measure.limits import MAX_CONCURRENCY
from ttfr.measure.profiles import Profile
from ttfr.model.policies import (
    COLD_POLICIES,
    POLICIES,
    POLICY_ALIASES,
    PRECOMPILED,
    PRECOMPILED_SETTINGS,
    WARM_PROCESS,
    policy_order,
    precompiled_parts,
    precompiled_policy,
)


def with_installed_cases(known: catalog.Catalog, workloads, case_ids) -> catalog.Catalog:
    """Installed packages' cases (entry-point group `ttfr.cases`) are imported only when a
    run names a workload or case id that nothing else provides: a broken or heavy package
    never touches a run that does not use it."""
    names = set(known.names())
    if any(w not in names for w in workloads) or not all(known.knows_case_id(c) for c in case_ids):
        return known.with_workloads(c.workload() for c in user_cases.read((), installed=True))
    return known


def split_values(values, option: str | None = None, choices=()):
    """Accept repeated flags and comma-separated lists alike (a bare string is one value).

    A value that names nothing (`--cases ""`, a shell variable that expanded to nothing)
    is an error naming the option, never "everything"."""
    if isinstance(values, (str, int)):
        values = [values]
    out = []
    for value in values or ():
        names = [v.strip() for v in str(value).split(",") if v.strip()]
        if not names and option:
            listed = f"; valid: {', '.join(choices)}" if choices else ""
            raise UsageError(f"{option} was given an empty value {str(value)!r}: name at least one{listed}")
        out.extend(names)
    return out


def policy_choices() -> list[str]:
    """Every name --cache-policy takes, as an error lists them."""
    shipped = [f"{PRECOMPILED}/{m}[/{'|'.join(PRECOMPILED_SETTINGS)}]" for m in precompiled.MECHANISMS]
    return [*POLICIES, *POLICY_ALIASES, PRECOMPILED, *shipped, "all"]


def _precompiled_named(name: str) -> list[str] | None:
    """The precompiled policies a name stands for (`precompiled`: every mechanism's; `precompiled/<mechanism>`, or
    the mechanism's bare name: both its settings); None: not a precompiled name."""
    if name == PRECOMPILED:
        return [precompiled_policy(m, s) for m in precompiled.MECHANISMS for s in PRECOMPILED_SETTINGS]
    parts = name.split("/")
    if parts[0] == PRECOMPILED and len(parts) in (2, 3) or len(parts) == 1 and name in precompiled.MECHANISMS:
        mechanism = parts[1] if parts[0] == PRECOMPILED else name
        settings = parts[2:] or list(PRECOMPILED_SETTINGS)
        if mechanism not in precompiled.MECHANISMS or settings[0] not in PRECOMPILED_SETTINGS:
            raise unknown_choice("cache policy", name, policy_choices())
        return [precompiled_policy(mechanism, s) for s in settings]
    return None


def parse_policies(values) -> tuple[str, ...]:
    """The policies --cache-policy names, in the order of a process's life. None given: the standard three
    (the default suite never ships artifacts); `all`: those and every precompiled one (spec.py keeps a
    precompiled policy only where a chosen backend offers its mechanism)."""
    names = split_values(values, "--cache-policy", policy_choices())
    if not names:
        return POLICIES
    chosen = []
    for name in names:
        if name == "all":
            found = [*POLICIES, *_precompiled_named(PRECOMPILED)]
        else:
            found = _precompiled_named(name) or [POLICY_ALIASES.get(name, name)]
            if found[0] not in POLICIES and not precompiled_parts(found[0]):
                raise unknown_choice("cache policy", name, policy_choices())
        chosen.extend(p for p in found if p not in chosen)
    return tuple(sorted(chosen, key=policy_order))


def named_mechanisms(values) -> set[str]:
    """The mechanisms --cache-policy names one by one (not through `all` or `precompiled`): a run that has no
    backend offering one is refused, where `all` and `precompiled` keep them to the backends that do."""
    return {precompiled_parts(p)[0] for name in split_values(values) if name not in ("all", PRECOMPILED)
            for p in (_precompiled_named(name) or ())}  # fmt: skip


def offered_policies(policies, cases, values) -> tuple[str, ...]:
    """The policies a run measures: a precompiled one only where a chosen case's backend offers its mechanism;
    one named on its own that none offers is exit 2, naming the backends that do."""
    offered = {m for case in cases for m in case.backend_info.precompiled}
    for mechanism in sorted(named_mechanisms(values) - offered):
        have = [name for name, b in catalog.BACKENDS.items() if mechanism in b.precompiled]
        chosen = ", ".join(sorted({case.backend for case in cases}))
        raise UsageError(f"--cache-policy: no chosen backend ({chosen}) makes {mechanism} artifacts; backends that do: "
                         f"{', '.join(have)}")  # fmt: skip
    if PRECOMPILED in split_values(values) and not offered:
        have = [name for name, b in catalog.BACKENDS.items() if b.precompiled]
        raise UsageError(f"--cache-policy {PRECOMPILED}: no chosen backend makes precompiled artifacts; backends that "
                         f"do: {', '.join(have)}")  # fmt: skip
    return tuple(p for p in policies if not (parts := precompiled_parts(p)) or parts[0] in offered)


def parse_int(text, what):
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{what} must be a whole number, got {text!r}") from None


def check_names(known: catalog.Catalog, backends, workloads, dtypes) -> None:
    """Every backend, workload and dtype named is one the catalogue knows (else exit 2, naming the valid ones)."""
    for name in backends:
        if name not in catalog.BACKENDS:
            raise unknown_choice("backend", name, catalog.BACKENDS)
    for name in workloads:
        if name not in known.workloads:
            raise unknown_choice("workload", name, known.names())
    for name in dtypes:
        if catalog.DTYPES.get(name, name) not in catalog.DTYPES.values():
            raise unknown_choice("dtype", name, list(catalog.DTYPES) + list(catalog.DTYPES.values()))


def select_cases(
    known: catalog.Catalog,
    profile: Profile,
    case_ids=(),
    backends=(),
    workloads=(),
    sizes=(),
    dtypes=(),
    hf_sizes=(),
    custom_size=None,
) -> tuple[catalog.Case, ...]:
    """`hf_sizes`: HistFactory preset sizes chosen with --workspace-preset; `custom_size`: the
    parameter count of the --workspace file, whose cases are `custom` ones (neither: the
    profile's preset sizes). `--sizes N` on a HistFactory workload picks the --workspace file
    when it has N parameters, and the preset of N parameters unless only the file was meant
    (N is the file's count and that preset was not named with --workspace-preset)."""
    case_ids = split_values(case_ids, "--cases", ["case ids from `ttfr list`"])
    backends = split_values(backends, "--backends", catalog.BACKENDS)
    workloads = catalog.expand_workloads(split_values(workloads, "--workloads", known.names()))
    sizes = split_values(sizes, "--sizes", ["whole numbers (see `ttfr list`)"])
    dtypes = split_values(dtypes, "--dtypes", catalog.DTYPES)
    extra = (custom_size,) if custom_size else ()
    if case_ids:
        if backends or workloads or sizes or dtypes:
            raise UsageError("--cases names whole case ids; do not combine it with --backends/--workloads/--sizes/--dtypes")
        cases = []
        for case_id in case_ids:
            try:
                cases.append(known.parse_case_id(case_id, extra))
            except UnknownChoice as exc:  # short: ~400 ids would bury the point; no typo of ours is likely yours
                hint = ("A case of your own needs the file that defines it: --case-file FILE "
                        "(its ids: `ttfr list --case-file FILE --user-only`).")  # fmt: skip
                raise unknown_choice("case id", case_id, exc.choices, limit=8, hint="" if exc.is_typo() else hint) from None
        return tuple(sorted(set(cases)))
    check_names(known, backends, workloads, dtypes)
    size_values = [parse_int(s, "--sizes") for s in sizes]
    dtype_values = [catalog.DTYPES.get(d, d) for d in dtypes]
    chosen_backends = backends or [name for name, b in catalog.BACKENDS.items() if not (b.diagnostic or b.opt_in)]
    chosen_workloads = workloads or [w for w, info in known.workloads.items() if info.default and not info.diagnostic]
    cases = set()
    for w_name in chosen_workloads:
        workload = known.workloads[w_name]
        for b_name in chosen_backends:
            if not catalog.supports(catalog.BACKENDS[b_name], workload):
                continue
            hf = w_name in catalog.HF_WORKLOADS
            if size_values:
                w_sizes = []
                for size in size_values:
                    if hf and size == custom_size:
                        w_sizes.append((size, True))
                        if size not in hf_sizes:
                            continue
                    catalog.check_size(workload, size, extra)
                    w_sizes.append((size, False))
            elif hf and (hf_sizes or custom_size):
                w_sizes = [(size, False) for size in hf_sizes] + ([(custom_size, True)] if custom_size else [])
            else:
                defaults = workload.sizes[:1] if profile.default_sizes == "smallest" else workload.sizes
                w_sizes = [(size, False) for size in defaults]
            w_dtypes = [d for d in (dtype_values or profile.default_dtypes) if d in workload.dtypes]
            if not w_dtypes and not dtype_values:
                w_dtypes = list(workload.dtypes[:1])
            for size, custom in w_sizes:
                for dtype in w_dtypes:
                    cases.add(catalog.Case(b_name, w_name, size, dtype, custom, info=workload))
    if not cases and dtype_values:
        offered = {w: [d for d in dtype_values if d in known.workloads[w].dtypes] for w in chosen_workloads}
        if not any(offered.values()):  # the dtypes, not the backends, left nothing
            listed = "; ".join(f"{w}: {', '.join(catalog.DTYPE_SHORT[d] for d in known.workloads[w].dtypes)}"
                               for w in chosen_workloads)  # fmt: skip
            asked = ", ".join(catalog.DTYPE_SHORT[d] for d in dtype_values)
            raise UsageError(f"no chosen workload is offered in --dtypes {asked} (bf16: the conversion routes only); "
                             f"dtypes offered: {listed}")  # fmt: skip
    if not cases:
        runs = "; ".join(
            f"{w}: " + ", ".join(b.name for b in catalog.BACKENDS.values() if catalog.supports(b, known.workloads[w]))
            for w in chosen_workloads
        )
        raise UsageError(f"no chosen backend ({', '.join(chosen_backends)}) runs the chosen workloads; backends that do: {runs}")
    idle = [b for b in backends if not any(c.backend == b for c in cases)]
    if idle:  # a backend asked for by name that would silently run nothing
        users = [w for w in chosen_workloads if known.workloads[w].source]
        why = (" (a case file's case runs only where it has a builder: @case.numpy, @case.jax, @case.torch)"
               if users else "")  # fmt: skip
        raise UsageError(f"--backends {', '.join(idle)}: runs none of the chosen workloads "
                         f"({', '.join(chosen_workloads)}){why}; drop it, or choose workloads it runs (`ttfr list`)")  # fmt: skip
    return tuple(sorted(cases))


def parse_shard(text):
    if text is None:
        return None
    index, sep, count = str(text).partition("/")
    if not sep:
        raise UsageError(f"--shard takes K/N (e.g. 1/4), got {text!r}")
    i, n = parse_int(index, "--shard K"), parse_int(count, "--shard N")
    if not 1 <= i <= n:
        raise UsageError(f"--shard K/N needs 1 <= K <= N, got {text!r}")
    return i, n


def command_selection(commands, policies, **others) -> tuple[list[str], tuple[str, ...]]:
    """The case ids and policies of a run of `--command`s. Such a run measures its commands only,
    under the cold policies (a program has no warm regime: ttfr cannot call into it)."""
    options = {"case_files": "--case-file", "workspace_presets": "--workspace-preset"}  # the CLI's own names
    given = [name for name, value in others.items() if value not in (None, (), [], "")]
    chosen = [options.get(name, f"--{name.replace('_', '-')}") for name in given]
    if chosen:
        raise UsageError(f"--command measures programs, not ttfr's cases: drop {', '.join(chosen)} (run those "
                         "separately; --threads, --cache-policy and the run counts apply to commands)")  # fmt: skip
    chosen_policies = parse_policies(policies) if policies else COLD_POLICIES
    if WARM_PROCESS in chosen_policies:  # asked for by name (or `all`)
        given = ",".join(split_values(policies))
        raise UsageError(f"--cache-policy {given} includes {WARM_PROCESS}, but a command has no warm regime (ttfr "
                         f"cannot call into a program); choose from {', '.join(COLD_POLICIES)}")  # fmt: skip
    return [user_commands.case_of(c).id for c in commands], chosen_policies


def parse_concurrency(values) -> tuple[int, ...]:
    """--concurrency: group sizes, each a whole number 1..MAX_CONCURRENCY, in the order given, once each."""
    sizes = []
    for word in split_values(values, "--concurrency"):
        if not word.isdigit() or not 1 <= int(word) <= MAX_CONCURRENCY:
            raise UsageError(f"--concurrency takes group sizes from 1 to {MAX_CONCURRENCY}, e.g. 1,2,4,8; got {word!r}")
        if int(word) not in sizes:
            sizes.append(int(word))
    return tuple(sizes)


@dataclass(frozen=True)
class CatalogueView:
    """The part of the catalogue `ttfr list` shows: the backends, workloads and catalogued cases a
    selection names (all of them where it names none)."""

    backends: tuple[str, ...]
    workloads: tuple[str, ...]
    cases: tuple[catalog.Case, ...]
    selected: bool  # some selection option was given


def catalogue_view(known: catalog.Catalog, backends=(), workloads=(), sizes=(), dtypes=()) -> CatalogueView:
    """The catalogue filtered by `ttfr run`'s selection options, each checked as `run` checks it
    (a name it does not know: exit 2 naming the valid ones)."""
    backends = split_values(backends, "--backends", catalog.BACKENDS)
    workloads = catalog.expand_workloads(split_values(workloads, "--workloads", known.names()))
    sizes = [parse_int(s, "--sizes") for s in split_values(sizes, "--sizes", ["whole numbers"])]
    dtypes = split_values(dtypes, "--dtypes", catalog.DTYPES)
    check_names(known, backends, workloads, dtypes)
    dtype_values = {catalog.DTYPES.get(d, d) for d in dtypes}
    cases = tuple(c for c in known.catalogued_cases()
                  if (not backends or c.backend in backends) and (not workloads or c.workload in workloads)
                  and (not sizes or c.size in sizes) and (not dtypes or c.dtype in dtype_values))  # fmt: skip
    selected = bool(backends or workloads or sizes or dtypes)
    if selected and not cases:
        runs = [b for b, info in catalog.BACKENDS.items() if any(catalog.supports(info, known.workloads[w]) for w in workloads)]
        raise UsageError("no catalogued case has that selection" + (f" (those workloads run on {', '.join(runs)})"
                         if workloads else "") + "; `ttfr list` without options shows the whole catalogue")  # fmt: skip
    shown_backends = tuple(backends) or (tuple(sorted({c.backend for c in cases})) if selected else tuple(catalog.BACKENDS))
    shown_workloads = tuple(workloads) or (tuple(dict.fromkeys(c.workload for c in cases)) if selected
                                           else tuple(known.workloads))  # fmt: skip
    return CatalogueView(shown_backends, shown_workloads, cases, selected)
