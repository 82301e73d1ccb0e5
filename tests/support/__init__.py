"""What the tests share and no test module holds: fixtures, clients, servers and helpers.

Test modules import from here (and from tests/apps); no test module imports another.
"""
