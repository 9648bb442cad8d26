"""`python -m services.agent`: one node agent replica."""

from services.agent.main import main

raise SystemExit(main())
