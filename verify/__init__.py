"""verify: prove an installed environment and a machine's numerics match a lock and a reference.

Runs inside the environment under test, so it imports only the standard library, packaging,
pyelftools and (for workloads) torch at module level of the parts that need them.
"""
