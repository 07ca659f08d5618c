"""A fair-share batch scheduler for Ray clusters.

Programs that enqueue jobs call `job.api.submit`; operators use `python -m job`.
"""
