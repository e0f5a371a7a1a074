"""Lock -> artifacts: conda files, an installed prefix, an OCI image, a Containerfile.

The renderers take a ``LockedEnv`` (and facts) and return text, bytes or JSON-able values;
``samebits_app.cmd_render`` is the edge that writes them. The modules, one job each:

    source.py         LockedEnv: a parsed lock with its origin and digest; per-platform views
    conda.py          explicit file (== `conda-lock render --kind explicit`) and environment.yml
    containerfile.py  containers/<env>/Containerfile and the hash-pinned requirements it installs
    archives.py       archive safety: absolute / .. members and escaping links, all listed
    tarball.py        deterministic tar of a prefix, and deterministic gzip on every core
    layers.py         which files go in which layer (CUDA, cuBLAS, cuDNN, NCCL, torch, the rest)
    oci.py            OCI JSON (config, manifest, index) and the base layout, re-hashed
    image.py          render oci: install -> verify env -> layers -> layout (the pipeline)
    publish.py        folders that appear whole or not at all (stage beside, then rename)

samebits.install (install a lock's platform into a prefix) is shared by image.py and
`samebits install`.
"""
