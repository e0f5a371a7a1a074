"""The authors' FNO trained by their own Trainer, as their examples/models/plot_FNO_darcy.py
does, for the corpus (samebits' own file), on generated data instead of the bundled Darcy
files: a smooth periodic random field a on [0, 1)^2 (Gaussian coefficients with a power-law
spectrum, numpy's seeded generator) mapped to the u of (1 - 0.01 lap) u = a, solved exactly by
FFT in float64: a fixed linear operator for the FNO to learn. Fields are made at 32x32; the
model trains at 16x16 (every other point), as their small Darcy example does, and is tested at
16x16 and, zero-shot, at 32x32.
Their FNO, AdamW, H1 training loss and LpLoss/H1Loss evaluation, their DefaultDataProcessor with
UnitGaussianNormalizers; 12 epochs on a CPU. Each epoch's losses, the final relative L2 errors
and the trained weights are written where the manifest reads them."""

import json
import os

import numpy as np
import torch
from torch.utils.data import DataLoader

from neuralop import H1Loss, LpLoss, Trainer
from neuralop.data.datasets.tensor_dataset import TensorDataset
from neuralop.data.transforms.data_processors import DefaultDataProcessor
from neuralop.data.transforms.normalizers import UnitGaussianNormalizer
from neuralop.models import FNO
from neuralop.training import AdamW

EPOCHS, N_TRAIN, N_TEST, RES = 12, 256, 64, 32


def fields(n, rng):
    """n pairs (a, u) at RES x RES, float32, shaped (n, 1, RES, RES)."""
    k = np.fft.fftfreq(RES, d=1.0 / RES)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    spectrum = (k2 + 4.0) ** -1.5
    coeff = rng.standard_normal((n, RES, RES)) + 1j * rng.standard_normal((n, RES, RES))
    a = np.fft.ifft2(coeff * spectrum).real
    a /= a.std(axis=(1, 2), keepdims=True)
    u = np.fft.ifft2(np.fft.fft2(a) / (1.0 + 0.01 * 4 * np.pi**2 * k2)).real
    as_tensor = lambda x: torch.from_numpy(x[:, None].astype(np.float32))  # noqa: E731
    return as_tensor(a), as_tensor(u)


torch.manual_seed(0)
rng = np.random.default_rng(0)
x_train, y_train = (t[:, :, ::2, ::2].contiguous() for t in fields(N_TRAIN, rng))
x_test32, y_test32 = fields(N_TEST, rng)
x_test16, y_test16 = (t[:, :, ::2, ::2].contiguous() for t in (x_test32, y_test32))

in_normalizer = UnitGaussianNormalizer(dim=[0, 2, 3])
in_normalizer.fit(x_train)
out_normalizer = UnitGaussianNormalizer(dim=[0, 2, 3])
out_normalizer.fit(y_train)
data_processor = DefaultDataProcessor(in_normalizer=in_normalizer, out_normalizer=out_normalizer)

train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
test_loaders = {16: DataLoader(TensorDataset(x_test16, y_test16), batch_size=32),
                32: DataLoader(TensorDataset(x_test32, y_test32), batch_size=32)}

model = FNO(n_modes=(8, 8), in_channels=1, out_channels=1, hidden_channels=24,
            projection_channel_ratio=2)
optimizer = AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
l2loss, h1loss = LpLoss(d=2, p=2), H1Loss(d=2)
trainer = Trainer(model=model, n_epochs=EPOCHS, device="cpu", data_processor=data_processor,
                  wandb_log=False, eval_interval=1, use_distributed=False, verbose=False)

os.makedirs("out", exist_ok=True)
with open("out/train_log.jsonl", "w") as log:
    for epoch in range(EPOCHS):
        # the authors' train(), one epoch a call, so that every epoch's metrics are returned
        trainer.start_epoch, trainer.n_epochs = epoch, epoch + 1
        metrics = trainer.train(train_loader=train_loader, test_loaders=test_loaders,
                                optimizer=optimizer, scheduler=scheduler, regularizer=False,
                                training_loss=h1loss, eval_losses={"h1": h1loss, "l2": l2loss})
        row = {"epoch": epoch, "train_h1": float(metrics["train_err"])}
        row.update({f"test{res}_{name}": float(metrics[f"{res}_{name}"])
                    for res in test_loaders for name in ("l2", "h1")})
        log.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
with open("out/metrics.json", "w") as out:
    json.dump({"rel_l2_16": row["test16_l2"], "rel_l2_32": row["test32_l2"],
               "rel_h1_16": row["test16_h1"]}, out)
# the weights alone: their state_dict also holds _metadata (the constructor's arguments, the
# gelu function among them), which torch.load(weights_only=True) refuses
torch.save({k: v for k, v in model.state_dict().items() if torch.is_tensor(v)}, "out/fno.pt")
