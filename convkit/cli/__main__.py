"""``python -m convkit.cli``: the ``convkit`` command line (:func:`convkit.cli.main`)."""

from convkit.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
