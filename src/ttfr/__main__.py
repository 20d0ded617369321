from ttfr.cli import main

raise SystemExit(main())
