"""``python -m sparkraft`` runs the same CLI as the installed ``sparkraft`` script."""
from sparkraft.cli import run

run()
