import sys

from rblock.cli.main import main

sys.exit(main())
