"""The conda part: py-rattler (resolvo) against the spec's channels, per target platform."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from samebits import net
from samebits.errors import SolveError, UnreachableError, UnsatisfiableError
from samebits.lock.model import LockedPackage, conda_dependencies
from samebits.solve.virtual import rattler_virtual_packages

if TYPE_CHECKING:
    from rattler import Gateway, RepoDataRecord
from samebits.spec.model import EnvironmentSpec, PlatformTarget


def channel_url(channel: str) -> str:
    from rattler import Channel

    return Channel(channel).base_url.rstrip("/")


def probe_channels(channels: Sequence[str], subdir: str, *, timeout: float) -> None:
    """Fail within ``timeout`` seconds when a remote channel does not answer at all.

    py-rattler has no connect timeout of its own; a firewalled host would hang the solve.
    """
    for ch in channels:
        url = channel_url(ch)
        if not url.startswith(("http://", "https://")):
            continue
        try:
            net.head(f"{url}/{subdir}/repodata.json", timeout=timeout)  # any status: it answered
        except OSError as exc:
            what = (f"did not answer within {timeout:g} s" if net.timed_out(exc)
                    else "is unreachable")
            raise UnreachableError(
                f"channel {ch} ({net.public_url(url)}) {what}: {net.reason(exc)}",
                hint="check the network or the channel name; locks that need it are solved "
                "where it is reachable",
            ) from None


@functools.cache
def shared_gateway(offline: bool) -> Gateway:
    """One Gateway per process: every platform of every environment reads a channel's
    repodata once. (A Gateway caches repodata in memory; a channel re-indexed while this
    process runs is not seen again.)"""
    from rattler import Gateway, SourceConfig

    if offline:
        return Gateway(default_config=SourceConfig(cache_action="force-cache-only"))
    return Gateway()


def _explain(exc: Exception) -> str:
    text = str(exc).strip()
    return text.replace("Cannot solve the request because of: ", "")


async def solve_conda(spec: EnvironmentSpec, target: PlatformTarget, *,
                      exclude_newer: dt.datetime | None, timeout: float,
                      offline: bool = False) -> list[LockedPackage]:
    """Solve ``spec``'s conda dependencies for ``target``; records sorted by name.

    ``offline`` reads remote channels from rattler's repodata cache only.
    """
    import rattler
    from rattler import Channel
    from rattler.exceptions import GatewayError, SolverError

    if not offline:
        await asyncio.to_thread(probe_channels, spec.conda_channels, "noarch", timeout=timeout)
    try:
        records = await asyncio.wait_for(
            rattler.solve(
                sources=[Channel(c) for c in spec.conda_channels],
                specs=list(spec.conda_dependencies),
                gateway=shared_gateway(offline),
                platforms=[target.platform, "noarch"],
                virtual_packages=rattler_virtual_packages(spec, target),
                exclude_newer=exclude_newer,
            ),
            timeout=timeout * 10,
        )
    except SolverError as exc:
        raise UnsatisfiableError(
            f"{spec.file}: the conda dependencies cannot be satisfied on {target.platform} "
            f"(__cuda={spec.cuda or 'none'}, __glibc={target.glibc}):\n{_explain(exc)}",
            hint="relax a pin in [conda] dependencies or change [cuda] version",
        ) from None
    except GatewayError as exc:
        text = str(exc)
        if any(w in text for w in ("error sending request", "dns error", "Connect", "timed out")):
            raise UnreachableError(f"{spec.file}: a conda channel did not answer: {text}",
                                   hint="check the network or the channel URL") from None
        raise SolveError(f"{spec.file}: reading the channels failed: {text}") from None
    except asyncio.TimeoutError:
        raise UnreachableError(
            f"{spec.file}: the conda solve for {target.platform} took over {timeout * 10:g} s",
            hint="raise --timeout or check the network") from None
    except Exception as exc:
        # py-rattler's Invalid*Error classes share no root but their module; anything else
        # is a samebits bug and keeps its traceback.
        if type(exc).__module__ != "exceptions":
            raise
        raise SolveError(f"{spec.file}: rattler refused the request ({type(exc).__name__}): "
                         f"{exc}") from None
    return sorted((_locked(r, target.platform) for r in records), key=lambda p: p.name)


def _locked(rec: RepoDataRecord, platform: str) -> LockedPackage:
    return LockedPackage(
        name=rec.name.normalized,
        version=str(rec.version),
        manager="conda",
        platform=platform,
        url=str(rec.url),
        md5=rec.md5.hex() if isinstance(rec.md5, bytes) else rec.md5,
        sha256=rec.sha256.hex() if isinstance(rec.sha256, bytes) else rec.sha256,
        build=str(rec.build),
        dependencies=conda_dependencies(rec.depends),
    )
