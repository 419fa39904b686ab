"""`python -m support.sglang_fake --script FILE.json [--host H] [--port 0] [--port-file PATH]`."""

import sys

from support.sglang_fake.launcher import main

sys.exit(main())
