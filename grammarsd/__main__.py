"""``python -m grammarsd``: the same command line as the ``grammarsd`` console script."""

import sys

from grammarsd.api.cli import main

sys.exit(main())
