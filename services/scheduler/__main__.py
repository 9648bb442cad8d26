"""`python -m services.scheduler`: one scheduler worker process."""

from services.scheduler.main import main

raise SystemExit(main())
