"""`python -m pmsgate.cli`: the `pmsgate` command, for processes started without the script."""

from pmsgate.cli import main

main()
