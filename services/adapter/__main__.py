"""`python -m services.adapter`: one adapter replica (leader-elected)."""

from services.adapter.main import main

raise SystemExit(main())
