"""Real-ESRGAN's networks trained with the L1 pixel loss of their RealESRNet stage
(options/train_realesrnet_x4plus.yml: pixel_opt L1Loss, Adam with betas 0.9/0.99), for the
corpus (samebits' own file), on generated pairs instead of DF2K: 160 high-resolution 64x64
colour images drawn with OpenCV (rectangles, circles, lines, blurred, with noise; numpy's
seeded generator) and their 16x16 low-resolution inputs made by cv2.resize (bicubic), each
pair flipped or rotated by basicsr's augment. Both x4 generators are built through basicsr's
registry as their options do: their SRVGGNetCompact (realesrgan/archs/srvgg_arch.py, the
realesr-general/animevideo models) and basicsr's RRDBNet (RealESRGAN_x4plus), each smaller
than the released models to run on a CPU, trained 40 steps on the same batches. Each step's
losses, the PSNR (basicsr's calculate_psnr, crop 4) of the last batch and of 8 held-out
images, against bicubic upsampling, and both trained weights are written where the manifest
reads them."""

import json
import os
import random
import sys

import cv2
import numpy as np
import torch
from basicsr.archs import build_network  # importing basicsr.archs registers RRDBNet
from basicsr.data.transforms import augment
from basicsr.losses import build_loss
from basicsr.metrics.psnr_ssim import calculate_psnr
from basicsr.utils import img2tensor, tensor2img

sys.path.insert(0, "realesrgan/archs")  # their arch module alone: the package's __init__
import srvgg_arch  # noqa: E402,F401     imports a version.py only their setup.py writes

STEPS, BATCH, N_TRAIN, N_VAL, HR, SCALE = 40, 8, 160, 8, 64, 4

random.seed(0)
torch.manual_seed(0)
rng = np.random.default_rng(0)


def picture():
    """One 64x64 BGR uint8 image of random shapes, blurred, with a little noise."""
    img = np.full((HR, HR, 3), rng.integers(0, 256, 3), dtype=np.uint8)
    for _ in range(6):
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        x0, y0, x1, y1 = (int(v) for v in rng.integers(0, HR, 4))
        shape = rng.integers(0, 3)
        if shape == 0:
            cv2.rectangle(img, (x0, y0), (x1, y1), color, -1)
        elif shape == 1:
            cv2.circle(img, (x0, y0), int(rng.integers(3, HR // 3)), color, -1, cv2.LINE_AA)
        else:
            cv2.line(img, (x0, y0), (x1, y1), color, int(rng.integers(1, 4)), cv2.LINE_AA)
    img = cv2.GaussianBlur(img, (3, 3), 0.8)
    noise = rng.normal(0.0, 3.0, img.shape)
    return np.clip(img.astype(np.float64) + noise, 0, 255).astype(np.uint8)


def pair():
    gt = picture()
    lq = cv2.resize(gt, (HR // SCALE, HR // SCALE), interpolation=cv2.INTER_CUBIC)
    gt, lq = augment([gt, lq], hflip=True, rotation=True)
    gt, lq = img2tensor([gt.astype(np.float32) / 255.0, lq.astype(np.float32) / 255.0])
    return lq, gt


train = [pair() for _ in range(N_TRAIN)]
val = [pair() for _ in range(N_VAL)]
nets = {
    "srvgg": build_network({"type": "SRVGGNetCompact", "num_in_ch": 3, "num_out_ch": 3,
                            "num_feat": 32, "num_conv": 8, "upscale": SCALE,
                            "act_type": "prelu"}),
    "rrdb": build_network({"type": "RRDBNet", "num_in_ch": 3, "num_out_ch": 3, "scale": SCALE,
                           "num_feat": 32, "num_block": 2, "num_grow_ch": 16}),
}
l1 = build_loss({"type": "L1Loss", "loss_weight": 1.0, "reduction": "mean"})
optims = {name: torch.optim.Adam(net.parameters(), lr=5e-4, weight_decay=0, betas=(0.9, 0.99))
          for name, net in nets.items()}


def psnr(sr, gt):
    """basicsr's PSNR over a batch: the mean of each image's, on uint8 images as they save."""
    return float(np.mean([calculate_psnr(tensor2img(s), tensor2img(g), crop_border=4)
                          for s, g in zip(sr, gt)]))


def bicubic(lq):
    up = [cv2.resize(tensor2img(x), (HR, HR), interpolation=cv2.INTER_CUBIC) for x in lq]
    return torch.stack(img2tensor([u.astype(np.float32) / 255.0 for u in up]))


os.makedirs("out", exist_ok=True)
with open("out/train_log.jsonl", "w") as log:
    for step in range(STEPS):
        idx = torch.randperm(N_TRAIN)[:BATCH].tolist()
        lq = torch.stack([train[i][0] for i in idx])
        gt = torch.stack([train[i][1] for i in idx])
        row = {"step": step}
        for name, net in nets.items():
            net.train()
            optims[name].zero_grad()
            loss = l1(net(lq), gt)
            loss.backward()
            optims[name].step()
            row[f"{name}_l1"] = loss.item()
        log.write(json.dumps(row) + "\n")

metrics = {}
val_lq = torch.stack([p[0] for p in val])
val_gt = torch.stack([p[1] for p in val])
with torch.no_grad():
    for name, net in nets.items():
        net.eval()
        metrics[f"{name}_psnr_last_batch"] = psnr(net(lq), gt)
        metrics[f"{name}_psnr_val"] = psnr(net(val_lq), val_gt)
metrics["bicubic_psnr_last_batch"] = psnr(bicubic(lq), gt)
metrics["bicubic_psnr_val"] = psnr(bicubic(val_lq), val_gt)
print(json.dumps(metrics), flush=True)
with open("out/metrics.json", "w") as out:
    json.dump(metrics, out)
for name, net in nets.items():
    torch.save(net.state_dict(), f"out/{name}.pth")
