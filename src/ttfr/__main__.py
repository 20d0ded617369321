from ttfr.commands.cli import main

raise SystemExit(main())
