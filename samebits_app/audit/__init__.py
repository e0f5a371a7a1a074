"""Paper audits: ``samebits attest`` (the authors' side) and ``samebits audit`` (a reviewer's).

    samebits attest PAPER --prefix ENV      # PAPER/samebits-paper.toml: its inputs, its
                                            # commands, then the suite
                                            # -> PAPER/reference.attestation.json
    samebits audit PAPER [--prefix ENV | --target DIR]
    samebits audit paper/conda-lock.yml \\
        --attestation paper/reference.attestation.json [--prefix ENV | --target DIR]

The audit runs, in order (``pipeline``): the lockfile's parse and integrity; with a paper,
its code and inputs against the attested ones; the host preflight; locating or installing the
environment; ``verify env`` against the lock; with a paper manifest, the paper's commands
(``samebits_app.paper``); the workload suite, with the attestation's own settings and workload
list, in the environment's own interpreter; the comparison with the authors' attestation, and
then the comparison of the commands' outputs. It ends in one verdict level and one story
(``verdict``: every reason with its cause, the divergences it explains under it; a section
whose step did not run says "not checked") and writes, atomically and byte-stable for equal
results, a JSON document (``document``), a Markdown and a self-contained HTML report (``report_md``,
``report_html``, ``report_paper``), a CycloneDX SBOM of the verified environment (``sbom``)
and the reviewer's own attestation.

Modules, one job each:

    verdict       the levels and their exit codes (data), steps, the runtime judgement: pure
    runtime       the interpreter that runs the workers (workloads, error statistics)
    envcheck      locate or install the environment; ``verify env`` it; its digests vs attested
    common        what both sides share: the host platform, the Statement, the suite and its
                  fingerprints, lower bounds from two sets of fingerprints
    attesting     the ordered steps of ``attest``
    pipeline      the ordered steps of ``audit``
    document      the audit document: facts side by side, workloads x machines, the paper's
                  commands, drift, commands to reproduce
    report_md, report_html, report_paper, sbom    renderings of the document: pure
    source        a paper where it lives: a git URL at one commit (or a ref resolved once),
                  fetched alone into the cache under a flock
    deposit       a paper deposited as an archive: downloaded, proved by its sha256, unpacked
                  by the package archives' rules
    papers        ``audit --many``: the committee's list, each paper as a task, its row
    many          tasks here (``--jobs N``) or as one Slurm job array and a gather job
    summary       the summary of many audits (JSON, Markdown, HTML): pure
    batch         the ``--many`` command around those three

Failures beyond ``samebits.errors`` (the CLI turns them into ``error:`` lines and exit codes):

    SamebitsError
    ├── AttestDriftError   exit 1: ``attest`` refuses an environment that is not its lock's
    ├── PaperRunError      exit 1: ``attest`` refuses a paper command that fails
    ├── PaperInputError    exit 1: ``attest`` refuses an [[inputs]] file that is not its sha256
    └── ManifestError      exit 2: a paper manifest's problems, all listed

Nothing here imports torch: the workloads and the error statistics run in child processes.
"""
