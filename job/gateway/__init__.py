"""Ray's Job Submission API in front of the queue (`python -m job gateway`, server.py)."""
