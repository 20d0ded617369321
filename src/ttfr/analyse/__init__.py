"""Analysis: journal entries -> run figures -> case results -> suite figures; statistics,
comparison statistics and diagnostics."""
