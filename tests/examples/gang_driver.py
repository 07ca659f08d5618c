"""A job's driver that claims its bundles as Ray Train would: its own placement group of the
bundles the scheduler planned (JOB_BUNDLES), each pinned to its planned node, then holds them for
the seconds given."""

import json
import os
import sys
import time

import ray
from ray.util.placement_group import placement_group

ray.init()
bundles = json.loads(os.environ["JOB_BUNDLES"])
began = time.monotonic()
group = placement_group([b["resources"] for b in bundles], strategy=os.environ["JOB_BUNDLE_STRATEGY"],
                        bundle_label_selector=[{"ray.io/node-id": b["node"]} for b in bundles])
ready = group.wait(timeout_seconds=30)
print(f"placement group ready={ready} after {time.monotonic() - began:.1f} s on "
      f"{','.join(b['node'][:8] for b in bundles)}", flush=True)
if not ready:
    sys.exit(3)
time.sleep(float(sys.argv[1]))
