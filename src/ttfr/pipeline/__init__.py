"""The pipeline: plan -> schedule -> spawn -> journal -> analyse -> write, as the commands use it.

suite.py runs one suite (start, execute, resume, write the results); precision_phase.py adds
runs for --precision; interleaved.py runs two arms round by round (`ttfr ab`) and
comparison.py judges B against A; shards.py merges the shards of one plan; slurm.py runs a
plan as a Slurm job array; replication.py runs a published snapshot's plan again; selftest.py
measures this machine's noise with A/A and injected comparisons. Commands (ttfr.commands)
parse options and call these; none of them imports another command.
"""
