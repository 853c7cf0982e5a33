"""``python -m dsh_acp``: the same as the ``dsh-acp`` command."""

import sys

from ._cli import main

sys.exit(main())
