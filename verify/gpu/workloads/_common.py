"""What every family module needs: the run context and seeded inputs.

Inputs are drawn in fp32 from a seeded CPU generator, then cast and moved: the same values on
every device and every thread count. Each workload's seed comes from its name, so running a
subset (``--only``) or another order changes nothing.
"""

from __future__ import annotations

import zlib
from typing import Callable, Dict  # noqa: UP035 -- subscripted at run time, on Python 3.8 too

import torch

from samebits._compat import dataclass

Outputs = Dict[str, torch.Tensor]  # noqa: UP006 -- dict[...] at run time is Python 3.9
Fn = Callable[["Context"], Outputs]


class Unavailable(Exception):
    """This workload has no kernel on this device (a CPU has no cuDNN attention)."""


class Refused(Exception):
    """PyTorch refuses this workload under the settings in force (deterministic algorithms);
    the message carries PyTorch's own reason and the profile that runs it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    device: torch.device
    seed: int

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def generator(self, key: str | None = None) -> torch.Generator:
        """A CPU generator seeded by this workload's name, or by ``key`` to share inputs."""
        return torch.Generator(device="cpu").manual_seed(seed_for(key) if key else self.seed)

    def device_generator(self) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(self.seed)

    def randn(self, g: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32,
              grad: bool = False) -> torch.Tensor:
        t = torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype).to(self.device)
        return t.requires_grad_(grad)

    def randint(self, g: torch.Generator, high: int, *shape: int) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=g, dtype=torch.int64).to(self.device)


def seed_for(name: str) -> int:
    return zlib.crc32(name.encode())
