"""Alembic environment and revisions of the registry database, shipped in the wheel."""
