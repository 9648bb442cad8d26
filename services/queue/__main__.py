"""`python -m services.queue`: one queue replica."""

from services.queue.main import main

raise SystemExit(main())
