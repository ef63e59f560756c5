import sys

from stamplib.cli import main

sys.exit(main())
