"""``python -m dsh_acp``: the same as the ``dsh-acp`` command."""

import sys

from dsh_acp.cli._main import main

sys.exit(main())
