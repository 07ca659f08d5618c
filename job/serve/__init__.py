"""What `python -m job share` and `python -m job serve` show: the fair-share report, the Prometheus
metrics and the status page, read from PostgreSQL with a few aggregate statements."""
