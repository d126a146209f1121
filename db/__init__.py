"""The data layer: the pool, migrations and every SQL statement of the project."""
