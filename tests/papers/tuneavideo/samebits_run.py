"""Tune-A-Video's one-shot tuning step on a generated latent video, for the corpus (samebits'
own file).

The authors' UNet3DConditionModel (tuneavideo/models: inflated convolutions, sparse-causal
frame attention, temporal attention), shrunk to two blocks of 32 and 64 channels, is tuned as
train_tuneavideo.py tunes it: everything frozen but the modules their config names
(configs/man-skiing.yaml: attn1.to_q, attn2.to_q, attn_temp), AdamW with their defaults, the
gradient clipped to 1, epsilon prediction under a DDPM schedule (Stable Diffusion v1-4's
scheduler settings, which their script reads from the checkpoint). The checkpoint's VAE and
text encoder are not downloaded: the 'video' is a generated 4-frame latent clip (a bright blob
moving across an 8x8 latent) and the prompt's embedding a seeded tensor. The learning rate is
1e-3 rather than their 3e-5, so that 120 steps on a CPU move the weights. Each step's loss, the
loss at fixed timesteps and noise after tuning, and the tuned weights are written where the
manifest reads them.

One attention head per layer (attention_head_dim=1): diffusers 0.11.1's CrossAttention scores
with torch.baddbmm(torch.empty(...), q, k, beta=0), and torch 1.12.1's CPU kernel for small
products (head width x frames x frames < 400, as with 8 heads of 4 channels over 4 frames)
multiplies the uninitialised input by 0 instead of ignoring it, so a stray inf in that memory
makes the temporal attention NaN at a random step. With one head every product takes the BLAS
path; a run with every torch.empty filled with inf gave the same bits as a plain run.

The requirements pin bitsandbytes==0.35.4, whose libraries are CUDA builds: train_tuneavideo.py
imports it only with use_8bit_adam (off in their configs), and nothing this run imports loads
it, which the end of the run asserts (a CPU run must not depend on it)."""

import json
import os
import sys

import torch
import torch.nn.functional as F
from diffusers import DDPMScheduler
from omegaconf import OmegaConf
from tuneavideo.models.unet import UNet3DConditionModel

config = OmegaConf.load("configs/man-skiing.yaml")
STEPS, FRAMES, SIZE = 120, 4, 8
torch.manual_seed(config.seed)

unet = UNet3DConditionModel(
    sample_size=SIZE, block_out_channels=(32, 64), layers_per_block=1,
    down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
    up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
    cross_attention_dim=32, attention_head_dim=1)
scheduler = DDPMScheduler(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                          beta_schedule="scaled_linear")

unet.requires_grad_(False)  # as train_tuneavideo.py: only the config's modules are tuned
for name, module in unet.named_modules():
    if name.endswith(tuple(config.trainable_modules)):
        for params in module.parameters():
            params.requires_grad = True
optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-3, betas=(0.9, 0.999),
                              weight_decay=1e-2, eps=1e-08)

# The latent clip (b c f h w, scaled like 0.18215 * a VAE latent) and the prompt's embedding.
yy, xx = torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")
frames = [torch.exp(-((yy - 3.5) ** 2 + (xx - 1.5 - 1.5 * f) ** 2) / 4) for f in range(FRAMES)]
colour = torch.tensor([1.0, -0.5, 0.3, 0.8])
latents = (colour[:, None, None, None] * torch.stack(frames)[None])[None] * 0.18215 * 5
prompt = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(1))

os.makedirs("out", exist_ok=True)
unet.train()
with open("out/train_log.jsonl", "w") as log:
    for step in range(STEPS):
        noise = torch.randn_like(latents)
        timesteps = torch.randint(0, scheduler.num_train_timesteps, (1,)).long()
        noisy_latents = scheduler.add_noise(latents, noise, timesteps)
        model_pred = unet(noisy_latents, timesteps, prompt).sample
        loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(unet.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        log.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")

unet.eval()
fixed = torch.Generator().manual_seed(2)
eval_losses = {}
with torch.no_grad():
    for t in (50, 250, 500, 750):
        noise = torch.randn(latents.shape, generator=fixed)
        noisy = scheduler.add_noise(latents, noise, torch.tensor([t]))
        pred = unet(noisy, torch.tensor([t]), prompt).sample
        eval_losses[f"eval_loss_t{t}"] = F.mse_loss(pred, noise).item()
metrics = {"eval_loss": sum(eval_losses.values()) / len(eval_losses), "final_loss": loss.item(),
           **eval_losses}
with open("out/metrics.json", "w") as f:
    json.dump(metrics, f, indent=2, sort_keys=True)
torch.save({k: v for k, v in unet.state_dict().items()}, "out/unet.pt")
print(json.dumps(metrics))
assert "bitsandbytes" not in sys.modules, "bitsandbytes was loaded on a CPU run"
