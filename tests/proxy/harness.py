"""The proxy harness under the name benchmarks/proxy.py imports; it lives in tests/support/proxies.py."""

from tests.support.proxies import HAProxy, Instance, find_binary

__all__ = ["HAProxy", "Instance", "find_binary"]
