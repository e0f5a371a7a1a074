"""BigVGAN (Lee et al., ICLR 2023), NVIDIA/BigVGAN, for the corpus (samebits' own file): the
authors' training step (train.py's loop body) on a CPU for 24 steps, on generated audio.

The generator is their BigVGAN (bigvgan.py: AMP blocks with SnakeBeta and the alias-free torch
activation, use_cuda_kernel=False) built from their smallest config,
configs/bigvgan_base_22khz_80band.json, with fewer channels (upsample_initial_channel 32 for
512), three upsampling stages for four (rates 8, 8, 4 for 8, 8, 2, 2: the same hop of 256), a
segment of 2,048 samples for 8,192 and a batch of 2 for 32. The discriminators are that
config's: their MultiPeriodDiscriminator and MultiResolutionDiscriminator (discriminators.py,
channel multiplier 0.25 for 1). The losses are theirs (loss.py's discriminator_loss,
generator_loss and feature_loss, and the L1 mel loss x45 on meldataset.py's mel_spectrogram),
with their AdamW settings, gradient clipping and per-epoch ExponentialLR. The audio is a seeded
set of sine mixtures under syllable-like envelopes at 22.05 kHz, normalised as their MelDataset
normalises (librosa.util.normalize x 0.95). At the end, train.py's validation metrics on two
held-out clips: the mel L1 error, wide-band PESQ at 16 kHz (their torchaudio resampler, the
pesq package) and auraloss' multi-resolution STFT loss. Written under out/: each step's losses,
the metrics and the generator's weights (as their checkpoints hold them, {"generator":
state_dict})."""

import itertools
import json
import math
import os

import auraloss
import librosa
import numpy as np
import torch
import torch.nn.functional as F
import torchaudio as ta
from bigvgan import BigVGAN, load_hparams_from_json
from discriminators import MultiPeriodDiscriminator, MultiResolutionDiscriminator
from loss import discriminator_loss, feature_loss, generator_loss
from meldataset import MAX_WAV_VALUE, mel_spectrogram
from pesq import pesq

STEPS, CLIPS, VAL_CLIPS, VAL_SECONDS = 24, 32, 2, 0.5

h = load_hparams_from_json("configs/bigvgan_base_22khz_80band.json")
h.update(upsample_rates=[8, 8, 4], upsample_kernel_sizes=[16, 16, 8], upsample_initial_channel=32,
         discriminator_channel_mult=0.25, segment_size=2048, batch_size=2)
torch.manual_seed(h.seed)
rng = np.random.default_rng(h.seed)
os.makedirs("out", exist_ok=True)


def clip(samples: int) -> np.ndarray:
    """A sine mixture (3-5 partials, 80 Hz - 3 kHz) under a 3-6 Hz syllable-like envelope."""
    t = np.arange(samples) / h.sampling_rate
    audio = np.zeros(samples)
    for _ in range(rng.integers(3, 6)):
        freq, phase, amp = rng.uniform(80, 3000), rng.uniform(0, 2 * np.pi), rng.uniform(0.2, 1)
        audio += amp * np.sin(2 * np.pi * freq * t + phase)
    envelope = 0.5 * (1 - np.cos(2 * np.pi * rng.uniform(3, 6) * t + rng.uniform(0, np.pi)))
    audio = audio * envelope + 0.01 * rng.standard_normal(samples)
    return (librosa.util.normalize(audio) * 0.95).astype(np.float32)


def mels(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """MelDataset's pair: the generator's input (fmax) and the loss target (fmax_for_loss)."""
    x = mel_spectrogram(y, h.n_fft, h.num_mels, h.sampling_rate, h.hop_size, h.win_size,
                        h.fmin, h.fmax)
    y_mel = mel_spectrogram(y, h.n_fft, h.num_mels, h.sampling_rate, h.hop_size, h.win_size,
                            h.fmin, h.fmax_for_loss)
    return x, y_mel


train = torch.from_numpy(np.stack([clip(h.segment_size) for _ in range(CLIPS)]))
val_len = int(VAL_SECONDS * h.sampling_rate) // h.hop_size * h.hop_size
val = torch.from_numpy(np.stack([clip(val_len) for _ in range(VAL_CLIPS)]))

generator = BigVGAN(h, use_cuda_kernel=False)
mpd = MultiPeriodDiscriminator(h)
mrd = MultiResolutionDiscriminator(h)
optim_g = torch.optim.AdamW(generator.parameters(), h.learning_rate,
                            betas=[h.adam_b1, h.adam_b2])
optim_d = torch.optim.AdamW(itertools.chain(mrd.parameters(), mpd.parameters()),
                            h.learning_rate, betas=[h.adam_b1, h.adam_b2])
scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=h.lr_decay)
scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=h.lr_decay)
clip_grad_norm = h.get("clip_grad_norm", 1000.0)
lambda_melloss = h.get("lambda_melloss", 45.0)
per_epoch = CLIPS // h.batch_size

generator.train()
mpd.train()
mrd.train()
with open("out/train_log.jsonl", "w") as log:
    for steps in range(STEPS):
        i = steps % per_epoch
        y = train[i * h.batch_size:(i + 1) * h.batch_size]
        x, y_mel = mels(y)
        y = y.unsqueeze(1)

        y_g_hat = generator(x)
        y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1), h.n_fft, h.num_mels, h.sampling_rate,
                                      h.hop_size, h.win_size, h.fmin, h.fmax_for_loss)

        optim_d.zero_grad()
        y_df_hat_r, y_df_hat_g, _, _ = mpd(y, y_g_hat.detach())
        loss_disc_f, _, _ = discriminator_loss(y_df_hat_r, y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, _, _ = mrd(y, y_g_hat.detach())
        loss_disc_s, _, _ = discriminator_loss(y_ds_hat_r, y_ds_hat_g)
        loss_disc_all = loss_disc_s + loss_disc_f
        loss_disc_all.backward()
        grad_norm_mpd = torch.nn.utils.clip_grad_norm_(mpd.parameters(), clip_grad_norm)
        grad_norm_mrd = torch.nn.utils.clip_grad_norm_(mrd.parameters(), clip_grad_norm)
        optim_d.step()

        optim_g.zero_grad()
        loss_mel = F.l1_loss(y_mel, y_g_hat_mel) * lambda_melloss
        y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = mpd(y, y_g_hat)
        loss_fm_f = feature_loss(fmap_f_r, fmap_f_g)
        loss_gen_f, _ = generator_loss(y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = mrd(y, y_g_hat)
        loss_fm_s = feature_loss(fmap_s_r, fmap_s_g)
        loss_gen_s, _ = generator_loss(y_ds_hat_g)
        loss_gen_all = loss_gen_s + loss_gen_f + loss_fm_s + loss_fm_f + loss_mel
        loss_gen_all.backward()
        grad_norm_g = torch.nn.utils.clip_grad_norm_(generator.parameters(), clip_grad_norm)
        optim_g.step()

        log.write(json.dumps({
            "step": steps, "loss_disc_all": loss_disc_all.item(),
            "loss_gen_all": loss_gen_all.item(), "mel_error": loss_mel.item() / lambda_melloss,
            "loss_fm": (loss_fm_f + loss_fm_s).item(),
            "loss_gen_adv": (loss_gen_f + loss_gen_s).item(),
            "grad_norm_g": grad_norm_g.item(), "grad_norm_mpd": grad_norm_mpd.item(),
            "grad_norm_mrd": grad_norm_mrd.item()}) + "\n")
        if i == per_epoch - 1:  # train.py steps the schedulers once an epoch
            scheduler_g.step()
            scheduler_d.step()

# train.py's validate(): mel L1, wide-band PESQ at 16 kHz, multi-resolution STFT loss.
generator.eval()
pesq_resampler = ta.transforms.Resample(h.sampling_rate, 16000)
loss_mrstft = auraloss.freq.MultiResolutionSTFTLoss(device="cpu")
val_err, val_pesq, val_mrstft = [], [], []
with torch.no_grad():
    for j in range(VAL_CLIPS):
        y = val[j:j + 1]
        x, y_mel = mels(y)
        y_g_hat = generator(x)
        y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1), h.n_fft, h.num_mels, h.sampling_rate,
                                      h.hop_size, h.win_size, h.fmin, h.fmax_for_loss)
        min_t = min(y_mel.size(-1), y_g_hat_mel.size(-1))
        val_err.append(F.l1_loss(y_mel[..., :min_t], y_g_hat_mel[..., :min_t]).item())
        y_16k = pesq_resampler(y)
        y_g_hat_16k = pesq_resampler(y_g_hat.squeeze(1))
        y_int_16k = (y_16k[0] * MAX_WAV_VALUE).short().numpy()
        y_g_hat_int_16k = (y_g_hat_16k[0] * MAX_WAV_VALUE).short().numpy()
        val_pesq.append(pesq(16000, y_int_16k, y_g_hat_int_16k, "wb"))
        min_t = min(y.size(-1), y_g_hat.size(-1))
        val_mrstft.append(loss_mrstft(y_g_hat[..., :min_t], y.unsqueeze(1)[..., :min_t]).item())

metrics = {"val_mel_l1": sum(val_err) / VAL_CLIPS, "val_pesq_wb": sum(val_pesq) / VAL_CLIPS,
           "val_mrstft": sum(val_mrstft) / VAL_CLIPS, "final_loss_gen_all": loss_gen_all.item(),
           "final_loss_disc_all": loss_disc_all.item(),
           "generator_params": sum(p.numel() for p in generator.parameters())}
assert all(math.isfinite(v) for v in metrics.values()), metrics
with open("out/metrics.json", "w") as f:
    json.dump(metrics, f, indent=1, sort_keys=True)
torch.save({"generator": generator.state_dict()}, "out/bigvgan_generator.pt")
