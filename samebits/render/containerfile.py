"""containers/<env>/Containerfile: the locked environment, installed by hash, then verified.

One Containerfile serves every platform of the lock: BuildKit's ``TARGETARCH`` picks the
platform's files. Build it from the repository root, whose context holds lockfiles/, containers/,
samebits/ and verify/. What it does, in order:

- ``FROM`` the base, pinned by digest (``--base REF@sha256:...`` at render time). Without one,
  the default is ``BASE_PLACEHOLDER``, whose all-zero digest exists nowhere: the build fails until
  a real digest is given, rather than silently pulling whatever a tag points at today.
- a lock with a conda part: a micromamba stage (pinned the same way) creates /opt/env from the
  explicit file, which checks every package's md5; the final stage copies /opt/env.
- the PyPI part: pip installs the wheels of ``<platform>.requirements.txt`` (URL + sha256 each)
  with ``--require-hashes --no-deps --only-binary=:all:`` into a venv at /opt/env (the base's
  Python) or into the conda prefix (its Python). Nothing is resolved. Where the lock records
  paths two wheels write with different bytes (``samebits.lock.shared``: the last writer's
  file stays, as pip installs them with their dependencies), ``--no-deps`` would leave pip's
  order to the names alone; so the writers after the first go in later files,
  ``<platform>.requirements-2.txt`` and on, each installed after the one before: every path
  ends with the bytes the lock records. A lock without such paths renders as before.
- the last step runs ``python -m verify env`` against the lock; a drift fails the build. The
  verifier runs from a throwaway venv that is removed in the same step, so the image holds only
  the locked environment. Its dependencies are installed by hash like everything else:
  ``containers/verifier.requirements.txt`` (``VERIFIER_REQUIREMENTS``: samebits' own
  dependencies resolved for every Python and platform with ``--generate-hashes``, wheels
  only), with ``--no-deps --require-hashes``; samebits' core and verify run from the copied
  source on ``PYTHONPATH`` (nothing is built).

It cannot be built here (no container daemon); ``samebits render oci`` builds the same prefix
into an image without one. The texts are pure functions of the lock and the options.
"""

from __future__ import annotations

import hashlib
import sys
import textwrap

from samebits._io import canonical_json
from samebits.lock.model import LockedPackage
from samebits.lock.read import LockedEnv
from samebits.render import DEFAULT_PREFIX
from samebits.render.conda import EXPLICIT_SUFFIX, render_explicit

REQUIREMENTS_SUFFIX = ".requirements.txt"
# the verifier's own dependencies, pinned by hash (repository root-relative; refreshed by
# this repository's `nox -s verifier_lock` when pyproject.toml's dependencies change)
VERIFIER_REQUIREMENTS = "containers/verifier.requirements.txt"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
ZERO = "0" * 64
BASE_PLACEHOLDER = f"docker.io/library/python:{{python}}-slim-bookworm@sha256:{ZERO}"
CONDA_BASE_PLACEHOLDER = f"docker.io/library/debian:bookworm-slim@sha256:{ZERO}"
MICROMAMBA_PLACEHOLDER = f"docker.io/mambaorg/micromamba:2-bookworm-slim@sha256:{ZERO}"
TARGETARCH = {"linux-64": "amd64", "linux-aarch64": "arm64"}


def verifier_inputs(pyproject: str, exclude_newer: str) -> str:
    """The sha256 of what ``VERIFIER_REQUIREMENTS`` is resolved from: pyproject.toml's
    ``dependencies`` and ``requires-python`` and the resolution's exclude-newer, written in the
    file's header so that a stale file is found (tests/integration/test_render_containerfile.py)."""
    project = tomllib.loads(pyproject)["project"]
    doc = {"dependencies": sorted(project.get("dependencies", [])),
           "requires-python": project.get("requires-python"), "exclude-newer": exclude_newer}
    return hashlib.sha256(canonical_json(doc)).hexdigest()


def _pip_line(p: LockedPackage) -> str:
    return f"{p.name} @ {p.url} --hash=sha256:{p.sha256}"


def pip_stages(env: LockedEnv, platform: str) -> list[list[LockedPackage]]:
    """The PyPI part of ``platform`` in the stages pip must place it in
    (``samebits.lock.shared.install_stages``): one stage for a lock without shared paths."""
    from samebits.lock.shared import install_stages, shared_of

    return install_stages(sorted(env.pip(platform), key=lambda p: p.name),
                          shared_of(env.lock.custom, platform, file=env.origin))


def stage_file(platform: str, stage: int) -> str:
    """``<platform>.requirements.txt``, then ``<platform>.requirements-2.txt`` and on."""
    from samebits.lock.shared import stage_name

    return stage_name(f"{platform}{REQUIREMENTS_SUFFIX}", stage)


def render_requirements(env: LockedEnv, platform: str, stage: int = 0) -> str:
    """The PyPI part of ``platform`` (its ``stage``, ``pip_stages``) as pip requirements: one URL
    and sha256 per wheel."""
    env.check_platform(platform)
    stages = pip_stages(env, platform)
    lines = [
        f"# samebits: the PyPI part of {env.name} on {platform}, from {env.origin}",
        f"# (sha256 {env.digest}).",
        "# Every wheel by URL and hash; install with",
        "#   pip install --no-deps --require-hashes --only-binary=:all: -r THIS_FILE",
    ]
    if len(stages) > 1:
        order = ", ".join(stage_file(platform, k) for k in range(len(stages)))
        lines += ["# Install the stages in this order, each after the one before: " + order,
                  "# (a later stage's wheels write paths an earlier one's write too, and the "
                  "lock records",
                  "# the later one's bytes there: pip's order with dependencies)."]
    lines += [_pip_line(p) for p in (stages[stage] if stages else [])]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> list[str]:
    return textwrap.wrap(text, width=96, initial_indent="# ", subsequent_indent="# ",
                         break_long_words=False, break_on_hyphens=False)


def _is_pinned(ref: str) -> bool:
    return "@sha256:" in ref and not ref.endswith(ZERO)


def _arch_case(env: LockedEnv) -> str:
    arms = " ".join(f"{TARGETARCH[p]}) platform={p} ;;" for p in env.platforms if p in TARGETARCH)
    return (f'case "$TARGETARCH" in {arms} *) echo "{env.name}: no lock for $TARGETARCH" >&2; '
            "exit 1 ;; esac; echo \"$platform\" > /opt/samebits/platform")


def render_containerfile(env: LockedEnv, *, base: str | None = None,
                         micromamba: str | None = None, prefix: str = DEFAULT_PREFIX) -> str:
    """The Containerfile text for ``env``; ``base`` / ``micromamba`` are REF@sha256:... ."""
    has_conda = any(env.conda(p) for p in env.platforms)
    has_pip = any(env.pip(p) for p in env.platforms)
    python = env.python or "3"
    default_base = (CONDA_BASE_PLACEHOLDER if has_conda
                    else BASE_PLACEHOLDER.format(python=python))
    base = base or default_base
    mm = micromamba or MICROMAMBA_PLACEHOLDER
    gpu = bool(env.cuda)
    d = f"containers/{env.name}"
    plats = ", ".join(env.platforms)
    what_base = (f"pinned by digest at render time: {base}" if _is_pinned(base) else
                 "NOT pinned: the digest below is a placeholder (all zeros) that exists nowhere, "
                 "so the build fails until you pass --build-arg BASE_IMAGE=IMAGE@sha256:<digest> "
                 f"or re-render with `samebits render containerfile {env.name} --base "
                 "IMAGE@sha256:<digest>`")
    floors = {v for p in env.platforms if (v := env.lock.meta(f"__glibc.{p}"))}
    glibc = f"glibc >= {max(floors, key=lambda v: tuple(map(int, v.split('.'))))}" if floors \
        else "glibc"
    needs = glibc if has_conda else f"Python {python} as python{python} and {glibc}"
    out = [
        "# syntax=docker/dockerfile:1",
        f"# samebits: the {env.name} environment ({plats}), rendered from",
        f"# {env.origin} (sha256 {env.digest}).",
        f"# Do not edit: samebits render containerfile {env.name}",
        "#",
        "# Build from the repository root (the context holds lockfiles/, containers/, samebits/,",
        f"# verify/):  docker build -f {d}/Containerfile --platform linux/amd64 .",
        "# Not built by samebits' CI, which has no container daemon; `samebits render oci` builds",
        "# the same prefix into an image without one.",
        "#",
        "# Pinned: every package of the lock, by hash (conda: md5 in the explicit file; PyPI: URL",
        "# and sha256, pip --require-hashes --no-deps). Nothing is resolved at build time.",
        *_comment(f"Base image: {what_base}. The base must provide {needs}."),
    ]
    if has_conda:
        mm_state = ("pinned by digest" if _is_pinned(mm) else
                    "NOT pinned: placeholder digest; pass --build-arg MICROMAMBA_IMAGE=...@sha256:")
        out += _comment(f"micromamba image (creates the conda part): {mm_state}.")
    if gpu:
        out += _comment("GPU: no NVIDIA driver library (libcuda) is in the image; the "
                        "container runtime mounts the host's.")
    out += ["", f"ARG BASE_IMAGE={base}"]
    if has_conda:
        out += [f"ARG MICROMAMBA_IMAGE={mm}", "", "FROM ${MICROMAMBA_IMAGE} AS conda",
                "ARG TARGETARCH", "USER root",
                f"COPY {' '.join(f'{d}/{p}{EXPLICIT_SUFFIX}' for p in env.platforms)} "
                "/opt/samebits/",
                f"RUN set -eu; {_arch_case(env)}; \\",
                f"    micromamba create --yes --prefix {prefix} "
                f"--file /opt/samebits/$platform{EXPLICIT_SUFFIX}; \\",
                "    micromamba clean --all --yes"]
    out += ["", "FROM ${BASE_IMAGE}", "ARG TARGETARCH"]
    env_lines = [f"PATH={prefix}/bin:$PATH"]
    if gpu:
        env_lines = ["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                     *env_lines]
    out.append("ENV " + " \\\n    ".join(env_lines))
    out.append(f"COPY {env.origin} /opt/samebits/lock.conda-lock.yml")
    stages = {p: len(pip_stages(env, p)) for p in env.platforms if env.pip(p)}
    if has_pip:
        reqs = " ".join(f"{d}/{stage_file(p, k)}" for p, n in stages.items() for k in range(n))
        out.append(f"COPY {reqs} /opt/samebits/")
    if has_conda:
        out.append(f"COPY --from=conda {prefix} {prefix}")
    out.append(f"COPY {VERIFIER_REQUIREMENTS} /opt/samebits/")
    out.append("COPY samebits /opt/samebits/src/samebits")
    out.append("COPY verify /opt/samebits/src/verify")
    py = f"{prefix}/bin/python" if has_conda else f"python{python}"
    run = [f"RUN set -eu; {_arch_case(env)}"]
    if has_pip:
        pip = "install --no-cache-dir --no-deps --require-hashes --only-binary=:all: " \
              f"--no-compile -r /opt/samebits/$platform{REQUIREMENTS_SUFFIX}"
        # the later stages (the lock's shared paths): each file, where this platform has it
        later = [f"for f in /opt/samebits/$platform.requirements-{k + 1}.txt; do "
                 f'if [ -e "$f" ]; then {{pip}} -r "$f"; fi; done'
                 for k in range(1, max(stages.values(), default=1))]
        stage = "install --no-cache-dir --no-deps --require-hashes --only-binary=:all: " \
                "--no-compile"
        if has_conda:
            run += [f"{py} -m venv /tmp/pip", f"/tmp/pip/bin/python -m pip --python {py} {pip}",
                    *(s.format(pip=f"/tmp/pip/bin/python -m pip --python {py} {stage}")
                      for s in later), "rm -rf /tmp/pip"]
        else:
            run += [f"{py} -m venv --without-pip {prefix}",
                    f"{py} -m pip --python {prefix}/bin/python {pip}",
                    *(s.format(pip=f"{py} -m pip --python {prefix}/bin/python {stage}")
                      for s in later)]
    out.append("; \\\n    ".join(run))
    out += [
        "# The check: verify env compares every installed file with the lock; drift fails the",
        "# build. The verifier lives in a throwaway venv, removed in this same step; its",
        "# dependencies are installed by hash, samebits itself runs from the copied source.",
        f"RUN set -eu; {py} -m venv /opt/samebits/tools; \\",
        "    /opt/samebits/tools/bin/pip install --no-cache-dir --quiet --no-deps "
        "--require-hashes --only-binary=:all: \\",
        "        -r /opt/samebits/verifier.requirements.txt; \\",
        "    PYTHONPATH=/opt/samebits/src /opt/samebits/tools/bin/python -m verify env "
        "/opt/samebits/lock.conda-lock.yml \\",
        f"        --prefix {prefix} --platform \"$(cat /opt/samebits/platform)\"; \\",
        "    rm -rf /opt/samebits/tools /opt/samebits/src",
    ]
    return "\n".join(out) + "\n"


def containerfile_files(env: LockedEnv, *, base: str | None = None,
                        micromamba: str | None = None,
                        prefix: str = DEFAULT_PREFIX) -> dict[str, str]:
    """File name (under containers/<env>/) -> text: the Containerfile and what it COPYs."""
    files = {"Containerfile": render_containerfile(env, base=base, micromamba=micromamba,
                                                   prefix=prefix)}
    for p in env.platforms:
        for k in range(len(pip_stages(env, p))):
            files[stage_file(p, k)] = render_requirements(env, p, k)
        if env.conda(p):
            files[f"{p}{EXPLICIT_SUFFIX}"] = render_explicit(env, p)
    return files
