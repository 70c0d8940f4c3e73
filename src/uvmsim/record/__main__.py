"""``python -m uvmsim.record``: the same as ``uvmsim record``."""
import sys

from .command import main

sys.exit(main())
