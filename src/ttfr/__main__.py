from ttfr.commands.entry import main

raise SystemExit(main())
