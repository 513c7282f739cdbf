"""``python -m treeinner``: the ``treeinner`` command line (see ``treeinner.cli``)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
