"""Every exit code ttfr's commands return (imports nothing)."""

EXIT_OK = 0
EXIT_CASE_FAILED = 1  # a case failed to run, or an artifact is invalid
EXIT_USAGE = 2  # bad input, found before anything ran
EXIT_REGRESSION = 3  # a comparison's gate found a regression (or inconclusive, with --fail-on inconclusive)
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGTERM: finished cases are written
