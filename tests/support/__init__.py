"""What the tests share and no test module holds: fixtures, clients, servers and helpers.

Test modules import from here (and from tests/apps); no test module imports another. The
root conftest registers the modules that hold fixtures and hooks (its ``pytest_plugins``);
docs/contributing.md says which module holds what.
"""

from pathlib import Path

#: The checkout: the directory holding wsgi.py, gunicorn.conf.py and tests/.
REPO = Path(__file__).resolve().parents[2]
