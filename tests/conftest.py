"""Shared pytest configuration: warnings are errors (pyproject.toml), tables use ids."""
