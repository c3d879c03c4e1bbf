"""``python -m convkit.sweep``: the ``convkit sweep`` command line (:mod:`convkit.cli.sweep`)."""

from convkit.cli.sweep import main

if __name__ == "__main__":
    raise SystemExit(main())
