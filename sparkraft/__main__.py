"""``python -m sparkraft`` runs the same CLI as the installed ``sparkraft`` script."""
import sys

from sparkraft.cli import main

sys.exit(main())
