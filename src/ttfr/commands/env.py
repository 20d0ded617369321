"""`ttfr env`: the environment manifest a run would record."""

from __future__ import annotations

import json

from rich.console import Console

from ttfr.model.policies import POLICIES

NAME = "env"


def add_parser(commands):
    env = commands.add_parser(NAME, help="print the environment manifest a run would record")
    return env


def handle(args, _console: Console) -> int:
    from ttfr.artifacts import manifest

    print(json.dumps(manifest.collect(["ttfr", *args.argv], policies=POLICIES), indent=2, sort_keys=True))
    return 0
