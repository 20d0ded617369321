"""`ttfr` with its real executors and workers, for the pseudo-terminal test of groups on (a fake) Slurm:
`python tests/support/pty_slurm_driver.py ARGS` runs `ttfr ARGS` as the command line would, with the release
lead the Slurm group tests use (0.3 s ahead, this side looking every 50 ms; tests/test_concurrency_slurm.py
says why the order of events is the same) instead of 2 s a group."""

import sys

from ttfr.commands import cli
from ttfr.measure import slurm_groups

if __name__ == "__main__":
    slurm_groups.RELEASE_LEAD_S, slurm_groups.POLL_S = 0.3, 0.05
    sys.exit(cli.main(sys.argv[1:]))
