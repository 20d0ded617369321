"""Measurement: spec -> plan -> scheduler -> spawn (one worker process per task), with the
backend catalogue, cache policies, the journal and the datasets a run uses."""
