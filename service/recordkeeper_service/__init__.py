"""The recordkeeper registry service (FastAPI + SQLAlchemy). Build it with ``create_app``."""
