"""`python -m services.dashboard`: the dashboard."""

from services.dashboard.main import main

raise SystemExit(main())
