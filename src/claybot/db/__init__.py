"""What several processes or machines share: SQLite by default, PostgreSQL when configured."""
