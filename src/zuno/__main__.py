from zuno.cli import main

raise SystemExit(main())
