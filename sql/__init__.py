"""The schema migrations, NNNN_name.sql, applied in name order by `python -m job migrate`.

This folder is the package job.migrations: pyproject.toml maps it into the wheel, the editable
install finds it here, and the Dockerfile copies it to /app/job/migrations. job/store/migrations.py
reads the files through importlib.resources, so they must stay package data of job.migrations."""
