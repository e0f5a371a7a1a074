"""The authors' Unet and GaussianDiffusion (their README's first example) for the corpus
(samebits' own file): a tiny Unet (dim 16, mults 1, 2) learns 50-step diffusion of generated
16x16 images of coloured squares and discs for 150 Adam steps, then draws a seeded sample of
8 images. Seeded, no dataset, no download; each step's loss, the metrics, the weights and the
sampled images are written where the manifest reads them."""

import json
import os

import torch
from denoising_diffusion_pytorch import GaussianDiffusion, Unet

SIZE, STEPS, BATCH = 16, 150, 16


def shapes(n: int, gen: torch.Generator) -> torch.Tensor:
    """n images in [0, 1]: a dark background with one square or disc of a random colour."""
    yy, xx = torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")
    images = torch.full((n, 3, SIZE, SIZE), 0.1)
    for i in range(n):
        colour = torch.rand(3, generator=gen) * 0.8 + 0.2
        r = int(torch.randint(3, 6, (1,), generator=gen))
        cy, cx = (int(v) for v in torch.randint(r, SIZE - r, (2,), generator=gen))
        if torch.rand(1, generator=gen) < 0.5:
            mask = ((yy - cy).abs() <= r) & ((xx - cx).abs() <= r)
        else:
            mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        images[i][:, mask] = colour[:, None]
    return images


torch.manual_seed(0)
data = torch.Generator().manual_seed(1)
model = Unet(dim=16, dim_mults=(1, 2), attn_dim_head=8, attn_heads=2, flash_attn=False)
diffusion = GaussianDiffusion(model, image_size=SIZE, timesteps=50)
optimizer = torch.optim.Adam(diffusion.parameters(), lr=1e-3)
os.makedirs("out", exist_ok=True)
losses = []
with open("out/train_log.jsonl", "w") as log:
    for step in range(STEPS):
        loss = diffusion(shapes(BATCH, data))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        log.write(json.dumps({"step": step, "loss": losses[-1]}) + "\n")

torch.manual_seed(2)
samples = diffusion.sample(batch_size=8)
metrics = {"final_loss": sum(losses[-10:]) / 10, "first_loss": losses[0],
           "sample_mean": samples.mean().item(), "sample_std": samples.std().item()}
with open("out/metrics.json", "w") as f:
    json.dump(metrics, f, indent=2, sort_keys=True)
torch.save(diffusion.model.state_dict(), "out/model.pt")
torch.save({"samples": samples}, "out/samples.pt")
print(json.dumps(metrics))
