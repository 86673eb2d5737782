"""``python -m conformance.cli``: the same as the ``gpuconf`` console script."""

import sys

from conformance.cli.main import main

sys.exit(main())
