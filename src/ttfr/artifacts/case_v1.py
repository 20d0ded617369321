"""Case files of the first format (`ttfr.case_result.v1`), read as the current one.

v1 held some evidence as sentences: each run's contention `reasons`, a `contended` flag's
`evidence` and a `could_not_measure_cleanly` flag's `reason`. v2 holds numbers and names
(report/flag_text.py writes the sentences). A v1 file is validated against the v1 schema, which
stays as it was published, and then upgraded here, before it is typed: every result directory
and snapshot written so far still reports, validates and compares. Nothing is parsed out of the
old sentences: the numbers they were written from are in the same file, and the verdicts are
recomputed from them by the rules that wrote them (analyse/contention.py).
"""

from __future__ import annotations

import copy

from ttfr.analyse.contention import by_readings, cold_waited, warm_waited
from ttfr.model.case import CASE_SCHEMA

V1_SCHEMA = "ttfr.case_result.v1"


def upgrade(old: dict) -> dict:
    """A schema-valid v1 case document as the v2 document it stands for."""
    new = copy.deepcopy(old)
    new["schema"] = CASE_SCHEMA
    policies = {}
    for name, policy in new["policies"].items():
        warm = "procs" in policy
        runs = policy["procs"] if warm else policy["runs"]
        for run in runs:
            if "contention" in run:
                run["contention"] = _contention(run["contention"], run.get("host"), warm)
        policies[name] = (runs, "process" if warm else "run")
        policy["flags"] = [_flag(flag, runs, "process" if warm else "run") for flag in policy["flags"]]
    # the case's flags repeat its policies' with the policy named (and add its own, unchanged)
    new["flags"] = [_flag(flag, *policies[flag["policy"]]) if flag.get("policy") in policies else flag
                    for flag in new["flags"]]  # fmt: skip
    return new


def _contention(old: dict, host: dict | None, warm: bool) -> dict:
    new = {key: value for key, value in old.items() if key != "reasons"}
    if warm:
        waited = warm_waited(old.get("samples_contended"), old.get("samples_with_evidence"))
    else:
        waited = cold_waited(old.get("wait_fraction"))
    new["waited"] = waited
    # contended, but not by its readings: the runnable-task fallback judged it, on the run's host's cores
    fallback = old["contended"] and not by_readings(waited, old["others_cores"])
    new["runnable_cores"] = (host or {}).get("usable_cores") if fallback else None
    return new


def _ok_contended(runs: list[dict]) -> tuple[list[dict], list[dict]]:
    ok = [run for run in runs if run["outcome"] == "ok"]
    return ok, [run for run in ok if run.get("contention", {}).get("contended")]


def _flag(old: dict, runs: list[dict], unit: str) -> dict:
    kind = old["flag"]
    if kind not in ("contended", "could_not_measure_cleanly"):
        return old
    new = {key: value for key, value in old.items() if key not in ("evidence", "reason", "set_aside")}
    ok, contended = _ok_contended(runs)
    if kind == "could_not_measure_cleanly":
        return {**new, "contended": len(contended), "ok": len(ok), "unit": unit}
    by_index = {run["index"]: run for run in runs}
    indexes = old.get("runs") or old.get("processes") or []
    new["evidence"] = [{"index": index, "contention": by_index[index]["contention"]} for index in indexes]
    if "set_aside" in old:
        new["set_aside"] = {"contended": len(contended), "clean": len(ok) - len(contended), "ok": len(ok)}
    return new
