"""Lock -> artifacts: conda files, an installed prefix, an OCI image, a Containerfile.

The renderers take a ``LockedEnv`` (``samebits.lock.read``: a parsed lock with its origin
and digest; per-platform views) and return text, bytes or JSON-able values;
``samebits_app.cmd_render`` is the edge that writes them. The modules, one job each:

    conda.py          explicit file (== `conda-lock render --kind explicit`) and environment.yml
    containerfile.py  containers/<env>/Containerfile and the hash-pinned requirements it installs
    tarball.py        deterministic tar of a prefix, and deterministic gzip on every core
    layers.py         which files go in which layer (CUDA, cuBLAS, cuDNN, NCCL, torch, the rest)
    oci.py            OCI JSON (config, manifest, index) and the base layout, re-hashed
    image.py          render oci: install -> verify env -> layers -> layout (the pipeline)
    nixstore.py       the Nix store paths of a lock's files

samebits.install (install a lock's platform into a prefix) is shared by image.py and
`samebits install`; archive safety (``samebits.archives``) and folders that appear whole
(``samebits.staging``) are the core's.
"""

DEFAULT_PREFIX = "/opt/env"  # where an image puts the environment
