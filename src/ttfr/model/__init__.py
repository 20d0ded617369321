"""The typed result model: what flows between the stages, declared once.

    RunRecord (the worker's record, parsed where it arrives)
      -> JournalEntry (one finished task: the record, the parent's readings around it)
      -> RunFigures / WarmProcess (one run's figures, analyse/runs.py)
      -> CaseResult (a case's policies, summaries, check, flags and verdict)
      -> SuiteResult (the suite index)
    plus the loop figures (model/loops.py) and the comparison of two arms (model/comparison.py).

Every type is a frozen msgspec Struct. Artifacts are their encodings; the JSON Schemas under
ttfr/artifacts/schemas/ are generated from them (model/schemas.py), so a field added to a
type reaches the schema, every reader (which decodes into the type) and every report that
renders it. Nothing here imports a stage package: measure, analyse, artifacts and report
all build on it.
"""
