"""`python -m services.scheduler.worker`: one scheduler worker process."""

from services.scheduler.worker.main import main

raise SystemExit(main())
