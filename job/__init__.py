"""A fair-share batch scheduler for Ray clusters.

Programs that enqueue jobs call `job.queue.submit`; operators use `python -m job`.
"""
