import sys

from archspec.cli import main

sys.exit(main())
