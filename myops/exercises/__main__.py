"""`python -m myops.exercises ...`: the command line, and the server that forks the process each check runs in."""
import sys

from myops.exercises import main

sys.exit(main())
