"""The authors' own test (tests/test_simple_math.py: a KAN [2,2,1] learning (u+v)/(1+uv) with
LBFGS on random inputs) for the corpus (samebits' own file): seeded, 30 steps instead of 100,
each step's loss and the trained weights written where the manifest reads them. The grid is
not updated (the test updates it every 20 steps): on a CPU, the torch 2.3 the lock takes
fails in the grid update's torch.linalg.lstsq (MKL: "Parameter 6 was incorrect on entry to
SGELSY"), whatever samebits does."""

import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, "src")  # the authors' src layout, as an editable install would
from efficient_kan import KAN  # noqa: E402

torch.manual_seed(0)
kan = KAN([2, 2, 1], base_activation=nn.Identity)
optimizer = torch.optim.LBFGS(kan.parameters(), lr=1)
os.makedirs("out", exist_ok=True)
with open("out/train_log.jsonl", "w") as log:
    for i in range(30):
        losses = {}

        def closure():
            optimizer.zero_grad()
            x = torch.rand(1024, 2)
            y = kan(x)
            u, v = x[:, 0], x[:, 1]
            loss = nn.functional.mse_loss(y.squeeze(-1), (u + v) / (1 + u * v))
            reg_loss = kan.regularization_loss(1, 0)
            (loss + 1e-5 * reg_loss).backward()
            losses.update(mse_loss=loss.item(), reg_loss=reg_loss.item())
            return loss + reg_loss

        optimizer.step(closure)
        log.write(json.dumps({"step": i, **losses}) + "\n")
torch.save(kan.state_dict(), "out/kan.pt")
