"""The authors' TabM (tabm.py, the module their package ships) trained as their example.ipynb
trains it, for the corpus (samebits' own file), on generated data instead of the California
housing download: 4000 rows of 6 numerical features and 2 categorical ones (4 and 7
categories), the target Friedman's #1 function of the first five numerical features plus a
per-category offset and Gaussian noise, all drawn from torch's seeded generator (the
environment has torch alone: no numpy, no scikit-learn). Standardised features and labels
(the notebook's "simple preprocessing strategy"), their piecewise-linear embeddings
(rtdl_num_embeddings, version "B"), TabM.make with a smaller backbone than its defaults (k=16,
d_block=128) to run in about a minute on a CPU, AdamW with gradient clipping, and their loss:
each of the k submodels trained on the same batches. Each epoch's mean training loss and
validation/test RMSE of the mean of the k predictions, the final RMSEs and the trained weights
are written where the manifest reads them."""

import json
import math
import os

import rtdl_num_embeddings
import torch
import torch.nn as nn

from tabm import TabM

EPOCHS, BATCH, N = 12, 256, 4000
CAT_CARDINALITIES = [4, 7]

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
x_num = torch.rand(N, 6, generator=g)
x_cat = torch.column_stack([torch.randint(0, c, (N,), generator=g) for c in CAT_CARDINALITIES])
offsets = [torch.randn(c, generator=g) for c in CAT_CARDINALITIES]
y = (10 * torch.sin(math.pi * x_num[:, 0] * x_num[:, 1]) + 20 * (x_num[:, 2] - 0.5) ** 2
     + 10 * x_num[:, 3] + 5 * x_num[:, 4] + 2 * offsets[0][x_cat[:, 0]]
     + 2 * offsets[1][x_cat[:, 1]] + 0.5 * torch.randn(N, generator=g))

perm = torch.randperm(N, generator=g)
parts = {"train": perm[:2560], "val": perm[2560:3200], "test": perm[3200:]}
mean, std = x_num[parts["train"]].mean(0), x_num[parts["train"]].std(0)
y_mean, y_std = y[parts["train"]].mean().item(), y[parts["train"]].std().item()
data = {part: {"x_num": (x_num[idx] - mean) / std, "x_cat": x_cat[idx], "y": y[idx]}
        for part, idx in parts.items()}
y_train = (data["train"]["y"] - y_mean) / y_std

num_embeddings = rtdl_num_embeddings.PiecewiseLinearEmbeddings(
    rtdl_num_embeddings.compute_bins(data["train"]["x_num"], n_bins=48),
    d_embedding=16, activation=False, version="B")
model = TabM.make(n_num_features=6, cat_cardinalities=CAT_CARDINALITIES, d_out=1,
                  num_embeddings=num_embeddings, k=16, d_block=128)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=3e-4)


def apply_model(part, idx):
    return model(data[part]["x_num"][idx], data[part]["x_cat"][idx]).squeeze(-1).float()


def loss_fn(y_pred, y_true):
    # the notebook's share_training_batches=True: (batch, k) against each label k times
    return nn.functional.mse_loss(y_pred.flatten(0, 1), y_true.repeat_interleave(model.k))


@torch.inference_mode()
def rmse(part):
    model.eval()
    idx = torch.arange(len(data[part]["y"]))
    y_pred = apply_model(part, idx) * y_std + y_mean
    return ((y_pred.mean(1) - data[part]["y"]) ** 2).mean().sqrt().item()


os.makedirs("out", exist_ok=True)
with open("out/train_log.jsonl", "w") as log:
    for epoch in range(EPOCHS):
        model.train()
        losses = []
        for batch in torch.randperm(len(y_train), generator=g).split(BATCH):
            optimizer.zero_grad()
            loss = loss_fn(apply_model("train", batch), y_train[batch])
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        row = {"epoch": epoch, "train_loss": sum(losses) / len(losses),
               "val_rmse": rmse("val"), "test_rmse": rmse("test")}
        log.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
with open("out/metrics.json", "w") as out:
    json.dump({"val_rmse": row["val_rmse"], "test_rmse": row["test_rmse"]}, out)
torch.save(model.state_dict(), "out/tabm.pt")
