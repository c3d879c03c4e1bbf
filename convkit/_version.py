"""The package version (a leaf module, so that engine modules can read it without importing
the package itself)."""

__version__ = "0.1.0"
