"""``python -m routegate ...``: the same command line as the ``routegate`` script."""

import sys

from routegate.cli import main

if __name__ == "__main__":
    sys.exit(main())
