"""``python -m torchrl_dreamer`` is ``python -m torchrl_dreamer.train`` (train / eval / bench)."""

import sys

from torchrl_dreamer.train import main

if __name__ == "__main__":
    sys.exit(main())
