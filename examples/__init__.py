"""Runnable example servers; importable from the repository root (``examples.click_tools:app``)."""
