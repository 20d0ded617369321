"""Commands: the CLI parses; run / ab / compare / selftest orchestrate the stages below."""
