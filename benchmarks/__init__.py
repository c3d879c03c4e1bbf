"""Speed and scaling measurements (``make bench``) and reference implementations."""
