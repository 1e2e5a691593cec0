"""pytest plugin for dbfork: fresh, pre-seeded databases for every test."""

from .client import Client, DbforkError, Lease, default_store, find_socket

__all__ = ["Client", "DbforkError", "Lease", "default_store", "find_socket"]
