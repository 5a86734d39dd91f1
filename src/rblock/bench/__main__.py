"""`python -m rblock.bench [flags]`."""

from __future__ import annotations

from rblock.bench.harness import main

raise SystemExit(main())
