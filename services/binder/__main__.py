"""`python -m services.binder`: one binder replica."""

from services.binder.main import main

raise SystemExit(main())
