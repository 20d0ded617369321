"""What each flag says, as a sentence: the one place a flag's evidence (numbers and names, in
the model) becomes prose. Every output (terminal, report.md, report.html) renders a flag through
`sentence`, so they all say the same.

Prose rules (issue 25): numbers to 3 significant digits in plain notation, lists joined with "and".
"""

from __future__ import annotations

import math

from ttfr.analyse.contention import WAIT_FRACTION, withheld_reason
from ttfr.model import flags as model
from ttfr.model.run_figures import Contention


def prose_list(items: list) -> str:
    items = [str(item) for item in items]
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def numbered(noun: str, numbers: list[int]) -> str:
    """`run 3`, `runs 0, 1 and 2`, `processes 0 and 1`."""
    return f"{noun}{'es' if noun.endswith('s') else 's'} {prose_list(numbers)}" if len(numbers) > 1 \
        else f"{noun} {numbers[0]}"  # fmt: skip


def sig(value: float) -> str:
    """3 significant digits in plain notation (2,020, 1.94, 0.000123), trailing zeros dropped."""
    if not value or not math.isfinite(value):
        return f"{value:g}"
    places = 2 - math.floor(math.log10(abs(value)))  # negative: rounded to tens, hundreds, ...
    text = f"{round(value, places):,.{max(0, places)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _percent(fraction: float) -> str:
    # a tenth of a percent first (the resolution the wait is read at), then 3 significant digits
    return sig(float(f"{fraction * 100:.1f}")) + "%"


def contention(evidence: Contention, noun: str) -> str:
    """Why one run or warm process (`noun`) counts as contended, from its recorded readings."""
    if evidence.runnable_cores is not None:
        return f"other runnable tasks filled all {evidence.runnable_cores} usable cores before and after the {noun}"
    parts = []
    if evidence.waited:
        if noun == "run":
            parts.append(f"its threads waited for a CPU {_percent(evidence.wait_fraction)} of the process time")
        else:
            parts.append(f"{evidence.samples_contended}/{evidence.samples_with_evidence} samples waited for a CPU > "
                         f"{WAIT_FRACTION:.0%} of their time (median {_percent(evidence.median_wait_fraction)})")  # fmt: skip
    if evidence.others_cores is not None:
        parts.append(f"the rest of the machine used {sig(float(f'{evidence.others_cores:.2f}'))} cores meanwhile")
    return "; ".join(parts)


def _contended(flag: model.Contended) -> str:
    noun = "run" if flag.runs else "process"
    indexes = flag.runs or flag.processes or []
    which = numbered(noun, indexes)
    aside = ""
    if flag.set_aside:
        counted = flag.set_aside
        nouns = noun if counted.contended == 1 else {"run": "runs", "process": "processes"}[noun]
        aside = f" ({counted.contended} contended {nouns} set aside: the figures use the {counted.clean} clean of {counted.ok})"
    text = f"{which} {'were' if len(indexes) > 1 else 'was'} contended{aside}. "
    text += " ".join(f"{noun.capitalize()} {item.index}: {contention(item.contention, noun)}." for item in flag.evidence)
    if any(
        item.contention.waited and max(item.contention.wait_fraction or 0, item.contention.median_wait_fraction or 0) > 1
        for item in flag.evidence
    ):
        # a process's run-queue wait sums over its threads: several can wait at once
        text += " Several threads can wait for a CPU at once, so a wait can exceed 100% of the time."
    return text


def _first_run_outlier(flag: model.FirstRunOutlier) -> str:
    metric = {"ttfr_s": "TTFR"}.get(flag.metric, flag.metric.removesuffix("_s").replace("_", " "))
    return (f"the first run's {metric} ({sig(flag.value)} s) lies {sig(flag.robust_z)} robust σ from the "
            "others' (a cold disk or first-touch effect); it stays in every figure")  # fmt: skip


def _contended_kept(flag: model.ContendedKept) -> str:
    which = numbered("run", flag.runs) if flag.runs else numbered("process", flag.processes) if flag.processes \
        else "runs"  # fmt: skip
    return (f"The figures include contended {which} (--keep-contended): they measure this machine while "
            "other work competed for its CPUs, not the program alone.")  # fmt: skip


def _compile_count_mismatch(flag: model.CompileCountMismatch) -> str:
    counts = " or ".join(map(str, flag.observed))
    times = "time" if flag.observed == [1] else "times"
    expects = "no fixed count" if flag.expected is None else str(flag.expected)
    return f"{numbered('run', flag.runs)} compiled {counts} {times}, where the strategy expects {expects}"


def _explanation_disagrees(flag: model.ExplanationDisagrees) -> str:
    if flag.phase == "ttfr":
        return (f"--explain's diagnostic process reached its first result in {sig(flag.traced_s * 1e3)} ms, outside the "
                f"measured runs' range widened by 25% (median {sig(flag.measured_s * 1e3)} ms): it explains another run "
                "than these figures (a busy machine, or a cache in another state)")  # fmt: skip
    if flag.phase.endswith("_s"):  # a compile stage, by the runtime's counters
        return (f"--explain's diagnostic process's compile by the runtime's counters ({flag.phase}) took "
                f"{sig(flag.traced_s * 1e3)} ms, outside the measured runs' range widened by 25% (median "
                f"{sig(flag.measured_s * 1e3)} ms): it explains another run than these figures (a busy machine, or a "
                "cache in another state)")  # fmt: skip
    return (f"--explain's diagnostic process imported for {sig(flag.traced_s * 1e3)} ms in its {flag.phase} phase "
            f"against a measured median of {sig(flag.measured_s * 1e3)} ms: it explains another run than these figures "
            "(a busy machine, or a cache in another state)")  # fmt: skip


def _layouts(layouts: list[str]) -> str:
    return f"the {prose_list(layouts)} layout{'s' if len(layouts) > 1 else ''}"


# Flags whose whole evidence is that they were raised: one fixed sentence each.
_FIXED = {
    model.ColdCacheNotEmpty: "the cache directory held entries before a cold-cache run: that run was not cold",
    model.ColdCacheHits: "a cold-cache run loaded compiled code it had not written itself: that run was not cold",
    model.CacheNotWritten: "a cold-cache run wrote nothing into its cache directory: nothing was compiled there, or "
                           "the cache lives elsewhere",
    model.WarmCacheEmpty: "a warm-cache run started with an empty cache directory: that run was not warm",
    model.WarmCacheNoHits: "a warm-cache run never hit its persistent cache: it compiled everything again",
    model.WarmCachePartialHits: "a warm-cache run hit its persistent cache for only part of its compiles",
    model.WarmCacheGrew: "a warm-cache run stored new cache files: it compiled what the cache lacked",
    model.KernelCacheGrew: "an eager GPU run stored kernels in the CUDA driver's JIT cache (PTX compiled for this GPU "
                           "at load): its figures include that compile, which a later process on this machine finds "
                           "cached",
    model.ArtifactRecompiled: "a precompiled policy's run compiled what its artifact's mechanism claims to skip "
                              "(each run's claim check names what): its figure is unverified",
    model.InvalidMeasurement: "a run's result differed from the checked run's, or a warm process returned no samples: "
                              "it is left out of the figures",
}  # fmt: skip

_RENDER = {
    model.FirstRunOutlier: _first_run_outlier,
    model.Contended: _contended,
    model.CouldNotMeasureCleanly: withheld_reason,
    model.ContendedKept: _contended_kept,
    model.CompileCountMismatch: _compile_count_mismatch,
    model.Unsynchronised: lambda f: (f"warm {numbered('process', f.processes)}: the timed calls were not synchronised "
                                     "(see each process's sync check): its figure may time dispatch, not the work"),
    model.WarmupUnstable: lambda f: f"warm {numbered('process', f.processes)} did not settle within the warm-up time",
    model.ProcessDisagreement: lambda f: (f"the warm processes' medians differ by {sig(f.max_over_min_median)}x, more "
                                          f"than their own spread explains (Kruskal-Wallis p = {f.p_value:.2g})"),
    model.TickQuantised: lambda f: (f"warm {numbered('process', f.processes)}: the samples sit "
                                    f"{sig(f.tick_s * 1e3)} ms scheduler ticks apart (a thread waiting out a "
                                    "neighbour's time slice)"),
    model.ConversionLeak: lambda f: (f"the process's memory still grew through {f.calls} conversions, by "
                                     f"{sig(f.growth_per_call_bytes)} bytes a call: the route may keep what it converts"),
    model.ConversionWrongValues: lambda f: (f"the route gave other values than its source for {_layouts(f.layouts)} "
                                            "(strides ignored?)"),
    model.CopyEvidenceDisagrees: lambda f: (f"for {_layouts(f.layouts)} the buffers' addresses and a write through the "
                                            "source disagree on whether the route copied: no verdict is given"),
    model.SharedCacheNotWhole: lambda f: (f"after {prose_list(f.groups)} the cache was not whole: a file could not be "
                                          "read, or a fresh process on it still had to compile (see Concurrency)"),
    model.ExplanationDisagrees: _explanation_disagrees,
    model.WarmSharedCompiled: lambda f: (f"in {prose_list(f.groups)} processes compiled although the shared cache was "
                                         "filled first: those figures are not warm (a damaged or foreign cache, or one "
                                         "the runtime would not use; see Concurrency)"),
}  # fmt: skip


def sentence(flag: model.Flag) -> str:
    """The flag's evidence as the sentence every output shows."""
    fixed = _FIXED.get(type(flag))
    return fixed if fixed is not None else _RENDER[type(flag)](flag)
