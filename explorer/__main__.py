"""Entry point of ``python -m explorer``."""

import sys

try:
    from explorer.cli import main
except KeyboardInterrupt:  # Ctrl-C while the modules load: the same sentence as during a run
    sys.stderr.write("interrupted.\n")
    raise SystemExit(130) from None

raise SystemExit(main())
