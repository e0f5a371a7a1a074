"""A tiny but real experiment: a small CNN learns to tell four kinds of stripes apart.

    SEED=0 python train.py --steps 200 --out out

The data are generated here (16x16 images of horizontal, vertical, diagonal and
anti-diagonal stripes at random phases, plus noise) from a seeded generator, so the run
needs no download; ``data/stripes.json`` describes them (image size, classes, periods,
noise, how many images), an input the manifest pins by its sha256. Training: 200 SGD steps
with momentum, batches of 32. Writes

    out/train_log.jsonl   one JSON object per step: step, loss, grad_norm
    out/metrics.json      final train loss, test loss and test accuracy
    out/model.pt          the trained state dict (torch.save)
    out/logits.npy        the test set's logits (numpy)

and prints ``step N loss X`` every 10 steps. The seed comes from the environment (``SEED``),
which samebits-paper.toml sets.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

DATA = json.loads((Path(__file__).parent / "data" / "stripes.json").read_text())
SIZE = DATA["size"]
CLASSES = DATA["classes"]


def make_data(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` noisy stripe images and their class (0 horizontal, 1 vertical, 2 and 3 diagonal)."""
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    yy, xx = torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")
    coords = torch.stack([yy, xx, yy + xx, yy - xx]).float()  # one coordinate per class
    low, high = DATA["periods"]
    period = torch.randint(low, high, (n,), generator=g).float()
    phase = torch.rand(n, generator=g) * 6.283185307179586
    wave = torch.sin(coords[labels] * (6.283185307179586 / period)[:, None, None]
                     + phase[:, None, None])
    images = wave + DATA["noise"] * torch.randn(n, SIZE, SIZE, generator=g)
    return images.unsqueeze(1), labels


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(16 * (SIZE // 2) ** 2, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args()
    seed = int(os.environ.get("SEED", "0"))

    g = torch.Generator().manual_seed(seed)
    train_x, train_y = make_data(DATA["train"], g)
    test_x, test_y = make_data(DATA["test"], g)
    torch.manual_seed(seed)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "train_log.jsonl", "w") as log:
        for step in range(1, args.steps + 1):
            idx = torch.randint(0, len(train_x), (args.batch,), generator=g)
            opt.zero_grad()
            loss = loss_fn(model(train_x[idx]), train_y[idx])
            loss.backward()
            grad_norm = torch.linalg.vector_norm(
                torch.cat([q.grad.flatten() for q in model.parameters()]))
            opt.step()
            log.write(json.dumps({"step": step, "loss": loss.item(),
                                  "grad_norm": grad_norm.item()}) + "\n")
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.9g}", flush=True)

    model.eval()
    with torch.no_grad():
        logits = model(test_x)
        train_loss = loss_fn(model(train_x), train_y).item()
    metrics = {"train_loss": train_loss,
               "test_loss": loss_fn(logits, test_y).item(),
               "test_accuracy": (logits.argmax(1) == test_y).float().mean().item()}
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    torch.save(model.state_dict(), args.out / "model.pt")
    np.save(args.out / "logits.npy", logits.numpy())
    print(f"test accuracy {metrics['test_accuracy']:.4f}")


if __name__ == "__main__":
    main()
