"""`python -m ccbench` runs the command-line interface."""

from ccbench.cli import main

if __name__ == "__main__":
    main()
