"""Persistence: SQLAlchemy 2 models, repositories and Alembic migrations.

All database access lives here; services call repositories, never build queries.
"""
