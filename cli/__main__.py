"""`python -m cli`: the `wovepaper` command without its console script."""

from cli import main

main()
