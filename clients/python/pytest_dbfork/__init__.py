"""pytest plugin for dbfork: fresh, pre-seeded databases for every test."""

from .client import Client, Database, DbforkError, Lease, find_binary, find_socket

__all__ = ["Client", "Database", "DbforkError", "Lease", "find_binary", "find_socket"]
