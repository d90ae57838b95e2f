"""Test doubles that ship with the package, because the tests run them in child processes by
``"module:factory"`` name: benchmarkers that crash, hang or wait on purpose. Never used in production paths.
"""
