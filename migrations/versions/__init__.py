"""Alembic revisions of the registry schema (generated with autogenerate; never edited by hand)."""
