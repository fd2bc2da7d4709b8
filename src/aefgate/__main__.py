"""``python -m aefgate``: the same command line as the ``aefgate`` console script."""

from aefgate.cli.app import main

if __name__ == "__main__":
    main()
