"""`python -P -m anamnesis.hooks <event>`: always exits 0 (a memory hook never blocks a session)."""

import sys

from anamnesis.hooks.run import main

sys.exit(main())
