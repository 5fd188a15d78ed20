"""`python -m xlanb.selfcheck [--quick | --full] [--json] [--traceback]`: see xlanb/selfcheck/__init__.py.
(Importing xlanb.selfcheck imports the xlanb package first, whose install step makes the xla device.)"""

import sys

from xlanb.selfcheck import main

sys.exit(main())
