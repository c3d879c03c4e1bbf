"""Heavy modules are imported lazily: `import convkit` stays fast."""

import subprocess
import sys


def test_import_convkit_does_not_load_heavy_modules():
    code = (
        "import sys, convkit\n"
        "heavy = ('sympy', 'matplotlib', 'pandas', 'seaborn', 'dask', 'numba', 'networkx')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
