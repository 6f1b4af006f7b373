import sys

from trader.cli import main

sys.exit(main())
