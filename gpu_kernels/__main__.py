import sys

from gpu_kernels.cli import main

sys.exit(main())
