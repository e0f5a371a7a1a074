"""Virtual packages for a target platform, from the spec: never the host's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from samebits.spec.model import EnvironmentSpec, PlatformTarget

if TYPE_CHECKING:
    from rattler import GenericVirtualPackage

LINUX_KERNEL_FLOOR = "5.10"  # conda-lock's default; the oldest kernel the lock promises to run on


def virtual_packages(spec: EnvironmentSpec, target: PlatformTarget) -> dict[str, str]:
    """name -> "version" or "version build", the form conda-lock's virtual-packages.yaml uses."""
    out = {
        "__unix": "0",
        "__linux": LINUX_KERNEL_FLOOR,
        "__glibc": target.glibc,
        "__archspec": f"1 {target.arch}",
    }
    if spec.cuda is not None:
        out["__cuda"] = spec.cuda
    return out


def rattler_virtual_packages(spec: EnvironmentSpec, target: PlatformTarget
                             ) -> list[GenericVirtualPackage]:
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version

    out = []
    for name, value in virtual_packages(spec, target).items():
        version, _, build = value.partition(" ")
        out.append(GenericVirtualPackage(PackageName(name), Version(version),
                                         BuildString(build or "0")))
    return out
