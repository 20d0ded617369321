"""`ttfr export --format openmetrics DIR DEST` (and `--format prometheus`): a result
directory's figures for dashboards, through prometheus_client's own exposition writers.

- `openmetrics`: OpenMetrics 1.0 text (`# EOF`, a stateset for the case status, an info
  metric for the snapshot), for a Prometheus or Grafana Agent that scrapes OpenMetrics;
- `prometheus`: the classic text format 0.0.4, which node_exporter's textfile collector reads
  (write DEST into its `--collector.textfile.directory`, with a `.prom` name).

Gauges per case (labels case, backend, workload, size, dtype; cold figures also policy):
`ttfr_ttfr_seconds{quantile}` and `ttfr_compile_seconds{quantile}` over a policy's headline
runs (quantile 0 and 1: the fastest and slowest, 0.5: the median, 0.95), `ttfr_runs`,
`ttfr_compile_cache_hit_ratio`, `ttfr_warm_call_seconds{quantile}` over the warm processes'
medians, `ttfr_peak_rss_bytes` (median), `ttfr_case_status{status}`. A conversion case (issue 28)
adds its case result's conversion figures: `ttfr_conversion_copied` (1 copied, 0 zero-copy),
`ttfr_conversion_first_call_seconds`, `ttfr_conversion_call_seconds`,
`ttfr_conversion_bytes_per_second` and `ttfr_conversion_memcpy_ratio` (where the route copied),
`ttfr_conversion_memcpy_bytes_per_second`, `ttfr_conversion_leak_bytes_per_call`. A figure that
does not exist (no copy verdict, no rate) is left out, never written as 0. A case run with `--concurrency`
(issue 29) adds its case result's concurrency, per sharing mode and group size (labels mode, n):
`ttfr_concurrency_ttfr_seconds{quantile}` (0.5: p50, 0.95: p95 by nearest rank, 1: the slowest),
`ttfr_concurrency_all_results_seconds`, `ttfr_concurrency_dedup_ratio`, `ttfr_concurrency_written_bytes`,
`ttfr_concurrency_blocked_seconds`, `ttfr_concurrency_runq_wait_seconds`, `ttfr_concurrency_processes`,
`ttfr_concurrency_groups`, `ttfr_concurrency_cache_whole` (1/0) and `ttfr_concurrency_oversubscribed`
(1: N > usable cores); per n the fan-out advice `ttfr_concurrency_advice_{together,warm_up,fan_out,
warm_up_first,saving}_seconds`; `ttfr_concurrency_usable_cores`. Here too a figure the case result
does not hold is left out. A case run with `--explain` (issue 38) adds, per cold policy and phase, its
explanation's distribution rows: `ttfr_explain_import_seconds{phase, distribution}` (the largest six and
`other`, never a series per module), and where the first call compiled its parts by the runtime's counters,
`ttfr_explain_first_call_seconds{part}` (one per part, `unattributed` among them; never a series per frame).
No timestamps: the textfile collector refuses them;
the snapshot's time is in `ttfr_snapshot_info`'s labels.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import exposition
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, InfoMetricFamily, StateSetMetricFamily
from prometheus_client.openmetrics import exposition as openmetrics_exposition

from ttfr.analyse import stats
from ttfr.artifacts.export import tidy
from ttfr.artifacts.reader import VerifiedResult
from ttfr.artifacts.store import write_bytes_atomic
from ttfr.model.base import present
from ttfr.model.case import CaseResult, Conversion
from ttfr.model.concurrency import Concurrency
from ttfr.model.policies import WARM_PROCESS
from ttfr.model.summary import Summary

FORMATS = ("openmetrics", "prometheus")
_CASE_LABELS = ["case", "backend", "workload", "size", "dtype"]
_QUANTILES = (("0", "min"), ("0.5", "median"), ("0.95", "p95"), ("1", "max"))
_STATUSES = ("ok", "warn", "failed")


def _labels(case: CaseResult) -> list[str]:
    return [case.case, case.backend, case.workload, str(case.size), case.dtype]


class _Snapshot:
    """A prometheus_client collector over one verified result directory."""

    def __init__(self, verified: VerifiedResult):
        self.verified = verified

    def collect(self):
        suite, cases = self.verified.suite, self.verified.cases
        info = InfoMetricFamily("ttfr_snapshot", "the ttfr snapshot these figures come from")
        info.add_metric([], {"snapshot_id": suite.snapshot_id, "created_at": suite.created_at,
                             "ttfr_version": suite.ttfr_version, "profile": suite.profile,
                             "state": suite.state})  # fmt: skip
        yield info
        ttfr = GaugeMetricFamily("ttfr_ttfr_seconds", "time to first result of fresh processes (spawn to first result)",
                                 labels=[*_CASE_LABELS, "policy", "quantile"])  # fmt: skip
        compile_s = GaugeMetricFamily("ttfr_compile_seconds", "compile stages of the first call (trace, lower, compile; "
                                      "dynamo, AOTAutograd, Inductor)", labels=[*_CASE_LABELS, "policy", "quantile"])  # fmt: skip
        runs = GaugeMetricFamily("ttfr_runs", "fresh processes a cold policy's figures come from (contended runs set aside)",
                                 labels=[*_CASE_LABELS, "policy"])  # fmt: skip
        hit_ratio = GaugeMetricFamily("ttfr_compile_cache_hit_ratio", "persistent compilation cache hits / requests "
                                      "over a policy's runs", labels=[*_CASE_LABELS, "policy"])  # fmt: skip
        warm = GaugeMetricFamily("ttfr_warm_call_seconds", "steady-state seconds per call (over warm processes' medians)",
                                 labels=[*_CASE_LABELS, "quantile"])  # fmt: skip
        rss = GaugeMetricFamily("ttfr_peak_rss_bytes", "peak resident memory of a cold run (median)", labels=_CASE_LABELS)
        status = StateSetMetricFamily("ttfr_case_status", "the case's status", labels=_CASE_LABELS)
        conversion = {name: GaugeMetricFamily(f"ttfr_conversion_{name}", text, labels=_CASE_LABELS)
                      for name, text in _CONVERSION.items()}  # fmt: skip
        together = _ConcurrencyFamilies()
        explained = GaugeMetricFamily("ttfr_explain_import_seconds", "--explain: seconds a phase's imports spent in a "
                                      "distribution's modules (the largest six and `other`: they add up to the phase)",
                                      labels=[*_CASE_LABELS, "policy", "phase", "distribution"])  # fmt: skip
        first_call = GaugeMetricFamily("ttfr_explain_first_call_seconds", "--explain: the first call's parts by the "
                                       "runtime's counters (and `unattributed`: they add up to it)",
                                       labels=[*_CASE_LABELS, "policy", "part"])  # fmt: skip
        for case in cases:
            labels = _labels(case)
            status.add_metric(labels, {name: case.status == name for name in _STATUSES})
            if present(case.conversion):
                for name, value in _conversion_figures(case.conversion):
                    if value is not None:
                        conversion[name].add_metric(labels, value)
            if present(case.concurrency):
                together.add(labels, case.concurrency)
            peak = case.memory.peak_rss_bytes
            if peak:
                rss.add_metric(labels, peak.median)
            for policy, block in case.policies.items():
                if policy == WARM_PROCESS:
                    _quantiles(warm, labels, block.figure("call_s"))
                    continue
                for phase, row in tidy.explained_distributions(block):
                    explained.add_metric([*labels, policy, phase, row.distribution], row.self_s)
                for part in tidy.explained_first_call(block):
                    first_call.add_metric([*labels, policy, part.part], part.s)
                summary = block.figure("ttfr_s")
                _quantiles(ttfr, [*labels, policy], summary)
                if summary:
                    runs.add_metric([*labels, policy], summary.n)
                if case.status != "failed":  # a failed case has no figures (its summaries are null)
                    chosen = block.figure_runs()
                    _quantiles(compile_s, [*labels, policy], stats.summarize([tidy.compile_seconds(r) for r in chosen]))
                verification = block.cache_verification
                hits, misses = verification.hits_total, verification.misses_total
                if hits is not None and misses is not None and hits + misses > 0:
                    hit_ratio.add_metric([*labels, policy], hits / (hits + misses))
        yield from (ttfr, compile_s, runs, hit_ratio, warm, rss, status)
        yield from (family for family in conversion.values() if family.samples)
        yield from together.families()
        yield from (family for family in (explained, first_call) if family.samples)


_CONVERSION = {
    "copied": "1 where the conversion route copied its contiguous source, 0 where the result shares its memory",
    "first_call_seconds": "the first conversion in a fresh process (cold-cache median)",
    "call_seconds": "seconds per conversion, steady state (warm-process median)",
    "bytes_per_second": "bytes converted a second where the route copied (bytes counted once)",
    "memcpy_bytes_per_second": "np.copyto of the same bytes into a touched destination, in the same process",
    "memcpy_ratio": "memcpy's time / the route's warm call, where the route copied (1: as fast as memcpy)",
    "leak_bytes_per_call": "the process's RSS growth per conversion over the leak probe",
}


def _conversion_figures(conversion: Conversion):
    """(family, value) of a case's conversion figures, as its case result holds them (None: none)."""
    evidence = conversion.evidence
    yield "copied", None if evidence.copied is None else int(evidence.copied)
    yield "first_call_seconds", conversion.first_call_s
    yield "call_seconds", conversion.call_s
    yield "bytes_per_second", conversion.bytes_per_s
    yield "memcpy_bytes_per_second", conversion.memcpy_bytes_per_s
    yield "memcpy_ratio", conversion.memcpy_fraction
    yield "leak_bytes_per_call", evidence.leak.growth_per_call_bytes


_CONCURRENCY = {  # family: (help, the point's field)
    "all_results_seconds": ("the group's first spawn to the last process's first result (median over the groups)",
                            "all_results_s"),
    "dedup_ratio": ("compilations performed / distinct programs (1: each program compiled once, N: by every process), "
                    "median over the groups", "dedup_ratio"),
    "written_bytes": ("bytes a group added to its cache directories (median over the groups)", "bytes_written"),
    "blocked_seconds": ("process time - CPU time - run-queue wait: blocked on a lock or I/O (median over the processes)",
                        "blocked_s"),
    "runq_wait_seconds": ("time the worker's threads were runnable but waiting for a CPU, summed over its threads "
                          "(median over the processes)", "runq_wait_s"),
    "processes": ("ok processes the percentiles are taken over", "processes"),
    "groups": ("groups (rounds) of this mode and size", "groups"),
}  # fmt: skip
_ADVICE = {
    "together": ("all N started together on an empty shared cache: time until all have a result", "together_s"),
    "warm_up": ("one warm-up process first (cold-shared at N=1, else the cold-cache TTFR)", "warm_up_s"),
    "fan_out": ("then N on the cache it filled (warm-shared at N): time until all have a result", "fan_out_s"),
    "warm_up_first": ("warm-up and fan-out together", "warm_up_first_s"),
    "saving": ("together - warm-up first (negative: starting together was faster)", "saving_s"),
}


class _ConcurrencyFamilies:
    """The `ttfr_concurrency_*` families, filled case by case from each case's concurrency as it holds it."""

    def __init__(self):
        point = [*_CASE_LABELS, "mode", "n"]
        self.ttfr = GaugeMetricFamily("ttfr_concurrency_ttfr_seconds", "time to first result of each of N processes "
                                      "started at once (quantile 0.95: nearest rank)", labels=[*point, "quantile"])  # fmt: skip
        self.points = {name: GaugeMetricFamily(f"ttfr_concurrency_{name}", text, labels=point)
                       for name, (text, _field) in _CONCURRENCY.items()}  # fmt: skip
        self.whole = GaugeMetricFamily("ttfr_concurrency_cache_whole", "1 where every group's cache was whole "
                                       "afterwards (readable, and a fresh process compiled nothing), else 0",
                                       labels=point)  # fmt: skip
        self.oversubscribed = GaugeMetricFamily("ttfr_concurrency_oversubscribed", "1 where N > the usable cores "
                                                "(queueing for a CPU expected)", labels=point)  # fmt: skip
        self.advice = {name: GaugeMetricFamily(f"ttfr_concurrency_advice_{name}_seconds", text, labels=[*_CASE_LABELS, "n"])
                       for name, (text, _field) in _ADVICE.items()}  # fmt: skip
        self.cores = GaugeMetricFamily("ttfr_concurrency_usable_cores", "the usable cores the groups ran on",
                                       labels=_CASE_LABELS)  # fmt: skip

    def add(self, labels: list[str], concurrency: Concurrency) -> None:
        if concurrency.usable_cores is not None:
            self.cores.add_metric(labels, concurrency.usable_cores)
        for p in (p for p in concurrency.points if p.measured_as is None):  # not another mode's run twice
            at = [*labels, p.mode, str(p.n)]
            for quantile, value in (("0.5", p.ttfr_p50_s), ("0.95", p.ttfr_p95_s), ("1", p.ttfr_max_s)):
                if value is not None:
                    self.ttfr.add_metric([*at, quantile], value)
            for name, (_text, field) in _CONCURRENCY.items():
                value = getattr(p, field)
                if value is not None:
                    self.points[name].add_metric(at, value)
            if p.whole is not None:
                self.whole.add_metric(at, int(p.whole))
            if p.oversubscribed is not None:
                self.oversubscribed.add_metric(at, int(p.oversubscribed))
        for advice in concurrency.fan_out:
            for name, (_text, field) in _ADVICE.items():
                value = getattr(advice, field)
                if value is not None:
                    self.advice[name].add_metric([*labels, str(advice.n)], value)

    def families(self):
        every = [self.ttfr, *self.points.values(), self.whole, self.oversubscribed, *self.advice.values(), self.cores]
        return [family for family in every if family.samples]


def _quantiles(family: GaugeMetricFamily, labels: list[str], summary: Summary | None) -> None:
    if summary:
        for quantile, key in _QUANTILES:
            family.add_metric([*labels, quantile], getattr(summary, key))


def render(verified: VerifiedResult, fmt: str = "openmetrics") -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(verified))
    writer = openmetrics_exposition if fmt == "openmetrics" else exposition
    return writer.generate_latest(registry)


def export(verified: VerifiedResult, dest: Path, fmt: str = "openmetrics") -> Path:
    write_bytes_atomic(dest, render(verified, fmt))  # atomic: a collector never reads half a file
    return dest
