"""Paper audits: ``samebits attest`` (the authors' side) and ``samebits audit`` (a reviewer's).

    samebits attest --lockfile paper/conda-lock.yml --prefix ENV \\
        --out paper/reference.attestation.json [--save-outputs paper/outputs]
    samebits audit --lockfile paper/conda-lock.yml \\
        --attestation paper/reference.attestation.json [--prefix ENV | --install ENV]

The audit runs, in order (``pipeline``): the lockfile's parse and integrity; the host
preflight; locating or installing the environment; ``verify env`` against the lock; the
workload suite, with the attestation's own settings and workload list, in the environment's
own interpreter; the comparison with the authors' attestation. It ends in one verdict level
(``verdict``) and writes, atomically and byte-stable for equal results, a JSON document
(``document``), a Markdown and a self-contained HTML report (``report_md``, ``report_html``),
a CycloneDX SBOM of the verified environment (``sbom``) and the reviewer's own attestation.

Modules, one job each:

    verdict     the levels and their exit codes (data), steps, the runtime judgement: pure
    runtime     the interpreter that runs the workloads (``python -m verify.workloads``)
    envcheck    locate or install the environment; ``verify env`` it; its digests vs attested
    pipeline    the ordered steps of ``attest`` and ``audit``
    document    the audit document: facts side by side, workloads x machines, drift, commands
    report_md, report_html, sbom    renderings of the document: pure, text or bytes out

Failures beyond ``samebits.errors`` (the CLI turns them into ``error:`` lines and exit codes):

    SamebitsError
    └── AttestDriftError   exit 1: ``attest`` refuses an environment that is not its lock's

Nothing here imports torch: the workloads and the error statistics run in child processes.
"""
