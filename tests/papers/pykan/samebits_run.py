"""The authors' hellokan example (KAN [2,5,1] fitting exp(sin(pi x) + y^2) on data from their
own create_dataset) for the corpus (samebits' own file): 20 LBFGS steps on a CPU; the losses per
step, the final metrics and the trained weights are written where the manifest reads them."""

import json
import os

import torch

from kan import KAN, create_dataset

torch.manual_seed(0)
f = lambda x: torch.exp(torch.sin(torch.pi * x[:, [0]]) + x[:, [1]] ** 2)  # noqa: E731
dataset = create_dataset(f, n_var=2, train_num=500, test_num=500, seed=0)
model = KAN(width=[2, 5, 1], grid=5, k=3, seed=0, ckpt_path="out/ckpt")
history = model.fit(dataset, opt="LBFGS", steps=20, lamb=0.001)

os.makedirs("out", exist_ok=True)
with open("out/train_log.jsonl", "w") as log:
    for step, (train, test) in enumerate(zip(history["train_loss"], history["test_loss"])):
        log.write(json.dumps({"step": step, "train_loss": float(train),
                              "test_loss": float(test)}) + "\n")
with open("out/metrics.json", "w") as out:
    json.dump({"train_loss": float(history["train_loss"][-1]),
               "test_loss": float(history["test_loss"][-1])}, out)
torch.save(model.state_dict(), "out/model.pt")
