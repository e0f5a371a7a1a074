"""Lock -> artifacts: conda files, an installed prefix, an OCI image, a Containerfile.

Every renderer here is pure: it takes a ``LockedEnv`` (and facts) and returns text or bytes;
``samebits.cmd_render`` is the edge that writes them. The modules, one job each:

    source.py         LockedEnv: a parsed lock with its origin and digest; per-platform views
    conda.py          explicit file (== `conda-lock render --kind explicit`) and environment.yml
    containerfile.py  containers/<env>/Containerfile and the hash-pinned requirements it installs
    archives.py       archive safety: absolute / .. members and escaping links, refused
    tarball.py        deterministic tar of a prefix, and parallel deterministic gzip
    layers.py         which files go in which layer (CUDA, cuBLAS, cuDNN, NCCL, torch, the rest)
    oci.py            OCI image layout: base layout pinned by digest, config, manifest, index
"""
