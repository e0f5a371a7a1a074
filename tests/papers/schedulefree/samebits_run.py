"""Schedule-Free AdamW (the authors' schedulefree.AdamWScheduleFree) training a small MLP on a
generated regression for the corpus (samebits' own file): seeded, 300 steps on a CPU; the loss
per step, the evaluation loss at the averaged point (optimizer.eval(), as the README says to do
before evaluating) and the weights are written where the manifest reads them."""

import json
import os

import torch

import schedulefree

torch.manual_seed(0)
x = torch.randn(2048, 16)
w = torch.randn(16, 1)
y = torch.sin(x @ w) + 0.05 * torch.randn(2048, 1)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
optimizer = schedulefree.AdamWScheduleFree(model.parameters(), lr=0.01, warmup_steps=20)

os.makedirs("out", exist_ok=True)
with open("out/train_log.jsonl", "w") as log:
    model.train()
    optimizer.train()
    for step in range(300):
        batch = torch.randint(0, 2048, (128,))
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            log.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
model.eval()
optimizer.eval()
with torch.no_grad():
    final = torch.nn.functional.mse_loss(model(x), y).item()
with open("out/metrics.json", "w") as out:
    json.dump({"eval_loss": final}, out)
torch.save(model.state_dict(), "out/model.pt")
