"""`python -m xlanb.compat script.py args...`: runs a torch_xla script unchanged on xlanb.

The compat layer is installed, then the script runs as `__main__` with `sys.argv` set to
`[script.py, args...]` and its directory first on sys.path, as `python script.py args...` would.
"""

from __future__ import annotations

import os
import runpy
import sys

USAGE = "usage: python -m xlanb.compat script.py [args...]"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        raise SystemExit(0 if argv else 2)
    script = argv[0]
    if not os.path.isfile(script):
        print(f"xlanb.compat: no such script: {script}\n{USAGE}", file=sys.stderr)
        raise SystemExit(2)
    import xlanb.compat
    xlanb.compat.install()
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
