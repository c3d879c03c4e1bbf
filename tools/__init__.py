"""Maintenance scripts of the repository (not part of the installed package)."""
